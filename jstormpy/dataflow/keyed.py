"""Keyed dataflow operators: ``reduce`` and ``stateful_map``.

Their state is one managed-state dict keyed by the key (``self.state(...)``), so
checkpoints, savepoints and rescaling split it by key group like any fields-grouped bolt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jstormpy.api.batch import mark_failed_record
from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import TopologyError
from jstormpy.dataflow.fusion import DataflowBolt, InputKey, Step, bind_rows
from jstormpy.dataflow.records import (
    Wire,
)
from jstormpy.dataflow.results import KeyedValue


class ReduceBolt(DataflowBolt):
    """``KeyedStream.reduce(f)``: a running value per key, ``KeyedValue(key, value)``.

    State: managed dict ``"reduce"``, key -> the running value.
    """

    def __init__(self, inputs: Mapping[InputKey, Wire], fn: Callable[[Any, Any], Any],
                 steps: Sequence[Step] = ()) -> None:
        super().__init__(inputs, steps)
        self.fn = fn

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the running values (restored ones after a rollback or rescale) and bind
        the per-tuple function once (as :class:`StatefulMapBolt` does)."""
        super().prepare(conf, context)
        values = self._df_values = self.state("reduce")
        fn = self.fn
        direct = not self.steps and self.key_fn is None  # nothing fused after it
        emit, send = self.emit, self._df_out

        def run_rows(rows: Iterable[Sequence[Any]]) -> None:
            row: Any = None
            try:
                for row in rows:
                    key, item = row[0], row[-1]
                    value = fn(values[key], item) if key in values else item
                    values[key] = value
                    if direct:
                        emit((KeyedValue(key, value),))
                    else:
                        send(KeyedValue(key, value))
            except Exception as exc:
                mark_failed_record(exc, None if row is None else row[-1])
                raise

        bind_rows(self, conf, run_rows)

    def execute(self, tup: Tuple) -> None:
        """Fold the item into its key's running value and emit the new value."""
        self._df_execute(tup)


class StatefulMapBolt(DataflowBolt):
    """``KeyedStream.stateful_map(f)``: ``f(state_or_None, item) -> (state_or_None,
    out_or_None)``; a None state deletes the key's state, a None output emits nothing.

    State: managed dict ``"stateful_map"``, key -> the user's state.
    """

    def __init__(self, inputs: Mapping[InputKey, Wire],
                 fn: Callable[[Any, Any], tuple[Any, Any]],
                 steps: Sequence[Step] = ()) -> None:
        super().__init__(inputs, steps)
        self.fn = fn

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Open the per-key states (restored ones after a rollback or rescale) and bind
        the per-tuple function once: the hot loop of a keyed pipeline."""
        super().prepare(conf, context)
        states = self._df_states = self.state("stateful_map")
        fn, get = self.fn, states.get
        direct = not self.steps and self.key_fn is None  # nothing fused after it
        emit, send = self.emit, self._df_out

        def run_rows(rows: Iterable[Sequence[Any]]) -> None:
            values: Any = None
            try:
                for values in rows:
                    key = values[0]
                    result = fn(get(key), values[-1])
                    try:
                        new, out = result
                    except (TypeError, ValueError):
                        raise TopologyError(
                            f"stateful_map function must return (state_or_None, "
                            f"out_or_None), got {result!r} for key {key!r}") from None
                    if new is None:
                        if key in states:  # (del, not pop: incremental state tracks deletions)
                            del states[key]
                    else:
                        states[key] = new
                    if out is not None:
                        if direct:
                            emit((out,))
                        else:
                            send(out)
            except Exception as exc:
                mark_failed_record(exc, None if values is None else values[-1])
                raise

        bind_rows(self, conf, run_rows)

    def execute(self, tup: Tuple) -> None:
        """Call ``f`` with the key's state and the item; keep the new state."""
        self._df_execute(tup)


__all__ = ["ReduceBolt", "StatefulMapBolt"]
