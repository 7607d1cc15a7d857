"""Combining before the shuffle in event time (window/combine.py, runtime/combine.py): two
sending tasks emit out-of-order timestamped records and in-band watermarks to two
fields-grouped event-time WindowedBolt tasks; with combining on, each sender ships per
(key, pane) partial accumulators of the records on time under the watermark it has sent,
and the rest as records. The bolts' firings, late stream and late count must be the ones
the records themselves give, and those must be the window module's reference fed the
same input in the same order.

The senders are the engine's real routes and collectors (``build_routes``,
``OutputCollector``: a watermark flushes the route first); the receivers real
WindowedBolts fed what arrives the way the executor feeds them: a plain batch through
``execute_batch``, a combined one through ``execute_partials``, a watermark as the
minimum over the bolt's two input channels through ``on_watermark``. Items are delivered
as soon as they are sent (each channel in order).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Grouping
from jstormpy.runtime.combine import restored_bound
from jstormpy.runtime.routing import MessageKind, OutputCollector, build_routes
from jstormpy.window import SessionWindows, SlidingWindows, TumblingWindows, WindowedBolt
from jstormpy.window.combine import combine_refusal, sender_aggregation
from jstormpy.window.reference import ReferenceWindows

from .helpers import attach

FIELDS = ("word", "ts", "n")
INDEX = {"word": 0, "ts": 1, "n": 2}
SOURCES = (0, 1)
TARGETS = (2, 3)
INF = math.inf


def make_bolt_class(assigner: Any, lateness: float = 0) -> type[WindowedBolt]:
    class Events(WindowedBolt):
        window = assigner
        time = "event"
        timestamp = "ts"
        key = "word"
        allowed_lateness_ms = lateness

        def create(self) -> tuple:
            return ()

        def add(self, acc: tuple, tup: Tuple) -> tuple:
            return (*acc, tup["n"])  # every record

        def merge(self, a: tuple, b: tuple) -> tuple:
            return a + b

        def result(self, k: Any, window: Any, acc: tuple) -> tuple:
            return tuple(sorted(acc))

    return Events


class _Records:
    """The reference's aggregation over the records ``(word, ts, n)``."""

    def create(self) -> tuple:
        return ()

    def add(self, acc: tuple, rec: Any) -> tuple:
        return (*acc, rec[2])

    def merge(self, a: tuple, b: tuple) -> tuple:
        return a + b

    def result(self, key: Any, window: Any, acc: tuple) -> tuple:
        return tuple(sorted(acc))


class Wiring:
    """Two sending tasks' collectors, each with a fields route to two bolt tasks."""

    def __init__(self, cls: type[WindowedBolt], combine: bool, batch_size: int,
                 bounds: tuple[float, float] = (-INF, -INF)) -> None:
        self.bolts = {t: cls() for t in TARGETS}
        self.cols = {t: attach(b, SOURCES) for t, b in self.bolts.items()}
        self.channel_wm = {t: dict.fromkeys(SOURCES, -INF) for t in TARGETS}
        self.delivered: dict[int, list[tuple[Any, ...]]] = {t: [] for t in TARGETS}
        """Per bolt task, what it was fed: ("rec", values) and ("wm", watermark)."""
        self.rows = 0
        self.partial_rows = 0
        grouping = Grouping("fields", "src", "default", ("word",))

        def aggregation(consumer: str, g: Grouping) -> Any:
            return sender_aggregation(consumer, cls(), g.kind, g.fields, False) \
                if combine else None

        self.collectors = {}
        for src in SOURCES:
            def send(dst: int, item: Any) -> None:
                self.deliver(dst, item)

            routes, channels = build_routes(src, "src", {"default": FIELDS},
                                            [("w", grouping)], {"w": TARGETS}, {}, send,
                                            batch_size, combine=aggregation)
            coll = OutputCollector(src, "src", routes, channels, send,
                                   streams={"default": FIELDS})
            coll.restore_forwarded(bounds[src])
            self.collectors[src] = coll
        self.key_pos = routes["default"][0].key_pos

    def deliver(self, dst: int, item: Any) -> None:
        src, kind, stream, payload = item
        bolt = self.bolts[dst]
        if kind == MessageKind.WATERMARK:
            wms = self.channel_wm[dst]
            wms[src] = max(wms[src], payload)
            low = min(wms.values())
            if low > bolt.current_watermark:
                self.delivered[dst].append(("wm", low))
                bolt.on_watermark(low)
        elif kind == MessageKind.DATA and payload.__class__ is tuple:
            keys, accs, _records = payload
            self.partial_rows += len(keys)
            bolt.execute_partials(src, keys, accs)
        elif kind == MessageKind.DATA:
            self.rows += len(payload)
            self.delivered[dst] += [("rec", values) for values in payload]
            bolt.execute_batch(Batch(payload, INDEX, "src", stream, src))

    def finish(self) -> None:
        for coll in self.collectors.values():
            coll.flush()
        for bolt in self.bolts.values():
            bolt.on_inputs_finished()

    def output(self, stream: str) -> list[tuple]:
        return sorted((t, *row) for t, col in self.cols.items()
                      for s, row in col.emitted if s == stream)

    def late_records(self) -> int:
        return sum(b.late_records for b in self.bolts.values())


