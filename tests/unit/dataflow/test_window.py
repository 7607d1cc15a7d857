"""KeyedStream.window(...).aggregate(agg): the compiled WindowedBolt against a plain-Python
reference, on seeded inputs out of order within the declared bound."""

from __future__ import annotations

import random
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.dataflow import WindowResult
from jstormpy.dataflow.window_aggregate import WindowAggregateBolt
from jstormpy.window import SessionWindows, SlidingWindows, Sum, TumblingWindows

from .drive import bounded_shuffle, keyed_tuple, prepare


class Ids:
    """Collects the exact set of item ids: the strongest result check."""

    def create(self):
        return frozenset()

    def add(self, acc, item):
        return acc | {item["id"]}

    def merge(self, a, b):
        return a | b

    def result(self, key, window, acc):
        return tuple(sorted(acc))


def _windows_of(assigner, ts):
    slide = assigner.slide_ms
    start = ts - ts % slide
    out = []
    while start > ts - assigner.size_ms:
        out.append((start, start + assigner.size_ms))
        start -= slide
    return out


def _reference(assigner, items):
    """{(key, start, end): sorted ids} of every window, all records on time."""
    contents = defaultdict(set)
    if isinstance(assigner, SessionWindows):
        by_key = defaultdict(list)
        for it in items:
            by_key[it["k"]].append((it["ts"], it["id"]))
        for key, recs in by_key.items():
            recs.sort()
            start, end, ids = recs[0][0], recs[0][0] + assigner.gap_ms, {recs[0][1]}
            for ts, i in recs[1:]:
                if ts <= end:
                    end, ids = max(end, ts + assigner.gap_ms), ids | {i}
                else:
                    contents[(key, start, end)] = ids
                    start, end, ids = ts, ts + assigner.gap_ms, {i}
            contents[(key, start, end)] = ids
    else:
        for it in items:
            for start, end in _windows_of(assigner, it["ts"]):
                contents[(it["k"], start, end)].add(it["id"])
    return {w: tuple(sorted(ids)) for w, ids in contents.items()}


ASSIGNERS = [TumblingWindows(size_ms=20), SlidingWindows(size_ms=30, slide_ms=10),
             SessionWindows(gap_ms=15)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ASSIGNERS), st.integers(0, 2**32), st.integers(0, 80),
       st.sampled_from([0, 1, 25]))
def test_window_firings_equal_the_reference(assigner, seed, n, lag):
    rng = random.Random(seed)
    items = [{"id": i, "k": rng.choice("xyz"), "ts": rng.randrange(200)} for i in range(n)]
    arrival = bounded_shuffle(items, lambda it: it["ts"], lag, rng)
    bolt = WindowAggregateBolt(assigner, lambda it: it["ts"], Ids(), out_of_orderness_ms=lag)
    col = prepare(bolt, input_tasks=(1, 2))
    for it in arrival:  # two channels, the same bounded disorder on each
        bolt.execute(keyed_tuple(it["k"], it, task=1 + it["id"] % 2))
    bolt.on_inputs_finished()
    fired = [WindowResult(*v) for v in col.stream()]
    assert not col.stream("late")
    assert {r.kind for r in fired} <= {"on_time"}
    assert {(r.key, r.start, r.end): r.value for r in fired} == _reference(assigner, items)
    assert len(fired) == len({(r.key, r.start, r.end) for r in fired})


def test_builtin_aggregates_read_fields_of_dict_items():
    bolt = WindowAggregateBolt(TumblingWindows(size_ms=10), lambda it: it["ts"], Sum("v"))
    col = prepare(bolt)
    for ts, v in ((1, 5), (4, 6), (12, 1)):
        bolt.execute(keyed_tuple("k", {"ts": ts, "v": v}))
    bolt.on_inputs_finished()
    assert [WindowResult(*v) for v in col.stream()] == [
        WindowResult("k", 0, 10, 11, "on_time"), WindowResult("k", 10, 20, 1, "on_time")]


def test_late_records_update_within_lateness_and_go_to_late_beyond_it():
    bolt = WindowAggregateBolt(TumblingWindows(size_ms=10), lambda it: it["ts"], Sum("v"),
                               allowed_lateness_ms=10)
    col = prepare(bolt)
    for ts, v in ((1, 1), (15, 2), (3, 4), (40, 8), (5, 16)):
        bolt.execute(keyed_tuple("k", {"ts": ts, "v": v}))
    bolt.on_inputs_finished()
    assert [WindowResult(*v)[1:] for v in col.stream()] == [
        (0, 10, 1, "on_time"),   # the watermark passed 9 at ts=15
        (0, 10, 5, "late"),      # ts=3 within the allowed lateness: a late update
        (10, 20, 2, "on_time"),  # at ts=40
        (40, 50, 8, "on_time")]  # at the end of input
    assert col.stream("late") == [("k", {"ts": 5, "v": 16})]  # beyond it: .late()


def test_early_fire_ms_fires_partial_results_on_processing_time():
    bolt = WindowAggregateBolt(TumblingWindows(size_ms=1000), lambda it: it["ts"], Sum("v"),
                               early_fire_ms=50)
    assert bolt.tick_interval_ms is not None  # the engine ticks it
    col = prepare(bolt)
    bolt.on_tick(0)
    bolt.execute(keyed_tuple("k", {"ts": 1, "v": 3}))
    bolt.on_tick(60)
    bolt.execute(keyed_tuple("k", {"ts": 2, "v": 4}))
    bolt.on_tick(120)
    bolt.on_inputs_finished()
    assert [WindowResult(*v)[3:] for v in col.stream()] == [
        (3, "early"), (7, "early"), (7, "on_time")]


def test_records_sharing_the_newest_timestamp_are_on_time_with_the_default_bound():
    bolt = WindowAggregateBolt(TumblingWindows(size_ms=10), lambda it: it["ts"], Sum("v"))
    col = prepare(bolt)
    for key in ("a", "b", "c"):  # one event-time instant, three keys, in order
        bolt.execute(keyed_tuple(key, {"ts": 9, "v": 1}))
    bolt.on_inputs_finished()
    assert col.stream("late") == []
    assert sorted(WindowResult(*v) for v in col.stream()) == [
        WindowResult(k, 0, 10, 1, "on_time") for k in "abc"]
