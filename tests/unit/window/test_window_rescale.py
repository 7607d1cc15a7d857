"""Window state across a rescale: old operators' snapshots cut by key
(``WindowOperator.split_snapshot``) and merged into new ones (``restore_parts``).

Per key, the firings of a run rescaled from ``n`` to ``m`` operators mid-stream, each with
its own watermark (as tasks with their own input channels have), equal those of one
operator that saw everything: no window lost, none fired twice, none fired early.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.keygroups import KeyPlacement, redistribution_hook
from jstormpy.window import (
    CountWindows,
    Firing,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowedBolt,
    WindowOperator,
)
from jstormpy.window.watermarks import BoundedOutOfOrderness

from .helpers import CopyingStore, SetAgg, attach, make_operator, sensor

# even timestamps, odd session gaps: a record never lands exactly on a session's end,
# where whether it extends the session depends on when the watermark passed (a watermark
# schedule is what a rescale changes, not what this test is about)
assigners = st.one_of(
    st.integers(1, 20).map(TumblingWindows),
    st.integers(1, 20).flatmap(
        lambda size: st.integers(1, size).map(lambda slide: SlidingWindows(size, slide))),
    st.integers(0, 7).map(lambda g: SessionWindows(2 * g + 1)))
records_st = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 15), st.integers(0, 7)),
                      max_size=80)


class _Run:
    """Operators fed by key placement, each advancing its own watermark from the
    timestamps it saw (bounded out-of-orderness ``lag``)."""

    def __init__(self, ops: list[WindowOperator], place: Any, lag: int) -> None:
        self.ops, self.place, self.lag = ops, place, lag
        self.seen = [-float("inf")] * len(ops)
        self.out: list[Any] = []

    def feed(self, key: int, ts: int, rec: Any) -> None:
        i = self.place(key)
        self.out += self.ops[i].process(key, ts, rec)
        self.seen[i] = max(self.seen[i], ts)
        self.out += self.ops[i].advance_watermark(self.seen[i] - self.lag - 1)


def _stream(raw: list[tuple[int, int, int]], lag: int) -> list[tuple[int, int, str]]:
    """(key, ts, record): ts at most ``2 * lag`` behind the newest one, all even."""
    cur, out = 0, []
    for n, (step, back, key) in enumerate(raw):
        cur += step
        out.append((key, 2 * max(cur - min(back, lag), 0), f"r{n}"))
    return out


def _results(firings: list[Any]) -> Counter[tuple]:
    assert all(isinstance(f, Firing) and f.kind == "on_time" for f in firings), firings
    return Counter((f.key, f.window_start, f.window_end, f.result) for f in firings)


@settings(max_examples=300, deadline=None)
@given(assigner=assigners, raw=records_st, lag=st.integers(0, 10),
       lateness=st.integers(0, 20), slicing=st.sampled_from([None, False, "stored"]),
       old_n=st.integers(1, 3), new_n=st.integers(1, 4), cut=st.floats(0, 1))
def test_rescaled_operators_fire_what_one_operator_fires(  # noqa: PLR0917
        assigner, raw, lag, lateness, slicing, old_n, new_n, cut) -> None:
    """slicing="stored": each operator keeps its windows in its own store, and the stores'
    entries move by key (as the engine moves managed state by key group)."""
    events = _stream(raw, lag)
    bound = 2 * lag

    def make(store: CopyingStore | None = None) -> WindowOperator:
        return make_operator(assigner, SetAgg(), slicing, store,  # type: ignore[no-any-return]
                             allowed_lateness_ms=lateness)

    one = _Run([make()], lambda k: 0, bound)
    for e in events:
        one.feed(*e)
    want = _results(one.out + one.ops[0].finish())

    split = int(cut * len(events))
    old = _Run([make() for _ in range(old_n)], lambda k: k % old_n, bound)
    for e in events[:split]:
        old.feed(*e)
    place = KeyPlacement(128, new_n)
    cuts = [WindowOperator.split_snapshot(op.snapshot(), place, new_n) for op in old.ops]
    stores = [CopyingStore() for _ in range(new_n)]
    if slicing == "stored":
        for op in old.ops:
            for key, entry in op.window_store.items():  # the managed state
                stores[place(key)][key] = entry
    new = _Run([make(store) for store in stores], place, bound)
    caught_up = []
    for j, op in enumerate(new.ops):
        caught_up += op.restore_parts([parts[j] for parts in cuts])
    for e in events[split:]:
        new.feed(*e)
    got = _results(old.out + caught_up + new.out
                   + [f for op in new.ops for f in op.finish()])
    assert got == want


@settings(max_examples=100, deadline=None)
@given(size=st.integers(1, 5), raw=records_st, old_n=st.integers(1, 3),
       new_n=st.integers(1, 4), cut=st.floats(0, 1), stored=st.booleans())
def test_count_windows_move_with_their_keys(size, raw, old_n, new_n, cut, stored) -> None:
    """stored: each operator keeps its keys' panes in its own store, and the stores'
    entries move by key (as the engine moves managed state by key group)."""
    events = _stream(raw, 0)
    want = Counter()
    one = WindowOperator(CountWindows(size), SetAgg())
    for key, ts, rec in events:
        want += _results(one.process(key, ts, rec))
    want += _results(one.finish())
    split = int(cut * len(events))

    def make(store: CopyingStore) -> WindowOperator:
        op = WindowOperator(CountWindows(size), SetAgg(), stored=stored)
        if stored:
            op.bind_store(store)
        return op

    olds = [make(CopyingStore()) for _ in range(old_n)]
    got: Counter[tuple] = Counter()
    for key, ts, rec in events[:split]:
        got += _results(olds[key % old_n].process(key, ts, rec))
    place = KeyPlacement(128, new_n)
    cuts = [WindowOperator.split_snapshot(op.snapshot(), place, new_n) for op in olds]
    stores = [CopyingStore() for _ in range(new_n)]
    if stored:
        for op in olds:
            assert op.snapshot()["stored"] is True
            for key, entry in op.window_store.items():  # the managed state
                stores[place(key)][key] = entry
    news = [make(store) for store in stores]
    for j, op in enumerate(news):
        got += _results(op.restore_parts([parts[j] for parts in cuts]))
    for key, ts, rec in events[split:]:
        got += _results(news[place(key)].process(key, ts, rec))
    for op in news:
        got += _results(op.finish())
    assert got == want


class Sessions(WindowedBolt):
    window = SessionWindows(gap_ms=10)
    key = "sensor"
    timestamp = "ts"
    watermark = BoundedOutOfOrderness(max_lag_ms=0)

    def create(self) -> list:
        return []

    def add(self, acc: list, tup: Any) -> list:
        return [*acc, tup["temp"]]

    def merge(self, a: list, b: list) -> list:
        return a + b

    def result(self, key: Any, window: Any, acc: list) -> list:
        return sorted(acc)


def test_windowed_bolt_rescale_hook_moves_sessions_and_emits_catch_up_first() -> None:
    """Through the bolt: two old tasks at different watermarks; after the hook and the
    restore, a session of the lagging task that the higher watermark closes is emitted
    before anything else, and a session cut by the checkpoint merges with new records."""
    olds = [Sessions(), Sessions()]
    cols = [attach(b, (1,)) for b in olds]
    olds[0].execute(sensor("a", 100, 1.0))  # task 0: watermark 100
    olds[0].execute(sensor("c", 200, 3.0))  # ... 200: a's session [100, 110) fires
    olds[1].execute(sensor("b", 100, 2.0))  # task 1: watermark 100, b's session open
    assert [v[0] for v in cols[0].stream("default")] == ["a"]
    assert cols[1].stream("default") == []
    hook = redistribution_hook(Sessions, 128)
    assert hook is not None
    place = KeyPlacement(128, 3)
    restored = []
    for snap in hook([b.snapshot() for b in olds], 3):
        bolt = Sessions()
        bolt.restore(snap)
        restored.append((bolt, attach(bolt, (7, 8))))  # new input channels
    b_task, b_col = restored[place("b")]
    c_task, c_col = restored[place("c")]
    # channel 8 has sent nothing: the watermark stays at the restored 200, so c's
    # session [200, 210) is still open and takes a record at 205
    c_task.execute(sensor("c", 205, 4.0, task=7))
    for bolt, _ in restored:
        bolt.on_inputs_finished()
    # b's session [100, 110) is below the merged watermark 200: fired at the restore and
    # emitted by b's new task before anything else
    assert b_col.stream("default")[0] == ("b", 100, 110, [2.0], "on_time")
    assert ("c", 200, 215, [3.0, 4.0], "on_time") in c_col.stream("default")
    every = [v for _, col in restored for v in col.stream("default")]
    assert sorted(v[0] for v in every) == ["b", "c"]


def test_plan_rescale_accepts_a_dataflow_window_aggregate() -> None:
    """Refused before (whole-task snapshot, no hook): now it moves by key group."""
    from jstormpy.connectors.sources import SequenceSpout
    from jstormpy.dataflow import Dataflow
    from jstormpy.operations.rescale_state import plan_rescale
    from jstormpy.testing import TestingSink
    from jstormpy.window import Count

    flow = Dataflow("w")
    flow.source("s", SequenceSpout(keys=2, per_key=3)).key_by(lambda r: r["key"]) \
        .window(TumblingWindows(10), timestamp=lambda r: r["seq"]) \
        .aggregate(Count(), name="win", parallelism=2).sink("out", TestingSink())
    topo = flow.build()
    assert plan_rescale(topo, {"win": 3}, 128).components["win"].parallelism == 3


def test_restored_maxima_of_renamed_channels_do_not_hold_the_watermark() -> None:
    """A rescale of the upstream component renames this task's input channels: the
    restored maximum of old channel 1 must not hold the watermark for ever."""
    old = Sessions()
    attach(old, (1, 2))
    old.execute(sensor("a", 100, 1.0, task=1))
    old.execute(sensor("a", 50, 1.0, task=2))  # channel 2 holds the watermark at 50
    assert old.current_watermark == 50
    new = Sessions()
    new.restore(old.snapshot())
    col = attach(new, (5,))  # the upstream now has one task, id 5
    new.execute(sensor("b", 300, 2.0, task=5))
    assert new.current_watermark == 300
    assert col.stream("default") == [("a", 50, 60, [1.0], "on_time"),
                                     ("a", 100, 110, [1.0], "on_time")]