Step = tuple[Any, ...]


def run(cls: type[WindowedBolt], combine: bool, batch_size: int,
        steps: list[Step]) -> Wiring:
    """``("rec", src, word, ts)`` emits a record, ``("wm", src, wm)`` a watermark,
    ``("flush", src)`` sends what the source's batches hold (the linger, a barrier)."""
    w = Wiring(cls, combine, batch_size)
    n = 0
    for step in steps:
        coll = w.collectors[step[1]]
        if step[0] == "rec":
            coll.emit((step[2], step[3], n))
            n += 1
        elif step[0] == "wm":
            coll.emit_watermark(step[2])
        else:
            coll.flush()
    w.finish()
    return w


def reference(assigner: Any, lateness: float, w: Wiring) -> tuple[list[tuple], int]:
    """The reference fed, per bolt task, what the plain run's task was fed."""
    out: list[tuple] = []
    late = 0
    for task, fed in w.delivered.items():
        ref = ReferenceWindows(assigner, _Records(), lateness)
        for what, value in fed:
            if what == "wm":
                out += [(task, *f) for f in ref.advance_watermark(value)]
                continue
            for res in ref.process(value[0], value[1], value):
                if res.__class__.__name__ == "LateRecord":
                    late += 1
                else:
                    out.append((task, *res))
        out += [(task, *f) for f in ref.finish()]
    return sorted(out), late


assigners = st.one_of(
    st.integers(1, 12).map(TumblingWindows),
    st.integers(1, 12).flatmap(
        lambda size: st.integers(1, size).map(lambda slide: SlidingWindows(size, slide))))


@st.composite
def event_streams(draw: Any) -> list[Step]:
    """Out-of-order timestamps around each source's event-time clock (some of them
    floats), watermarks that trail it (sometimes exactly at a window's last millisecond,
    sometimes ahead of records still to come: late records), flushes between them."""
    steps: list[Step] = []
    clock = {0: 0, 1: 0}
    for _ in range(draw(st.integers(0, 60))):
        src = draw(st.sampled_from(SOURCES))
        what = draw(st.sampled_from(["rec", "rec", "rec", "rec", "wm", "flush"]))
        if what == "rec":
            clock[src] += draw(st.integers(0, 3))
            ts = clock[src] - draw(st.integers(0, 12))  # out of order, maybe late
            ts += draw(st.sampled_from([0, 0, 0, 0.5]))  # a float now and then
            steps.append(("rec", src, draw(st.sampled_from("abcde")), ts))
        elif what == "wm":
            steps.append(("wm", src, clock[src] - draw(st.integers(0, 6))
                          + draw(st.sampled_from([0, 0, 0.25]))))
        else:
            steps.append(("flush", src))
    return steps


@settings(max_examples=200, deadline=None)
@given(assigner=assigners, lateness=st.sampled_from([0, 0, 1, 4]),
       batch_size=st.integers(1, 5), steps=event_streams())
def test_event_time_combined_firings_equal_plain_firings_and_the_reference(
        assigner, lateness, batch_size, steps) -> None:
    cls = make_bolt_class(assigner, lateness)
    plain = run(cls, False, batch_size, steps)
    combined = run(cls, True, batch_size, steps)
    assert plain.partial_rows == 0
    assert combined.output("default") == plain.output("default")
    assert combined.output("late") == plain.output("late")
    assert combined.late_records() == plain.late_records()
    for t in TARGETS:
        assert combined.cols[t].watermarks[-1] == plain.cols[t].watermarks[-1] == INF
    firings, late = reference(assigner, lateness, plain)
    assert plain.output("default") == firings
    assert plain.late_records() == late


