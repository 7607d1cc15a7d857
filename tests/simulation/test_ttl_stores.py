"""The simulator's TTL state on the real RocksDB store (``rocksdb_ttl``, ``stores.py``):
snapshots as of the barrier without what expired by then, restores that keep write times,
seeds that replay exactly and leave no database behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jstormpy.state_store import RocksState, Stamped
from jstormpy.testing.simulation import stores as stores_module
from jstormpy.testing.simulation.faults import ALL_FAULTS, Fault, FaultPlan
from jstormpy.testing.simulation.scenario import run_seed, run_seeds
from jstormpy.testing.simulation.stores import CounterStores, NativeState, materialised
from jstormpy.testing.simulation.world import World
from tests.manual_clock import Clock

ROCKS = (Fault.ROCKSDB_TTL, Fault.WORKER_CRASH, Fault.TM_CRASH)


def _leftovers() -> set[str]:
    scratch = Path(stores_module.SCRATCH)
    base = scratch if os.path.isdir(scratch) else Path("/tmp")
    # this process's only: a simulation running beside the test (CI's background sweep)
    # makes and removes its own
    return {p.name for p in base.glob(f"jstorm-simulate-{os.getpid()}-*")}


@pytest.mark.parametrize("native", [False, True], ids=["full", "native"])
def test_a_snapshot_is_the_state_at_the_barrier_without_what_expired_by_then(
        native: bool) -> None:
    """The full dump and the store's default (native SST files, read back out of them)
    store the same entries."""
    clock = Clock()
    stores = CounterStores(True, clock, 8, native=native)
    try:
        states = stores.open_counter({}, 10)
        state, counts = states["streak"], states["counts"]
        assert isinstance(state, RocksState) and isinstance(counts, RocksState)
        state["old"] = 1
        counts["old"] = 1
        clock.now += 6
        state["young"] = 2
        clock.now += 5  # "old" expired, "young" not
        frozen = stores.snapshot({**states, "other": {"x": 1}})
        assert frozen is not None and frozen.names == {"streak", "counts"}
        state["after"] = 3  # the task goes on writing before the upload runs
        counts["old"] = 2
        clock.now += 100  # the upload runs late: "young" expired meanwhile
        stored = frozen.read(1, 1, 0)
        assert all(isinstance(v, NativeState) for v in stored.values()) == native
        assert materialised(stored) == {"streak": {"young": Stamped(1006.0, 2)},
                                        "counts": {"old": 1}}
    finally:
        stores.close()


def test_a_restore_keeps_the_write_times_and_the_store_drops_what_expires() -> None:
    clock = Clock()
    stores = CounterStores(True, clock, 8)
    try:
        states = stores.open_counter({"streak": {"a": Stamped(995.0, 7),
                                                 "b": Stamped(1000.0, 8)},
                                      "counts": {"a": 3}}, 10)
        state = states["streak"]
        assert isinstance(state, RocksState)
        assert state.get("a") == 7 and state.get("b") == 8 and dict(states["counts"]) == {
            "a": 3}
        clock.now = 1006.0  # a (written at 995) expired, b not
        assert "a" not in state and state.get("b") == 8 and len(state) == 1
        stores.stop(state)  # the incarnation is gone: its database closed
        assert stores.open_counter({}, 10)["streak"].get("b") is None  # a fresh database
    finally:
        stores.close()
    assert stores.root is None


def test_a_rocksdb_ttl_seed_replays_exactly_and_leaves_no_database() -> None:
    before = _leftovers()
    seeds = [s for s in range(40) if "rocksdb_ttl" in run_seed(s, ROCKS).faults][:3]
    assert len(seeds) == 3
    for seed in seeds:
        a, b = run_seed(seed, ROCKS, trace_events=None), run_seed(seed, ROCKS,
                                                                  trace_events=None)
        assert a.ok, a.violations
        assert (a.outcome, a.faults, a.steps, a.trace) == (b.outcome, b.faults, b.steps,
                                                           b.trace)
        assert a.steps > 100
    assert _leftovers() == before


def test_rocksdb_ttl_seeds_pass_on_the_real_code() -> None:
    failures, ran, _ = run_seeds(range(150), ROCKS)
    assert ran == 150 and not failures, [(f.seed, f.violations[:2]) for f in failures[:3]]


def test_drawn_from_every_kind_a_seed_keeps_rocksdb_ttl_one_time_in_four() -> None:
    kept = 0
    for seed in range(3000):
        plan = FaultPlan.draw(World(seed, 0), ALL_FAULTS, 400.0)
        kept += plan.on(Fault.ROCKSDB_TTL)
        if plan.on(Fault.ROCKSDB_TTL) or plan.on(Fault.STATE_TTL):
            assert plan.ttl_ms is not None
    assert 40 < kept < 150, kept  # ~3000 * 2.5/24 / 4 = 78
    narrowed = [FaultPlan.draw(World(s, 0), (Fault.ROCKSDB_TTL,), 400.0) for s in range(20)]
    assert all(p.on(Fault.ROCKSDB_TTL) and p.ttl_ms for p in narrowed)
