"""Window joins and interval joins against plain-Python references, on seeded inputs out of
order within the bound; their buffered state stays bounded by the watermark and survives a
restore in the middle of the input."""

from __future__ import annotations

import contextlib
import copy
import pickle
import random
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy import state_store
from jstormpy.api.component import managed_states, use_state_store
from jstormpy.dataflow import JoinResult
from jstormpy.dataflow.interval_join import IntervalJoinBolt
from jstormpy.dataflow.window_join import WindowJoinBolt, join_windows
from jstormpy.window import SessionWindows, SlidingWindows, TumblingWindows

from .drive import bounded_shuffle, keyed_tuple, prepare

SIDES = {("left", "default"): 0, ("right", "default"): 1}
TS = (lambda it: it["ts"], lambda it: it["ts"])


def _items(rng, n, side):
    return [{"side": side, "id": i, "k": rng.choice("xy"), "ts": rng.randrange(150)}
            for i in range(n)]


def _ids(r):
    return (r.key, r.left and r.left["id"], r.right and r.right["id"])


class Stores:
    """Task stores for one example, of the kinds ``kind`` names (``"a>b"``: the first
    task's store is a, the next ones' b): a fresh RocksDB per task (as a worker builds
    one at every start), with a write cache of 2 entries so most reads decode what
    RocksDB holds; all closed and deleted by :meth:`close`."""

    def __init__(self, kind):
        self.kinds = kind.split(">")
        self.dir = Path(tempfile.mkdtemp(prefix="join-store-"))
        self.opened = []
        self.cache_entries = state_store.WRITE_CACHE_ENTRIES
        state_store.WRITE_CACHE_ENTRIES = 2

    def open(self):
        kind = self.kinds[min(len(self.opened), len(self.kinds) - 1)]
        store = state_store.open_store(kind, self.dir / str(len(self.opened)), 128)
        self.opened.append(store)
        return store

    def close(self):
        for store in self.opened:
            store.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        state_store.WRITE_CACHE_ENTRIES = self.cache_entries


def checkpoint(bolt):
    """The bolt's managed states as a checkpoint holds them (through pickle)."""
    for store in {id(s): s for s in [bolt.__dict__.get("_jstorm_state_store")]}.values():
        if store is not None and store.kind == "rocksdb":
            store.flush()
    return pickle.loads(pickle.dumps(dict(managed_states(bolt))))


KINDS = pytest.mark.parametrize("kind", ["memory", "rocksdb", "memory>rocksdb",
                                         "rocksdb>memory"])
"""The store of the run before the restore and after it (a savepoint taken with one store
restores into the other)."""


def _drive(bolt, arrival, state=None, check=None, stores=None):
    """Feed ``arrival`` (left on task 1, right on task 2), calling ``check(bolt)`` after
    each record; ``state``: managed state installed first, as a restore does;
    ``stores``: the bolt's state store comes from it (as the worker installs one)."""
    if state is not None:
        bolt.__dict__["_jstorm_states"] = copy.deepcopy(state)
    if stores is not None:
        store = stores.open()
        use_state_store(bolt, store)
        if store.kind == "rocksdb":
            store.adopt(managed_states(bolt))
    col = prepare(bolt, input_tasks=(1, 2))
    if stores is not None and store.kind == "rocksdb":  # the buffers are in RocksDB
        assert all(isinstance(v, state_store.RocksState)
                   for v in managed_states(bolt).values())
    for it in arrival:
        src = "left" if it["side"] == 0 else "right"
        bolt.execute(keyed_tuple(it["k"], it, source=src, task=1 + it["side"]))
        if check is not None:
            check(bolt)
    return col


@contextlib.contextmanager
def _restored_run(kind, bolt, arrival, cut, check):
    """Run ``arrival[:cut]`` through a fresh bolt, restore its checkpoint into a second one
    (the stores as ``kind`` says) and run the rest to the end of input; yields both bolts
    and every joined result, the stores open."""
    stores = Stores(kind)
    try:
        first = bolt()
        got = [JoinResult(*v[0]) for v in
               _drive(first, arrival[:cut], check=check, stores=stores).stream()]
        second = bolt()
        col = _drive(second, arrival[cut:], checkpoint(first), check, stores)
        second.on_inputs_finished()
        got += [JoinResult(*v[0]) for v in col.stream()]
        yield first, second, got
    finally:
        stores.close()


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


@KINDS
@settings(max_examples=60, deadline=None)
@given(st.sampled_from([TumblingWindows(size_ms=20), SlidingWindows(size_ms=30, slide_ms=10)]),
       st.sampled_from(["inner", "left", "outer"]), st.integers(0, 2**32),
       st.integers(0, 30), st.integers(0, 30), st.sampled_from([0, 1, 20]),
       st.integers(0, 60))