@pytest.mark.parametrize("assigner", [TumblingWindows(50), SlidingWindows(60, 20)])
def test_in_order_streams_ship_partials_and_out_of_order_ones_stay_exact(assigner) -> None:
    """Long seeded streams: mostly combined (fewer rows cross the hop), and equal."""
    import random

    rng = random.Random(7)
    steps: list[Step] = []
    clock = [0, 0]
    for i in range(4000):
        src = i % 2
        clock[src] += rng.randint(0, 2)
        steps.append(("rec", src, f"w{rng.randint(0, 9)}", clock[src] - rng.randint(0, 40)))
        if i % 397 == 0:
            steps.append(("wm", src, clock[src] - 20))
        if i % 601 == 0:
            steps.append(("flush", src))
    cls = make_bolt_class(assigner)
    plain = run(cls, False, 64, steps)
    combined = run(cls, True, 64, steps)
    assert combined.output("default") == plain.output("default")
    assert combined.output("late") == plain.output("late")
    assert combined.late_records() == plain.late_records()
    assert combined.rows > 0  # some records were behind a sent watermark: sent as such
    assert combined.partial_rows + combined.rows < plain.rows / 2


def test_records_behind_the_sent_watermark_go_as_records() -> None:
    """After a watermark of 9 (window [0, 10) may have fired downstream) a record at 9
    goes as a record, one at 10 into a partial keyed by key and pane."""
    sent: list[Any] = []
    cls = make_bolt_class(TumblingWindows(10))
    routes, channels = build_routes(
        0, "src", {"default": FIELDS}, [("w", Grouping("fields", "src", "default",
                                                       ("word",)))],
        {"w": (2,)}, {}, lambda dst, item: sent.append(item), 512,
        combine=lambda c, g: sender_aggregation(c, cls(), g.kind, g.fields, False))
    coll = OutputCollector(0, "src", routes, channels, lambda dst, item: sent.append(item),
                           streams={"default": FIELDS})
    coll.emit(("a", 3, 0))
    coll.emit_watermark(9)
    coll.emit(("a", 9, 1))
    coll.emit(("a", 10, 2))
    coll.emit(("a", 17, 3))
    coll.emit(("a", float("nan"), 4))  # the bolt reports it: a record
    coll.flush()
    data = [p for _s, kind, _st, p in sent if kind == MessageKind.DATA]
    assert data[0] == ([("a", 0)], [(0,)], 1)  # shipped before the watermark
    assert [row[2] for row in data[1]] == [1, 4]  # behind 9, and the bad timestamp
    assert data[2] == ([("a", 10)], [(2, 3)], 2)


def test_a_restored_sender_keeps_its_bound() -> None:
    """The bound is the highest watermark the task ever sent: a restored task folds
    nothing its receivers' restored watermark may have passed, and a task restored or
    respawned without a recorded bound folds nothing in event time."""
    assert restored_bound({"forwarded_wm": 99.0}, True) == 99.0
    assert restored_bound(None, False) == -INF  # a fresh start
    assert restored_bound({"custom": 1}, True) == INF  # a snapshot of older code
    assert restored_bound(None, True) == INF  # a partial prepare's respawn
    cls = make_bolt_class(TumblingWindows(10))
    w = Wiring(cls, True, 512, bounds=(99.0, INF))
    w.collectors[0].emit(("a", 95, 0))  # behind 99: a record
    w.collectors[0].emit(("a", 100, 1))
    w.collectors[1].emit(("b", 500, 2))  # bound unknown: a record
    w.collectors[0].flush()
    w.collectors[1].flush()
    assert w.rows == 2 and w.partial_rows == 1


def test_session_windows_and_timestamp_methods_are_not_combined_in_event_time() -> None:
    sessions = make_bolt_class(SessionWindows(5))
    assert "session windows in event time" in (combine_refusal(sessions) or "")
    method = type("M", (make_bolt_class(TumblingWindows(10)),),
                  {"timestamp": lambda self, tup: tup["ts"]})
    assert "no timestamp field" in (combine_refusal(method) or "")
    floats = make_bolt_class(TumblingWindows(10.5))
    assert "not integers" in (combine_refusal(floats) or "")
    # the stream lacks the timestamp field: the route sends records
    routes, _ = build_routes(0, "src", {"default": ("word", "n")},
                             [("w", Grouping("fields", "src", "default", ("word",)))],
                             {"w": (2,)}, {}, lambda d, i: None, 8,
                             combine=lambda c, g: sender_aggregation(
                                 c, make_bolt_class(TumblingWindows(10))(), g.kind,
                                 g.fields, False))
    assert routes["default"][0].partials is None


