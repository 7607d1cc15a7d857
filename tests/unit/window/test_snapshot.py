"""snapshot/restore at any point gives exactly the firings of an uninterrupted run."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.errors import CheckpointError
from jstormpy.window import CountWindows, SessionWindows, TumblingWindows, WindowOperator

from .helpers import (
    CopyingStore,
    SetAgg,
    count_assigners,
    drive,
    event_st,
    expand,
    make_operator,
    time_assigners,
)


@settings(max_examples=200, deadline=None)
@given(assigner=st.one_of(time_assigners, count_assigners),
       raw=st.lists(event_st, max_size=60), lag=st.integers(0, 30),
       lateness=st.integers(0, 20), early_ms=st.one_of(st.none(), st.integers(1, 10)),
       early_n=st.one_of(st.none(), st.integers(1, 4)),
       slicing=st.sampled_from([None, False, "stored"]), data=st.data())
def test_restore_anywhere_equals_uninterrupted(  # noqa: PLR0917
        assigner, raw, lag, lateness, early_ms, early_n, slicing, data) -> None:
    if isinstance(assigner, CountWindows):
        early_ms = early_n = None
    kwargs = {"allowed_lateness_ms": lateness, "early_fire_every_ms": early_ms,
              "early_fire_every_n": early_n}
    mode = None if isinstance(assigner, CountWindows) and slicing is False else slicing
    calls = expand(raw, lag)
    straight = make_operator(assigner, SetAgg(), mode, **kwargs)
    expected = [*drive(straight, calls), straight.finish()]

    cuts = sorted(data.draw(st.lists(st.integers(0, len(calls)), max_size=3)))
    store = CopyingStore()
    op = make_operator(assigner, SetAgg(), mode, store, **kwargs)
    got: list = []
    pos = 0
    for cut in cuts:
        got += drive(op, calls[pos:cut])
        pos = cut
        snap = pickle.loads(pickle.dumps(op.snapshot()))  # as a state backend would
        # the managed state is checkpointed with the snapshot (stored windows)
        store = CopyingStore(pickle.loads(pickle.dumps(dict(store))))
        op.process(99, 0, "garbage after the snapshot")  # must not leak into the restore
        op = make_operator(assigner, SetAgg(), mode, store, **kwargs)
        op.restore(snap)
    got += drive(op, calls[pos:])
    got.append(op.finish())
    assert got == expected


def test_early_fire_timer_survives_restore() -> None:
    """The early-fire clock and dirty windows are state (Bytewax #138: lost timers)."""
    def run(restore_at: int | None) -> list:
        op = WindowOperator(TumblingWindows(1000), SetAgg(), early_fire_every_ms=100)
        out = []
        steps = [("tick", 0), ("rec", "k", 5, "a"), ("tick", 50), ("rec", "k", 6, "b"),
                 ("tick", 100), ("rec", "k", 7, "c"), ("tick", 150), ("tick", 200)]
        for i, step in enumerate(steps):
            if i == restore_at:
                snap = op.snapshot()
                op = WindowOperator(TumblingWindows(1000), SetAgg(), early_fire_every_ms=100)
                op.restore(snap)
            out.append(drive(op, [step])[0])
        return out

    expected = run(None)
    assert [f.result for res in expected for f in res] == [("a", "b"), ("a", "b", "c")]
    for at in range(8):
        assert run(at) == expected


def test_restore_refuses_other_window_config() -> None:
    snap = WindowOperator(TumblingWindows(10), SetAgg()).snapshot()
    with pytest.raises(CheckpointError, match="SessionWindows"):
        WindowOperator(SessionWindows(10), SetAgg()).restore(snap)
    with pytest.raises(CheckpointError, match="format"):
        WindowOperator(TumblingWindows(10), SetAgg()).restore({"format": 99})
