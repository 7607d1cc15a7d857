"""Combining before the shuffle (window/combine.py, runtime/combine.py): a task emitting to
a fields-grouped ingestion-time WindowedBolt ships per-key partial accumulators; the
bolts' firings must be the ones the records themselves give, and the window module's
reference must agree.

The sender here is the engine's real route (``build_routes``) and the receivers real
WindowedBolts fed what the route sends, the way the executor feeds them: a plain batch
(a list) through ``execute_batch``, a combined one (a tuple) through ``execute_partials``.
A test clock stands in for arrival time: every item delivered between two flushes (what
the linger, a barrier or a watermark does) arrives at one instant.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.batch import Batch
from jstormpy.api.component import Tuple
from jstormpy.api.errors import JStormError, TopologyError
from jstormpy.api.topology import Grouping
from jstormpy.runtime.routing import OutputCollector, build_routes
from jstormpy.window import (
    Count,
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowedBolt,
)
from jstormpy.window.combine import combine_refusal, sender_aggregation
from jstormpy.window.reference import ReferenceWindows
from jstormpy.window.watermarks import BoundedOutOfOrderness

from .helpers import attach

FIELDS = ("word", "n")
INDEX = {"word": 0, "n": 1}
SRC = 1
TARGETS = (2, 3)

assigners = st.one_of(
    st.integers(1, 20).map(TumblingWindows),
    st.integers(1, 20).flatmap(
        lambda size: st.integers(1, size).map(lambda slide: SlidingWindows(size, slide))),
    st.integers(1, 10).map(SessionWindows))


def make_bolt_class(assigner: Any, clock: list[float]) -> type[WindowedBolt]:
    class Arrivals(WindowedBolt):
        window = assigner
        time = "ingestion"
        key = "word"

        def create(self) -> tuple:
            return ()

        def add(self, acc: tuple, tup: Tuple) -> tuple:
            return (*acc, tup["n"])  # every record, in arrival order

        def merge(self, a: tuple, b: tuple) -> tuple:
            return a + b

        def result(self, k: Any, window: Any, acc: tuple) -> tuple:
            return tuple(sorted(acc))

        def now_ms(self) -> float:
            return clock[0]

    return Arrivals


class Wiring:
    """One sending task's route to two bolt tasks, delivering what it sends."""

    def __init__(self, cls: type[WindowedBolt], combine: bool, batch_size: int) -> None:
        self.bolts = {t: cls() for t in TARGETS}
        self.cols = {t: attach(b, (SRC,)) for t, b in self.bolts.items()}
        self.sent: list[tuple[int, Any]] = []
        self.items: list[tuple[int, Any]] = []
        grouping = Grouping("fields", "split", "default", ("word",))

        def aggregation(consumer: str, g: Grouping) -> Any:
            return sender_aggregation(consumer, cls(), g.kind, g.fields, False) \
                if combine else None

        routes, _ = build_routes(SRC, "split", {"default": FIELDS}, [("w", grouping)],
                                 {"w": TARGETS}, {}, lambda dst, item: self.sent.append(
                                     (dst, item)), batch_size, combine=aggregation)
        self.route = routes["default"][0]

    def deliver(self) -> None:
        """Hand every sent item to its bolt, as the executor does."""
        for dst, (src, _kind, stream, payload) in self.sent:
            self.items.append((dst, payload))
            bolt = self.bolts[dst]
            if payload.__class__ is tuple:
                keys, accs, _records = payload
                bolt.execute_partials(src, keys, accs)
            else:
                bolt.execute_batch(Batch(payload, INDEX, "split", stream, src))
        self.sent.clear()

    def firings(self) -> list[tuple]:
        return sorted((t, *row) for t, col in self.cols.items()
                      for s, row in col.emitted if s == "default")


def run(cls: type[WindowedBolt], clock: list[float], combine: bool, batch_size: int,
        epochs: list[tuple[int, list[str]]]) -> Wiring:
    w = Wiring(cls, combine, batch_size)
    n = 0
    clock[0] = 100.0
    for step, words in epochs:
        clock[0] += step
        for word in words:
            w.route.add((word, n))
            n += 1
            w.deliver()  # batches the route sent on its own arrive in this epoch
        w.route.flush()  # linger / barrier / watermark: the rest goes now
        w.deliver()
    for bolt in w.bolts.values():
        bolt.on_inputs_finished()
    return w