def test_window_join_equals_the_reference_across_a_restore(kind, window, how, seed, nl, nr,
                                                           lag, cut):
    rng = random.Random(seed)
    lefts, rights = _items(rng, nl, 0), _items(rng, nr, 1)
    arrival = bounded_shuffle(lefts + rights, lambda it: it["ts"], lag, rng)

    def bolt():
        return WindowJoinBolt(SIDES, window, TS, out_of_orderness_ms=lag, how=how)

    def bounded(b):  # nothing is kept that the watermark passed
        wm = b._df_clock.wm
        held = 0
        for wins in b.state("join").values():
            assert all(end - 1 > wm for _, end in wins)
            held += sum(len(e[0]) + len(e[1]) for e in wins.values())
        assert b.buffered_records == held

    with _restored_run(kind, bolt, arrival, cut, bounded) as (first, second, got):
        assert Counter(map(_ids, got)) == _window_reference(window, lefts, rights, how)
        assert second.state("join") == {} and second.buffered_records == 0


def _interval_reference(lefts, rights, lower, upper):
    return Counter((l_["k"], l_["id"], r["id"]) for l_ in lefts for r in rights
                   if l_["k"] == r["k"] and lower <= r["ts"] - l_["ts"] <= upper)


@KINDS
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 30), st.integers(0, 30),
       st.sampled_from([(-5, 5), (0, 10), (3, 3), (-20, -2)]), st.sampled_from([0, 1, 20]),
       st.integers(0, 60))
def test_interval_join_equals_the_reference_across_a_restore(kind, seed, nl, nr, bounds, lag,
                                                             cut):
    rng = random.Random(seed)
    lefts, rights = _items(rng, nl, 0), _items(rng, nr, 1)
    lo, hi = bounds
    arrival = bounded_shuffle(lefts + rights, lambda it: it["ts"], lag, rng)

    def bolt():
        return IntervalJoinBolt(SIDES, lo, hi, TS, out_of_orderness_ms=lag)

    def bounded(b):  # a record stays only while a future one could pair with it
        wm = b._df_clock.wm
        held = 0
        for ls, rs in b.state("interval_join").values():
            assert all(t + hi > wm for t, _ in ls) and all(t - lo > wm for t, _ in rs)
            held += len(ls) + len(rs)
        assert b.buffered_records == held

    with _restored_run(kind, bolt, arrival, cut, bounded) as (first, second, got):
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


def _session_reference(gap, lefts, rights, how):
    """Per key, sessions over both sides' records (a record at most ``gap`` after the
    session's newest one extends it); the pairs within each, and the unmatched."""
    out = Counter()
    for key in {it["k"] for it in lefts + rights}:
        recs = sorted((it for it in lefts + rights if it["k"] == key),
                      key=lambda it: it["ts"])
        sessions, end = [], None
        for it in recs:
            if end is None or it["ts"] > end:
                sessions.append([])
            sessions[-1].append(it)
            end = it["ts"] + gap if end is None or it["ts"] > end else \
                max(end, it["ts"] + gap)
        for session in sessions:
            ls = [it for it in session if it["side"] == 0]
            rs = [it for it in session if it["side"] == 1]
            out.update((key, l_["id"], r["id"]) for l_ in ls for r in rs)
            if how in ("left", "outer") and not rs:
                out.update((key, l_["id"], None) for l_ in ls)
            if how == "outer" and not ls:
                out.update((key, None, r["id"]) for r in rs)
    return out


@KINDS
@settings(max_examples=80, deadline=None)
@given(st.integers(0, 7), st.sampled_from(["inner", "left", "outer"]), st.integers(0, 2**32),
       st.integers(0, 30), st.integers(0, 30), st.sampled_from([0, 2, 20]),
       st.integers(0, 60))
def test_session_window_join_equals_the_reference_across_a_restore(kind, gap, how, seed, nl,
                                                                   nr, lag, cut):
    """Sessions span both sides and merge when a record of either side bridges two or
    lands on a session's exact end (records ``gap`` apart share a session: a session
    closes only once the watermark passes its end)."""
    rng = random.Random(seed)
    gap = gap + 1
    lefts, rights = _items(rng, nl, 0), _items(rng, nr, 1)
    arrival = bounded_shuffle(lefts + rights, lambda it: it["ts"], lag, rng)

    def bolt():
        return WindowJoinBolt(SIDES, SessionWindows(gap), TS, out_of_orderness_ms=lag,
                              how=how)

    def bounded(b):  # nothing is kept that the watermark passed
        wm = b._df_clock.wm
        held = 0
        for wins in b.state("join").values():
            assert all(end > wm for _, end in wins)
            held += sum(len(e[0]) + len(e[1]) for e in wins.values())
        assert b.buffered_records == held

    with _restored_run(kind, bolt, arrival, cut, bounded) as (first, second, got):
        assert first.late_records == second.late_records == 0
        assert Counter(map(_ids, got)) == _session_reference(gap, lefts, rights, how)
        assert second.state("join") == {} and second.buffered_records == 0


