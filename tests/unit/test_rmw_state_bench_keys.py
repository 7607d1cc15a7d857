"""bench/rmw_state_bench.py's fixed-mix key sequence (``--present-share``, issue 34): seeded
and replayable from any position (the spout's snapshot is its position), the share of
reads finding their key held in every tenth while the state grows linearly to the keys
given, re-reads spread over the whole state; and the exactly-once check built on it."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.rmw_state_bench import BoltProgress, MixedKeys, check_counts, compare, expected_counts

KEYS = 40_000


def sequence(share: float, seed: int = 7, task: int = 0, tasks: int = 2) -> list[int]:
    gen = MixedKeys(KEYS, share, seed, task, tasks)
    return gen.keys_at(0, gen.length)


def test_same_seed_same_sequence_other_seed_other_sequence() -> None:
    assert sequence(0.5) == sequence(0.5)
    assert sequence(0.5) != sequence(0.5, seed=8)


def test_replayable_from_any_position() -> None:
    gen = MixedKeys(KEYS, 0.5, 7, 1, 2)
    whole = gen.keys_at(0, gen.length)
    for cut in (1, 499, 500, 4095, 4096, 4097, 12_345, gen.length - 1):
        again = MixedKeys(KEYS, 0.5, 7, 1, 2)  # a restored spout: a fresh generator
        assert whole[:cut] + again.keys_at(cut, gen.length) == whole, cut
    pieces: list[int] = []
    for start in range(0, gen.length, 333):
        pieces += gen.keys_at(start, min(gen.length, start + 333))
    assert pieces == whole


@pytest.mark.parametrize("share", [0.25, 0.5, 0.8])
def test_the_share_of_reads_finding_their_key_holds_in_every_tenth(share: float) -> None:
    seqs = [sequence(share, task=t) for t in (0, 1)]
    # each key is new exactly once over the two tasks, and the tasks' keys are disjoint
    firsts = [k for seq in seqs for k in dict.fromkeys(seq)]
    assert sorted(firsts) == list(range(KEYS))
    for seq in seqs:
        assert abs(len(seq) - KEYS / 2 / (1 - share)) <= 1 / (1 - share)
        seen: set[int] = set()
        n = len(seq)
        for tenth in range(10):
            part = seq[tenth * n // 10:(tenth + 1) * n // 10]
            found = 0
            for k in part:
                found += k in seen
                seen.add(k)
            assert abs(found / len(part) - share) < 0.002, (tenth, found / len(part))
            # the state grows linearly: a tenth of the records adds a tenth of the keys
            assert abs(len(seen) - (tenth + 1) * KEYS / 20) <= 2


def test_re_reads_sample_the_whole_state_not_only_recent_keys() -> None:
    seq = sequence(0.5, task=0)
    first_at: dict[int, int] = {}
    ages = []  # in the last tenth: where in the sequence a re-read key was first written
    for i, k in enumerate(seq):
        if k in first_at:
            if i >= 0.9 * len(seq):
                ages.append(first_at[k] / i)
        else:
            first_at[k] = i
    assert len(ages) > 1000
    older_half = sum(a < 0.5 for a in ages) / len(ages)
    assert 0.4 < older_half < 0.6, older_half


def test_expected_counts_are_each_keys_occurrences() -> None:
    want = Counter(sequence(0.5, task=0) + sequence(0.5, task=1))
    got = expected_counts(KEYS, 0.5, 7, 2)
    assert [got[k] for k in range(KEYS)] == [want[k] for k in range(KEYS)]
    assert max(got) > 5  # early keys are read many times


def test_the_check_takes_exactly_counts_two_to_final_per_key() -> None:
    expected = expected_counts(2_000, 0.6, 3, 2)
    right = [(k, c) for k in range(2_000) for c in range(2, expected[k] + 1)]
    assert right and check_counts(right, expected) == []
    assert check_counts(right + right[:3], expected) == ["3 duplicate records"]
    assert check_counts(right[5:], expected) == ["5 of the expected records missing"]
    over = [(k, c) for k, c in right[:1]] + [(right[0][0], expected[right[0][0]] + 1)]
    assert check_counts(over + right[1:], expected) == [
        "1 records with a count the key sequence never reaches"]


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="present share"):
        MixedKeys(KEYS, 1.0, 7, 0, 2)
    with pytest.raises(ValueError, match="present share"):
        MixedKeys(KEYS, -0.1, 7, 0, 2)


def test_the_pair_compares_matching_tenths_and_measures_flatness_from_the_second() -> None:
    def run(rates: list[tuple[float, float, float]], cpu: float) -> dict:
        return {"records_per_s": sum(r for _, _, r in rates) / len(rates), "tenths": [
            {"from_fraction": a, "fraction": b, "records_per_s": r,
             "kv_cpu_us_per_record": cpu * 100_000 / r} for a, b, r in rates]}

    rmw = run([(0.0, 0.1, 120_000), (0.1, 0.2, 100_000), (0.2, 0.4, 90_000),
               (0.4, 1.0, 80_000)], 1.0)
    write = run([(0.0, 0.1, 200_000), (0.1, 0.2, 160_000), (0.2, 0.3, 150_000),
                 (0.3, 0.4, 150_000), (0.4, 1.0, 160_000)], 0.5)
    c = compare(rmw, write)
    # the 20-40 % row of one run has no match in the other: left out
    assert [f for f, _ in c["ratio_tenths"]] == [0.1, 0.2, 1.0]
    assert c["ratio_tenths"][0][1] == pytest.approx(0.6)
    assert c["rmw_min_over_max_from_2nd_tenth"] == pytest.approx(0.8)  # 80k / 100k
    assert c["rmw_cpu_min_over_max_from_2nd_tenth"] == pytest.approx(0.8)


class _Handle:
    """The ``kv`` component's per-task metrics, one poll after another."""

    def __init__(self, polls: list[dict[str, dict[str, float]]]) -> None:
        self.polls = iter(polls)

    def metrics(self, component: str) -> dict[str, object]:
        assert component == "kv"
        return {"tasks": next(self.polls)}


def _task(generation: int, executed: int, emitted: int) -> dict[str, float]:
    return {"generation": generation, "executed": executed, "emitted": emitted,
            "cpu_seconds": executed / 1e5, "store": {}}


def test_the_bolt_progress_keeps_counting_across_a_restart_that_passed_the_old_counts() -> None:
    """A task built again at a rollback starts its counters over and may pass its old
    counts before the TM has its first heartbeat: the new generation, not a fall of the
    counters, says it started over, so the totals keep what it did before (a CI run
    lost it, and a tenth's share of reads finding their key came out of two polls'
    noise)."""
    progress = BoltProgress()
    handle = _Handle([{"3": _task(1, 60_000, 30_000)},
                      {"3": _task(2, 61_000, 30_400)},   # rebuilt, already past 60,000
                      {"3": _task(2, 80_000, 40_000)},
                      {"3": _task(2, 5_000, 2_600)}])    # a fall: also a restart
    totals = [progress.update(handle) for _ in range(4)]
    assert [t["executed"] for t in totals] == [60_000, 121_000, 140_000, 145_000]
    assert [t["emitted"] for t in totals] == [30_000, 60_400, 70_000, 72_600]
