"""bench/nexmark's generator and reference: seeded determinism, the Nexmark proportions,
bounded out-of-order delivery, and the reference's reading of the query definitions on
hand-made events."""

from __future__ import annotations

from collections import Counter

from bench.nexmark import reference
from bench.nexmark.generator import BASE_TIME_MS, GeneratorConfig, read_events, write_events

T0 = BASE_TIME_MS


def test_same_seed_same_file_other_seed_other_file(tmp_path) -> None:
    paths = [tmp_path / f"{i}.jsonl" for i in range(3)]
    for path, seed in zip(paths, (5, 5, 6), strict=True):
        write_events(GeneratorConfig(3_000, seed=seed), str(path))
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


def test_proportions_ids_and_bounded_out_of_order_delivery(tmp_path) -> None:
    path = str(tmp_path / "e.jsonl")
    write_events(GeneratorConfig(5_000, seed=1, rate=1000, delay_ms=300), path)
    events = list(read_events(path))
    assert Counter(e["type"] for e in events) == {"person": 100, "auction": 300, "bid": 4600}
    people = sorted(e["id"] for e in events if e["type"] == "person")
    assert people == list(range(1000, 1100))
    newest, worst, swapped = 0, 0, 0
    for e in events:
        if e["dateTime"] < newest:
            swapped += 1
        newest = max(newest, e["dateTime"])
        worst = max(worst, newest - e["dateTime"])
    assert 0 < worst <= 300 and swapped > 100  # out of order, never beyond the delay
    bids = [e for e in events if e["type"] == "bid"]
    hot_bidders = sum(1 for b in bids if (b["bidder"] - 1000) % 4 == 1)
    assert 0.7 < hot_bidders / len(bids) < 0.85  # 3/4 hot, plus a few by chance
    auctions = [e for e in events if e["type"] == "auction"]
    assert all(a["expires"] > a["dateTime"] for a in auctions)
    assert {a["category"] for a in auctions} == {10, 11, 12, 13, 14}


def _bid(auction, price, ts, bidder=1):
    return {"type": "bid", "auction": auction, "bidder": bidder, "price": price,
            "channel": "c", "url": "u", "dateTime": T0 + ts, "extra": ""}


def test_reference_reads_the_definitions() -> None:
    # q7: BETWEEN window_end - 10 s AND window_end is inclusive: a bid exactly at 10 s
    # with the first window's top price is a top bid of both windows.
    q7 = reference.q7([_bid(1, 50, 1_000), _bid(2, 50, 10_000), _bid(3, 10, 12_000)])
    assert sorted((r["auction"], r["dateTime"] - T0) for r in q7) == \
        [(1, 1_000), (2, 10_000), (2, 10_000)]
    # q11: a bid exactly gap after the last one joins its session; 1 ms more does not.
    q11 = reference.q11([_bid(1, 1, 0), _bid(1, 1, 10_000), _bid(1, 1, 20_001)])
    assert sorted((r["bid_count"], r["starttime"] - T0, r["endtime"] - T0) for r in q11) \
        == [(1, 20_001, 30_001), (2, 0, 20_000)]
    # q4: max price per auction within [dateTime, expires]; BIGINT average per category.
    auction = {"type": "auction", "id": 7, "category": 10, "dateTime": T0, "expires": T0 + 5}
    other = {**auction, "id": 8, "expires": T0 + 100}
    q4 = reference.q4([auction, other, _bid(7, 3, 5), _bid(7, 99, 6), _bid(8, 4, 50)])
    assert q4 == [{"id": 10, "final": 3}]  # (3 + 4) // 2