def test_a_right_record_bridges_two_left_sessions():
    """Two left records 20 ms apart (gap 10) are two sessions until a right record
    between them merges them: both pairs then, and no unmatched left."""
    bolt = WindowJoinBolt(SIDES, SessionWindows(10), TS, how="left")
    col = prepare(bolt, input_tasks=(1, 2))
    bolt.execute(keyed_tuple("k", {"ts": 0, "id": 0}, source="left", task=1))
    bolt.execute(keyed_tuple("k", {"ts": 20, "id": 1}, source="left", task=1))
    assert len(bolt.state("join")["k"]) == 2
    bolt.execute(keyed_tuple("k", {"ts": 10, "id": 2}, source="right", task=2))
    assert list(bolt.state("join")["k"]) == [(0, 30)]
    bolt.on_inputs_finished()
    assert sorted((r[0][1]["id"], r[0][2]["id"]) for r in col.stream()) == [(0, 2), (1, 2)]


def test_a_record_at_a_sessions_end_joins_it_after_the_watermark_passed_end_minus_1():
    """Records ``gap`` apart share a session: at watermark ``end - 1`` the session is
    still open (a record at its end touches it), so the right record at 10 pairs with the
    left one at 0 (gap 10) instead of the left going out alone and the right opening a
    session of its own."""
    bolt = WindowJoinBolt(SIDES, SessionWindows(10), TS, how="left")
    col = prepare(bolt, input_tasks=(1, 2))
    bolt.execute(keyed_tuple("k", {"ts": 0, "id": 0}, source="left", task=1))
    bolt.execute(keyed_tuple("o", {"ts": 10, "id": 1}, source="left", task=1))
    bolt.execute(keyed_tuple("o", {"ts": 10, "id": 2}, source="right", task=2))
    assert bolt._df_clock.wm == 9
    bolt.execute(keyed_tuple("k", {"ts": 10, "id": 3}, source="right", task=2))
    bolt.on_inputs_finished()
    assert sorted((r[0][1]["id"], r[0][2] and r[0][2]["id"]) for r in col.stream()
                  if r[0][0] == "k") == [(0, 3)]


def test_a_session_reopened_by_a_late_record_emits_each_unmatched_record_once():
    """Within the allowed lateness a late record can extend a closed session past the
    watermark; when it closes again, only the records not emitted yet go out."""
    bolt = WindowJoinBolt(SIDES, SessionWindows(10), TS, allowed_lateness_ms=100, how="left")
    col = prepare(bolt, input_tasks=(1, 2))
    bolt.execute(keyed_tuple("k", {"ts": 0, "id": 0}, source="left", task=1))
    bolt.execute(keyed_tuple("o", {"ts": 13, "id": 1}, source="right", task=2))
    bolt.execute(keyed_tuple("o", {"ts": 13, "id": 2}, source="left", task=1))
    assert bolt._df_clock.wm == 12  # k's session [0, 10) closed: its left went out alone
    bolt.execute(keyed_tuple("k", {"ts": 5, "id": 3}, source="left", task=1))  # late
    assert list(bolt.state("join")["k"]) == [(0, 15)]  # open again, up to 14
    bolt.on_inputs_finished()
    assert bolt.late_records == 0
    assert sorted((r[0][1]["id"], r[0][2] and r[0][2]["id"]) for r in col.stream()
                  if r[0][0] == "k") == [(0, None), (3, None)]


@pytest.mark.parametrize("make", [
    lambda: WindowJoinBolt(SIDES, TumblingWindows(size_ms=20), TS, allowed_lateness_ms=5),
    lambda: IntervalJoinBolt(SIDES, -5, 5, TS)], ids=["tumbling", "interval"])
def test_a_join_s_timers_hold_no_records(make):
    """The timer index in RAM: aligned windows keep their due times only (no keys), an
    interval join one timer per key (records in time order), whatever the number of
    buffered records."""
    bolt = make()
    prepare(bolt, input_tasks=(1, 2))
    for i in range(2000):  # 200 keys, 10 records each, all within one window
        item = {"ts": 100 + i // 200, "id": i}
        bolt.execute(keyed_tuple(f"k{i % 200}", item, source="left", task=1))
    assert bolt.buffered_records == 2000
    if isinstance(bolt, WindowJoinBolt):
        assert bolt._df_clock.timer_count() == 2  # [100, 120): close at 119, drop at 124
    else:
        assert bolt._df_clock.timer_count() == 200
