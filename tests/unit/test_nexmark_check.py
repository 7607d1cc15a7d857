"""bench/nexmark's check: an engine's output that differs from the reference fails, with
what differs; q4 is judged by its last row per category, q12 by its bid counts."""

from __future__ import annotations

import json

from bench.nexmark import reference
from bench.nexmark.check import compare, read_output
from bench.nexmark.generator import GeneratorConfig, generate_events


def _events():
    return list(generate_events(GeneratorConfig(3_000, seed=4, rate=200)))


def test_reference_output_passes_and_any_change_fails() -> None:
    events = _events()
    for query in ("q2", "q5", "q11"):
        rows = reference.expected(query, events)
        assert compare(query, events, rows).ok
        assert not compare(query, events, rows[1:]).ok            # a row lost
        assert not compare(query, events, rows + rows[:1]).ok     # a row twice
    bumped = [dict(r) for r in reference.q5(events)]
    bumped[0]["num"] += 1
    verdict = compare("q5", events, bumped)
    assert not verdict.ok and "1 unexpected" in verdict.detail and "1 missing" in verdict.detail


def test_updating_q4_is_judged_by_the_last_row_per_category() -> None:
    events = _events()
    final = reference.q4(events)
    early = [{"id": r["id"], "final": r["final"] + 7} for r in final]
    assert compare("q4", events, early + final).ok
    assert not compare("q4", events, final + early).ok


def test_q12_needs_every_bid_counted_once() -> None:
    events = _events()
    per_bidder = reference.q12_totals(events)["per_bidder"]
    rows = [{"bidder": b, "bid_count": n, "starttime": 10_000, "endtime": 20_000}
            for b, n in per_bidder.items()]
    assert compare("q12", events, rows).ok
    assert not compare("q12", events, rows[1:]).ok
    rows[0] = {**rows[0], "bid_count": rows[0]["bid_count"] - 1}
    assert not compare("q12", events, rows).ok


def test_read_output_reads_rolled_parts_in_the_order_written(tmp_path) -> None:
    bucket = tmp_path / "2026-11-28--21"
    bucket.mkdir()
    for n, value in ((2, "b"), (10, "c"), (1, "a")):
        (bucket / f"part-x-0-{n}").write_text(json.dumps({"v": value}) + "\n")
    (bucket / ".part-x-0-11.inprogress").write_text(json.dumps({"v": "uncommitted"}) + "\n")
    assert [r["v"] for r in read_output(str(tmp_path))] == ["a", "b", "c"]