class _RecordsAgg:
    def create(self) -> tuple:
        return ()

    def add(self, acc: tuple, rec: Any) -> tuple:
        return (*acc, rec[1])

    def merge(self, a: tuple, b: tuple) -> tuple:
        return a + b

    def result(self, key: Any, window: Any, acc: tuple) -> tuple:
        return tuple(sorted(acc))


def reference(assigner: Any, epochs: list[tuple[int, list[str]]],
              position: Any) -> list[tuple]:
    """The window module's reference fed each record at its epoch's arrival stamp, with
    the watermark ``stamp - 1`` after it (ingestion time), one per bolt task."""
    refs = {t: ReferenceWindows(assigner, _RecordsAgg()) for t in TARGETS}
    out: list[tuple] = []
    clock, n = 100.0, 0
    for step, words in epochs:
        clock += step
        for word in words:
            task = TARGETS[position(word)]
            ref = refs[task]
            ts = max(clock, ref.wm + 1)
            for f in ref.process(word, ts, (word, n)):
                out.append((task, *f))
            for f in ref.advance_watermark(ts - 1):
                out.append((task, *f))
            n += 1
    for task, ref in refs.items():
        out += [(task, *f) for f in ref.finish()]
    return sorted(out)


epochs_st = st.lists(st.tuples(st.integers(-3, 15), st.lists(
    st.sampled_from(["a", "b", "c", "d", "e", "f"]), max_size=12)), max_size=10)


@settings(max_examples=150, deadline=None)
@given(assigner=assigners, batch_size=st.integers(1, 6), epochs=epochs_st)
def test_combined_firings_equal_plain_firings_and_the_reference(assigner, batch_size,
                                                                epochs) -> None:
    clock = [0.0]
    cls = make_bolt_class(assigner, clock)
    plain = run(cls, clock, False, batch_size, epochs)
    combined = run(cls, clock, True, batch_size, epochs)
    assert combined.route.partials is not None and plain.route.partials is None
    assert combined.firings() == plain.firings()
    for t in TARGETS:
        assert combined.cols[t].watermarks[-1] == plain.cols[t].watermarks[-1] == math.inf
    assert combined.firings() == reference(assigner, epochs, combined.route.key_pos)


@pytest.mark.parametrize("seed", range(5))
def test_seeded_word_streams_many_keys_per_batch(seed) -> None:
    """Longer seeded streams, skewed keys (a few hot words), 64-key batches."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(200)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    epochs = [(rng.randint(0, 40), rng.choices(vocab, weights, k=rng.randint(0, 600)))
              for _ in range(40)]
    clock = [0.0]
    for assigner in (TumblingWindows(50), SlidingWindows(60, 20), SessionWindows(30)):
        cls = make_bolt_class(assigner, clock)
        plain = run(cls, clock, False, 64, epochs)
        combined = run(cls, clock, True, 64, epochs)
        assert combined.firings() == plain.firings()
        # fewer rows crossed the hop: one per key and flush instead of one per word
        rows_plain = sum(len(p) for _, p in plain.items)
        rows_combined = sum(len(p[0]) for _, p in combined.items)
        assert rows_plain == sum(len(ws) for _, ws in epochs)
        assert rows_combined < rows_plain / 2


def test_partials_carry_their_record_counts() -> None:
    """What the metrics read: a combined batch counts as the records it stands for, and
    so does the sender's ``emitted`` before and after the partials are sent."""
    clock = [0.0]
    w = run(make_bolt_class(TumblingWindows(10), clock), clock, True, 512,
            [(0, ["a", "b", "a", "a", "c"]), (3, ["b"])])
    shipped = [payload for _, payload in w.items]
    assert all(p.__class__ is tuple for p in shipped)
    assert sum(records for _keys, _accs, records in shipped) == 6
    per_key: dict[str, int] = {}
    for keys, accs, _records in shipped:
        for k, acc in zip(keys, accs, strict=True):
            per_key[k] = per_key.get(k, 0) + len(acc)
    assert per_key == {"a": 3, "b": 2, "c": 1}
    assert w.route.rows_out == 6