def test_a_partial_behind_the_watermark_fails_the_task_naming_it() -> None:
    bolt = make_bolt_class(TumblingWindows(10))()
    attach(bolt, SOURCES)
    bolt.on_watermark(25)
    with pytest.raises(JStormError, match="pane at 10, behind its watermark 25"):
        bolt.execute_partials(0, [("a", 10)], [(0,)])
    bolt.execute_partials(0, [("a", 20)], [(1,)])  # on time: [20, 30) fires at 29
    bolt.on_watermark(29)
    assert bolt.current_watermark == 29


def test_an_add_that_fails_in_the_sender_falls_back_to_records(caplog) -> None:
    """An add() that needs prepare(): the sending task stops combining and sends the
    records (the one that raised and the rest of its batch too); the prepared bolts
    count every record."""

    class NeedsPrepare(make_bolt_class(TumblingWindows(10))):  # type: ignore[misc]
        def prepare(self, conf, context):
            super().prepare(conf, context)
            self.step = 1

        def create(self) -> int:
            return 0

        def add(self, acc: int, tup: Tuple) -> int:
            return acc + self.step  # AttributeError in the sender's unprepared copy

        def merge(self, a: int, b: int) -> int:
            return a + b

        def result(self, k: Any, window: Any, acc: int) -> int:
            return acc

    w = run(NeedsPrepare, True, 4, [("rec", 0, "a", 1), ("rec", 0, "b", 2), ("wm", 0, 0),
                                    ("rec", 0, "a", 3), ("rec", 0, "a", 12),
                                    ("wm", 1, 50), ("wm", 0, 50)])
    assert w.partial_rows == 0 and w.rows == 4
    got = sorted((row[1], row[2], row[4]) for row in w.output("default"))
    assert got == [("a", 0, 2), ("a", 10, 1), ("b", 0, 1)]
    assert "combining before the shuffle towards 'w' stopped" in caplog.text


@pytest.mark.parametrize("assigner", [TumblingWindows(50), SlidingWindows(60, 20)])
def test_a_bolt_whose_windows_are_not_sliced_merges_partials_per_window(assigner) -> None:
    """With early firing by processing time the operator keeps one accumulator per
    window (no slices): a partial is merged into each window of its pane instead."""
    import random

    rng = random.Random(3)
    steps: list[Step] = []
    clock = [0, 0]
    for i in range(1500):
        src = i % 2
        clock[src] += rng.randint(0, 2)
        steps.append(("rec", src, f"w{rng.randint(0, 6)}", clock[src] - rng.randint(0, 60)))
        if i % 113 == 0:
            steps.append(("wm", src, clock[src] - 10))
    cls = type("Unsliced", (make_bolt_class(assigner, 5),), {"early_fire_every_ms": 10 ** 9})
    plain = run(cls, False, 16, steps)
    combined = run(cls, True, 16, steps)
    assert combined.partial_rows > 0
    assert combined.output("default") == plain.output("default")
    assert combined.output("late") == plain.output("late")
    assert combined.late_records() == plain.late_records()


def test_an_operator_keeping_its_windows_in_a_store_merges_partials_too() -> None:
    """``stored`` operators (windows in the task's RocksDB store) take the unsliced way:
    the same firings from a pane's partial as from its records."""
    from jstormpy.window.combine import Partial, merging_add
    from jstormpy.window.operator import WindowOperator

    agg = _Records()
    agg.add = merging_add(agg.add, agg.merge)  # type: ignore[method-assign]
    out = {}
    for combined in (False, True):
        op = WindowOperator(SlidingWindows(20, 10), agg, stored=True)
        op.bind_store({})
        recs = [("a", 11, 0), ("a", 13, 1), ("b", 12, 2), ("a", 25, 3)]
        if combined:  # panes of 10: (a, 10) holds records 0 and 1
            assert op.process_batch(["a", "b", "a"], [10, 10, 20],
                                    [Partial((0, 1)), Partial((2,)), Partial((3,))]) == []
        else:
            assert op.process_batch([r[0] for r in recs], [r[1] for r in recs], recs) == []
        out[combined] = op.finish()
    assert out[True] == out[False]
    assert sorted((f.key, f.window_start, f.result) for f in out[True]) == [
        ("a", 0, (0, 1)), ("a", 10, (0, 1, 3)), ("a", 20, (3,)), ("b", 0, (2,)),
        ("b", 10, (2,))]
