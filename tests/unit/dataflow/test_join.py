"""Window joins and interval joins against plain-Python references, on seeded inputs out of
order within the bound; their buffered state stays bounded by the watermark and survives a
restore in the middle of the input."""

from __future__ import annotations

import copy
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.dataflow import JoinResult
from jstormpy.dataflow.bolts import IntervalJoinBolt, WindowJoinBolt, join_windows
from jstormpy.window import SlidingWindows, TumblingWindows

from .drive import bounded_shuffle, keyed_tuple, prepare

SIDES = {("left", "default"): 0, ("right", "default"): 1}
TS = (lambda it: it["ts"], lambda it: it["ts"])


def _items(rng, n, side):
    return [{"side": side, "id": i, "k": rng.choice("xy"), "ts": rng.randrange(150)}
            for i in range(n)]


def _ids(r):
    return (r.key, r.left and r.left["id"], r.right and r.right["id"])


def _drive(bolt, arrival, state=None, check=None):
    """Feed ``arrival`` (left on task 1, right on task 2), calling ``check(bolt)`` after
    each record; ``state``: managed state installed first, as a restore does."""
    if state is not None:
        bolt.__dict__["_jstorm_states"] = copy.deepcopy(state)
    col = prepare(bolt, input_tasks=(1, 2))
    for it in arrival:
        src = "left" if it["side"] == 0 else "right"
        bolt.execute(keyed_tuple(it["k"], it, source=src, task=1 + it["side"]))
        if check is not None:
            check(bolt)
    return col


def _window_reference(window, lefts, rights, how):
    out = Counter()
    for lw in {(it["k"], w) for it in lefts + rights for w in join_windows(window, it["ts"])}:
        key, win = lw
        ls = [it for it in lefts if it["k"] == key and win in join_windows(window, it["ts"])]
        rs = [it for it in rights if it["k"] == key and win in join_windows(window, it["ts"])]
        for l_ in ls:
            for r in rs:
                out[(key, l_["id"], r["id"])] += 1
        if how in ("left", "outer") and not rs:
            out.update((key, l_["id"], None) for l_ in ls)
        if how == "outer" and not ls:
            out.update((key, None, r["id"]) for r in rs)
    return out


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([TumblingWindows(size_ms=20), SlidingWindows(size_ms=30, slide_ms=10)]),
       st.sampled_from(["inner", "left", "outer"]), st.integers(0, 2**32),
       st.integers(0, 30), st.integers(0, 30), st.sampled_from([0, 1, 20]),
       st.integers(0, 60))
def test_window_join_equals_the_reference_across_a_restore(window, how, seed, nl, nr, lag,
                                                           cut):
    rng = random.Random(seed)
    lefts, rights = _items(rng, nl, 0), _items(rng, nr, 1)
    arrival = bounded_shuffle(lefts + rights, lambda it: it["ts"], lag, rng)

    def bolt():
        return WindowJoinBolt(SIDES, window, TS, out_of_orderness_ms=lag, how=how)

    def bounded(b):  # nothing is kept that the watermark passed
        wm = b._df_clock.wm
        for wins in b.state("join").values():
            assert all(end - 1 > wm for _, end in wins)

    first = bolt()
    got = [JoinResult(*v[0]) for v in _drive(first, arrival[:cut], check=bounded).stream()]
    second = bolt()
    col = _drive(second, arrival[cut:], first.__dict__["_jstorm_states"], bounded)
    second.on_inputs_finished()
    got += [JoinResult(*v[0]) for v in col.stream()]
    assert Counter(map(_ids, got)) == _window_reference(window, lefts, rights, how)
    assert second.state("join") == {} and second.buffered_records == 0


def _interval_reference(lefts, rights, lower, upper):
    return Counter((l_["k"], l_["id"], r["id"]) for l_ in lefts for r in rights
                   if l_["k"] == r["k"] and lower <= r["ts"] - l_["ts"] <= upper)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 30), st.integers(0, 30),
       st.sampled_from([(-5, 5), (0, 10), (3, 3), (-20, -2)]), st.sampled_from([0, 1, 20]),
       st.integers(0, 60))
def test_interval_join_equals_the_reference_across_a_restore(seed, nl, nr, bounds, lag, cut):
    rng = random.Random(seed)
    lefts, rights = _items(rng, nl, 0), _items(rng, nr, 1)
    lo, hi = bounds
    arrival = bounded_shuffle(lefts + rights, lambda it: it["ts"], lag, rng)

    def bolt():
        return IntervalJoinBolt(SIDES, lo, hi, TS, out_of_orderness_ms=lag)

    def bounded(b):  # a record stays only while a future one could pair with it
        wm = b._df_clock.wm
        for ls, rs in b.state("interval_join").values():
            assert all(t + hi > wm for t, _ in ls) and all(t - lo > wm for t, _ in rs)

    first = bolt()
    got = [JoinResult(*v[0]) for v in _drive(first, arrival[:cut], check=bounded).stream()]
    second = bolt()
    col = _drive(second, arrival[cut:], first.__dict__["_jstorm_states"], bounded)
    second.on_inputs_finished()
    got += [JoinResult(*v[0]) for v in col.stream()]
    assert first.late_records == second.late_records == 0
    assert Counter(map(_ids, got)) == _interval_reference(lefts, rights, lo, hi)
    assert second.state("interval_join") == {}


def test_a_window_join_drops_a_window_once_the_watermark_passes_it():
    bolt = WindowJoinBolt(SIDES, TumblingWindows(size_ms=10), TS, how="left")
    col = prepare(bolt, input_tasks=(1, 2))
    bolt.execute(keyed_tuple("k", {"ts": 3, "id": 0}, source="left", task=1))
    bolt.execute(keyed_tuple("k", {"ts": 5, "id": 1}, source="right", task=2))
    assert bolt.buffered_records == 2
    bolt.execute(keyed_tuple("k", {"ts": 30, "id": 2}, source="left", task=1))
    bolt.execute(keyed_tuple("k", {"ts": 31, "id": 3}, source="right", task=2))
    # both channels passed 9: window [0, 10) is closed and gone; [30, 40) holds 2 records
    assert bolt.buffered_records == 2
    bolt.execute(keyed_tuple("k", {"ts": 4, "id": 4}, source="right", task=2))  # too late
    assert bolt.late_records == 1
    assert [(r[1]["id"], r[2]["id"]) for r in col.stream() for r in [r[0]]] == [(0, 1), (2, 3)]


def test_an_item_without_a_usable_timestamp_is_counted_not_a_crash():
    for bolt in (WindowJoinBolt(SIDES, TumblingWindows(size_ms=10), TS),
                 IntervalJoinBolt(SIDES, 0, 5, TS)):
        col = prepare(bolt, input_tasks=(1, 2))
        bolt.execute(keyed_tuple("k", {"id": 0}, source="left", task=1))       # no "ts"
        bolt.execute(keyed_tuple("k", {"ts": "x", "id": 1}, source="left", task=1))
        bolt.execute(keyed_tuple("k", {"ts": 2, "id": 2}, source="left", task=1))
        bolt.execute(keyed_tuple("k", {"ts": 3, "id": 3}, source="right", task=2))
        assert bolt.error_records == 2
        assert [(r[0][1]["id"], r[0][2]["id"]) for r in col.stream()] == [(2, 3)]