def test_a_collector_counts_emitted_records_while_partials_hold_them() -> None:
    clock = [0.0]
    cls = make_bolt_class(TumblingWindows(10), clock)
    w = Wiring(cls, True, 512)
    coll = OutputCollector(SRC, "split", {"default": [w.route]}, list(TARGETS),
                           lambda dst, item: w.sent.append((dst, item)),
                           streams={"default": FIELDS})
    for i, word in enumerate("abaac"):
        coll.emit((word, i))
    assert coll.emitted == 5 and coll.dirty and not w.sent
    with pytest.raises(TopologyError, match="emitted 1 value"):
        coll.emit(("a",))
    coll.flush()
    assert coll.emitted == 5 and not coll.dirty
    assert sum(p[2] for _, (_s, _k, _st, p) in w.sent) == 5


def test_an_add_that_fails_in_the_sender_falls_back_to_plain_records(caplog) -> None:
    """An add() that needs prepare(): the sender stops combining and sends the records;
    the bolt, prepared, counts them all."""

    class NeedsPrepare(WindowedBolt):
        window = TumblingWindows(2 ** 62)
        time = "ingestion"
        key = "word"

        def prepare(self, conf, context):
            super().prepare(conf, context)
            self.step = 1

        def create(self) -> int:
            return 0

        def add(self, acc: int, tup: Tuple) -> int:
            return acc + self.step  # AttributeError in an unprepared copy

        def merge(self, a: int, b: int) -> int:
            return a + b

        def result(self, k: Any, window: Any, acc: int) -> int:
            return acc

    w = Wiring(NeedsPrepare, True, 512)
    for i, word in enumerate(["a", "b", "a"]):
        w.route.add((word, i))
    w.route.flush()
    w.deliver()
    for bolt in w.bolts.values():
        bolt.on_inputs_finished()
    assert sorted((row[0], row[3]) for _, row in
                  (x for c in w.cols.values() for x in c.emitted)) == [("a", 2), ("b", 1)]
    assert all(p.__class__ is list for _, p in w.items)
    assert "combining before the shuffle towards 'w' stopped" in caplog.text


def _bolt(**attrs: Any) -> type[WindowedBolt]:
    class B(WindowedBolt):
        window = TumblingWindows(10)
        time = "ingestion"
        key = "word"

        def create(self) -> int:
            return 0

        def add(self, acc: int, tup: Tuple) -> int:
            return acc + 1

        def merge(self, a: int, b: int) -> int:
            return a + b

        def result(self, k: Any, window: Any, acc: int) -> int:
            return acc

    for name, value in attrs.items():
        setattr(B, name, value)
    return B


@pytest.mark.parametrize("attrs,reason", [
    ({"combine_before_shuffle": False}, "combine_before_shuffle is False"),
    ({"merge": None}, "no merge"),
    ({"aggregate": Count()}, "built-in aggregate"),
    ({"time": "processing"}, "only ingestion and event time"),
    ({"time": "event", "window": SessionWindows(5)}, "session windows in event time"),
    ({"window": CountWindows(3)}, "count windows"),
    ({"early_fire_every_n": 2}, "early_fire_every_n"),
    ({"watermark": BoundedOutOfOrderness(10)}, "watermark strategy"),
    ({"execute": lambda self, tup: None}, "overridden"),
])
def test_what_is_not_combined(attrs, reason) -> None:
    cls = _bolt(**attrs)
    assert reason in (combine_refusal(cls) or "")
    assert sender_aggregation("w", cls(), "fields", ("word",), False) is None


def test_only_a_fields_grouping_on_the_key_without_a_late_consumer_is_combined() -> None:
    cls = _bolt()
    assert combine_refusal(cls) is None
    assert sender_aggregation("w", cls(), "fields", ("word",), False) is not None
    assert sender_aggregation("w", cls(), "shuffle", (), False) is None
    assert sender_aggregation("w", cls(), "fields", ("word", "n"), False) is None
    assert sender_aggregation("w", cls(), "fields", ("word",), True) is None


