"""What every heronpy spout has (``heronpy.api.spout.base_spout``)."""

from __future__ import annotations

from typing import Any

from heronpy.api._specs import component_spec
from heronpy.api.component.base_component import BaseComponent
from heronpy.api.component.component_spec import HeronComponentSpec
from heronpy.api.stream import Stream


class BaseSpout(BaseComponent):
    """``spec`` (place it in a topology) and ``emit``."""

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: Any = None) -> HeronComponentSpec:
        """This spout in a topology: ``par`` its parallelism, ``config`` its settings."""
        return component_spec(cls, True, name, None, par, config, optional_outputs)

    def emit(self, tup: Any, tup_id: Any = None, stream: str = Stream.DEFAULT_STREAM_ID,
             direct_task: int | None = None, need_task_ids: bool = False) -> list[int] | None:
        """Emit ``tup`` on ``stream``; with ``tup_id``, ``ack(tup_id)`` follows once a
        completed checkpoint covers the tuple."""
        return self.delegate.emit(tup, tup_id, stream, direct_task, need_task_ids)  # type: ignore[no-any-return]
