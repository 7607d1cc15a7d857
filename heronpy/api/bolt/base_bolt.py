"""What every heronpy bolt has (``heronpy.api.bolt.base_bolt``)."""

from __future__ import annotations

from typing import Any

from heronpy.api._specs import component_spec
from heronpy.api.component.base_component import BaseComponent
from heronpy.api.component.component_spec import HeronComponentSpec
from heronpy.api.stream import Stream
from heronpy.api.tuple import TupleHelper


class BaseBolt(BaseComponent):
    """``spec`` (place it in a topology), ``emit``, ``ack``, ``fail``, ``is_tick``."""

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1,
             config: dict[str, Any] | None = None,
             optional_outputs: Any = None) -> HeronComponentSpec:
        """This bolt in a topology: ``inputs`` is ``{spec or spec[stream]: Grouping}`` or a
        list of them (shuffle); ``par`` its parallelism; ``config`` its own settings."""
        return component_spec(cls, False, name, inputs, par, config, optional_outputs)

    def emit(self, tup: Any, stream: str = Stream.DEFAULT_STREAM_ID, anchors: Any = None,
             direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        """Emit ``tup`` (a list or tuple) on ``stream``; ``anchors`` are accepted and not
        needed (checkpoints, not tuple trees, give the guarantee here)."""
        return self.delegate.emit(tup, stream, anchors, direct_task, need_task_ids)  # type: ignore[no-any-return]

    @staticmethod
    def is_tick(tup: Any) -> bool:
        """Whether ``tup`` is a tick tuple."""
        return bool(tup.stream == TupleHelper.TICK_TUPLE_ID)

    def ack(self, tup: Any) -> None:
        """The tuple is processed (nothing to do: the checkpoint covers it)."""
        self.delegate.ack(tup)

    def fail(self, tup: Any) -> None:
        """The tuple failed: the topology rolls back to its last checkpoint and replays."""
        self.delegate.fail(tup)