def test_a_bolt_that_opted_out_still_merges_partials_from_older_code() -> None:
    """A gray release that sets combine_before_shuffle = False: tasks still on the old
    code keep combining, and the new bolt folds their partials in."""
    clock = [5.0]
    cls = make_bolt_class(TumblingWindows(2 ** 62), clock)
    opted_out = type("OptedOut", (cls,), {"combine_before_shuffle": False})
    bolt = opted_out()
    col = attach(bolt, (SRC,))
    bolt.execute_partials(SRC, ["a", "b"], [(0, 2), (1,)])
    bolt.execute_batch(Batch([("a", 3)], INDEX, "split", "default", SRC))
    bolt.on_inputs_finished()
    assert sorted((row[0], row[3]) for _, row in col.emitted) == [("a", (0, 2, 3)),
                                                                  ("b", (1,))]


def test_partials_to_a_bolt_that_cannot_merge_them_fail_clearly() -> None:
    clock = [5.0]
    cls = make_bolt_class(TumblingWindows(10), clock)
    processing = type("ProcessingTime", (cls,), {"time": "processing"})
    bolt = processing()
    attach(bolt, (SRC,))
    with pytest.raises(JStormError, match="cannot merge them .*only ingestion and event"):
        bolt.execute_partials(SRC, ["a"], [(0,)])


def test_emit_batch_and_a_two_field_key_combine_too() -> None:
    """Every way into a combining route folds: ``emit_batch`` and a key of two fields."""
    clock = [5.0]

    PerPair = _bolt(window=TumblingWindows(2 ** 62), key=("word", "n"),
                    now_ms=lambda self: clock[0])
    bolts = {t: PerPair() for t in TARGETS}
    cols = {t: attach(b, (SRC,)) for t, b in bolts.items()}
    sent: list[tuple[int, Any]] = []
    grouping = Grouping("fields", "split", "default", ("word", "n"))
    routes, _ = build_routes(
        SRC, "split", {"default": FIELDS}, [("w", grouping)], {"w": TARGETS}, {},
        lambda dst, item: sent.append((dst, item)), 4,
        combine=lambda c, g: sender_aggregation(c, PerPair(), g.kind, g.fields, False))
    coll = OutputCollector(SRC, "split", routes, list(TARGETS),
                           lambda dst, item: sent.append((dst, item)),
                           streams={"default": FIELDS})
    rows = [("a", 1), ("a", 2), ("a", 1), ("b", 1)] * 5
    coll.emit_batch({"word": [r[0] for r in rows], "n": [r[1] for r in rows]})
    coll.flush()
    assert coll.emitted == 20
    assert sent and all(item[3].__class__ is tuple for _, item in sent)
    for dst, (src, _kind, _stream, (keys, accs, _records)) in sent:
        bolts[dst].execute_partials(src, keys, accs)
    for bolt in bolts.values():
        bolt.on_inputs_finished()
    got = sorted((tuple(row[0]), row[3]) for c in cols.values() for _, row in c.emitted)
    assert got == [(("a", 1), 10), (("a", 2), 5), (("b", 1), 5)]


def test_records_an_add_keeps_keep_their_values() -> None:
    """The sender's fold reuses its record object only when ``add`` kept no reference to
    it: an accumulator holding the records sees each one's own values, compiled
    (``jstormpy/compiled.py``: Cython's calls hold one reference fewer) or not."""

    class Keeps(WindowedBolt):
        window = TumblingWindows(10)
        time = "ingestion"
        key = "word"

        def create(self) -> tuple:
            return ()

        def add(self, acc: tuple, tup: Tuple) -> tuple:
            return (*acc, tup)

        def merge(self, a: tuple, b: tuple) -> tuple:
            return a + b

        def result(self, k: Any, window: Any, acc: tuple) -> tuple:
            return acc

    w = Wiring(Keeps, True, 512)
    words = ["a", "b", "a", "c", "a", "b"]
    for n, word in enumerate(words):
        w.route.add((word, n))
    w.route.flush()
    kept = {k: [(t["word"], t["n"]) for t in acc]
            for _dst, (_s, _k, _st, (keys, accs, _records)) in w.sent
            for k, acc in zip(keys, accs, strict=True)}
    assert kept == {word: [(word, n) for n, x in enumerate(words) if x == word]
                    for word in set(words)}
