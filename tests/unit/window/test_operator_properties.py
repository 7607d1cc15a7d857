"""WindowOperator against the brute-force reference on random out-of-order streams."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.window import Firing, LateRecord, TumblingWindows, WindowOperator, stored
from jstormpy.window.reference import ReferenceWindows

from .helpers import (
    CountAgg,
    SetAgg,
    canon,
    count_assigners,
    drive,
    event_st,
    expand,
    make_operator,
    scan_from,
    time_assigners,
)

early_ms_st = st.one_of(st.none(), st.integers(1, 10))
early_n_st = st.one_of(st.none(), st.integers(1, 4))


@settings(max_examples=500, deadline=None)
@given(assigner=time_assigners, raw=st.lists(event_st, max_size=60),
       lag=st.integers(0, 30), lateness=st.integers(0, 20),
       early_ms=early_ms_st, early_n=early_n_st,
       slicing=st.sampled_from([None, False, "stored", "stored-scan"]))
def test_time_windows_match_reference(  # noqa: PLR0917
        assigner, raw, lag, lateness, early_ms, early_n, slicing) -> None:
    """slicing=None: panes + two-stacks where possible; False: one accumulator per window;
    "stored": windows in a store that hands out copies (the RocksDB state store's way);
    "stored-scan": the same, every watermark step reading the windows in one scan."""
    calls = expand(raw, lag)
    op = make_operator(assigner, SetAgg(), "stored" if slicing == "stored-scan" else slicing,
                       allowed_lateness_ms=lateness, early_fire_every_ms=early_ms,
                       early_fire_every_n=early_n)
    ref = ReferenceWindows(assigner, SetAgg(), lateness)
    with scan_from(1 if slicing == "stored-scan" else stored.SCAN_MIN_DUE):
        got = [*drive(op, calls), op.finish()]
    want = [*drive(ref, calls), ref.finish()]
    for call, g, w in zip([*calls, ("finish",)], got, want, strict=True):
        not_early = [r for r in g if not (isinstance(r, Firing) and r.kind == "early")]
        assert canon(not_early) == canon(w), call
    # early partials: strictly growing, before the window's on_time firing, within it
    history: dict[tuple, list[Firing]] = defaultdict(list)
    for res in got:
        for r in res:
            if isinstance(r, Firing):
                history[(r.key, r.window_start, r.window_end)].append(r)
    for firings in history.values():
        kinds = [f.kind for f in firings]
        assert kinds.count("on_time") <= 1
        if "on_time" in kinds:
            assert "late" not in kinds[: kinds.index("on_time")]
            assert "early" not in kinds[kinds.index("on_time"):]
        for prev, nxt in zip(firings, firings[1:], strict=False):
            if nxt.kind == "on_time":  # the final result always fires, changed or not
                assert set(prev.result) <= set(nxt.result)
            else:  # early/late fire only when the window changed since its last firing
                assert set(prev.result) < set(nxt.result)
        if early_ms is None and early_n is None:
            assert "early" not in kinds
    assert op.late_records == sum(isinstance(r, LateRecord) for res in got for r in res)
    assert op.window_count == 0  # everything purged after finish


@settings(max_examples=150, deadline=None)
@given(assigner=count_assigners, raw=st.lists(event_st, max_size=60))
def test_count_windows_match_reference(assigner, raw) -> None:
    calls = expand(raw, 0)
    op = WindowOperator(assigner, SetAgg())
    ref = ReferenceWindows(assigner, SetAgg())
    got = [*drive(op, calls), op.finish()]
    want = [*drive(ref, calls), ref.finish()]
    for g, w in zip(got, want, strict=True):
        assert canon(g) == canon(w)
    assert op.finish() == []  # the partial windows flush once


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 20), raw=st.lists(event_st, max_size=80),
       lag=st.integers(0, 30), early_n=st.integers(1, 4))
def test_early_count_partials_are_monotone_multiples(size, raw, lag, early_n) -> None:
    """Counts (a monotone aggregation): early results every N elements, then on_time."""
    op = WindowOperator(TumblingWindows(size), CountAgg(), early_fire_every_n=early_n)
    results = [*drive(op, expand(raw, lag)), op.finish()]
    per_window: dict[tuple, list[Firing]] = defaultdict(list)
    for res in results:
        for r in res:
            if isinstance(r, Firing):
                per_window[(r.key, r.window_start)].append(r)
    for firings in per_window.values():
        early = [f.result for f in firings if f.kind == "early"]
        assert early == [early_n * (i + 1) for i in range(len(early))]
        on_time = [f.result for f in firings if f.kind == "on_time"]
        if on_time:
            assert not early or on_time[0] >= early[-1]
            assert on_time[0] < early_n * (len(early) + 1)
