"""One seed: draw the faults, run the job (twice for a lifecycle fault), check invariants.

The invariants, after every run:

* committed output per key equals the reference exactly once, in order (every key's
  records ``1..N``, each once, in sequence order);
* state equals a recomputation (each committed row's running count equals its sequence
  number; the ``count`` and ``tally`` bolts' final state sums to each key's ``N``);
* no commit for a checkpoint that did not complete (checked at every commit);
* no restore below a committed checkpoint (checked at every restore);
* every run ends drained, or in a failed or refused ending one of its faults declares
  legitimate (``judging.LEGITIMATE``), never a hang; any other failed ending is a violation.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from jstormpy.api.errors import ConfigError, SinkError
from jstormpy.master.topology_state import TopologyState
from jstormpy.run_identity import RunIdentity
from jstormpy.testing.simulation.cluster import MAX_PARALLELISM, Simulation
from jstormpy.testing.simulation.faults import ALL_FAULTS, Fault, FaultPlan
from jstormpy.testing.simulation.file_sink import launcher_sink
from jstormpy.testing.simulation.judging import ReachTally, Step, judge, steps_reached
from jstormpy.testing.simulation.outputs import Row, SimOutput
from jstormpy.testing.simulation.storage import SimStorage
from jstormpy.testing.simulation.stores import CounterStores
from jstormpy.testing.simulation.world import TRACE_EVENTS, World

KEYS = 6
HORIZON_MS = 400.0
MAX_STEPS = 60_000
MAX_TIME_MS = 60_000.0


@dataclass
class SeedResult:
    """What one seed did."""

    seed: int
    faults: str
    outcome: str
    """``drained``, ``refused: ...`` (a sink or lifecycle check refused), ``failed: ...``
    (the Topology Master failed the topology), or ``violated``/``hung``."""
    violations: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    steps: int = 0
    reached: dict[Fault, frozenset[Step]] = field(default_factory=dict)
    """Per fault of the seed, the steps it targets that the run reached."""

    @property
    def ok(self) -> bool:
        return not self.violations


def _inputs(world: World) -> tuple[dict[int, list[tuple[str, int]]], dict[str, int]]:
    rng = world.rng
    counts = {f"k{i}": rng.randint(3, 7) for i in range(KEYS)}
    inputs: dict[int, list[tuple[str, int]]] = {}
    for spout in (0, 1):
        mine = [k for i, k in enumerate(counts) if i % 2 == spout]
        queues = {k: list(range(1, counts[k] + 1)) for k in mine}
        seq: list[tuple[str, int]] = []
        while any(queues.values()):
            k = rng.choice([k for k in mine if queues[k]])
            seq.append((k, queues[k].pop(0)))
        inputs[spout] = seq
    return inputs, counts


SINK_KINDS = ("log", "files", "staged")
"""The simulated sink kinds: KafkaSink's commit log, FileSink, the PostgreSQL/Redis
two-phase-commit sinks."""


def run_seed(seed: int, allowed: tuple[Fault, ...] = ALL_FAULTS,
             trace_events: int | None = TRACE_EVENTS, sink: str | None = None) -> SeedResult:
    """Run seed ``seed`` with faults drawn from ``allowed``; the trace keeps the last
    ``trace_events`` events (None: all). ``sink``: one of :data:`SINK_KINDS` instead of the
    seed's own draw (every other draw stays as the seed makes it)."""
    world = World(seed, trace_events)
    plan = FaultPlan.draw(world, allowed, HORIZON_MS)
    inputs, counts = _inputs(world)
    output = SimOutput(kind=_sink_kind(world, seed, sink))
    result = SeedResult(seed, f"{plan.describe()}; sink={output.kind}", "drained")
    # the RocksDB store's default checkpoint (native, incremental) or the full dump, from a
    # generator of its own (every other draw of every seed stays as it was)
    stores = CounterStores(plan.on(Fault.ROCKSDB_TTL), world.clock_ms, MAX_PARALLELISM,
                           native=random.Random(f"{seed}:native").random() < 0.5)
    if stores.rocksdb:
        result.faults += "; rocksdb=" + ("native" if stores.native else "full")
    try:
        _run(world, plan, inputs, counts, output, result, stores)
    except AssertionError as exc:  # an impossible state reached by the protocol glue
        result.violations.append(f"assertion: {exc}")
        result.outcome = "violated"
    finally:
        stores.close()
    wrong = judge(result.outcome, plan)
    if wrong is not None:
        result.violations.append(wrong)
        result.outcome = "violated"
    result.reached = steps_reached(plan, world.reached)
    result.trace = list(world.trace)
    result.steps = world.steps
    return result


def _sink_kind(world: World, seed: int, forced: str | None = None) -> str:
    """``"log"`` or ``"files"`` from the seed's draws; half the ``"log"`` seeds, picked by a
    generator of their own (so every other draw of every seed stays as it was, and the
    seeds docs/simulation.md names replay), are ``"staged"`` (PostgreSQL, Redis).
    ``forced``: that kind, after the same draw (so the seed's other draws stay)."""
    if forced is not None and forced not in SINK_KINDS:
        raise ConfigError(f"unknown sink kind {forced!r} (known: {', '.join(SINK_KINDS)})")
    kind = world.rng.choice(("log", "files"))
    if forced is not None:
        return forced
    if kind == "log" and random.Random(f"{seed}:sink").random() < 0.5:
        return "staged"
    return kind


def _run(world: World, plan: FaultPlan, inputs: dict[int, list[tuple[str, int]]],
         counts: dict[str, int], output: SimOutput, result: SeedResult,
         stores: CounterStores) -> None:
    first = RunIdentity.fresh()
    first = RunIdentity(job_id=f"{world.seed:x}a", epoch=first.epoch)
    storage = SimStorage(world, plan)
    sim = Simulation(world, plan, output, storage, inputs, first, counter_stores=stores)
    if plan.lifecycle is Fault.SAVEPOINT_INTO_USED:
        sim.savepoint_at = world.rng.randint(1, 3)
    if not _drive(world, sim, result):
        return
    if plan.lifecycle is None:
        _check(sim, counts, [r for r in output.committed_rows() if r.job == first.job_id], result)
        return
    world.note(f"lifecycle: {plan.lifecycle.value}")
    # the second run starts after the first drained, with the faults still active
    if plan.lifecycle is Fault.FRESH_RUN_INTO_USED:
        second = RunIdentity(job_id=f"{world.seed:x}b", epoch=0)
        world.reach(Step.SECOND_RUN_CHECKED)
        try:
            if output.kind == "files":
                launcher_sink(output).check_fresh_run()
        except SinkError as exc:
            result.outcome = f"refused: {exc}"
            return
        sim2 = Simulation(world, plan, output, SimStorage(world, plan), inputs, second,
                          counter_stores=stores)
        if _drive(world, sim2, result):
            _check(sim2, counts,
                   [r for r in output.committed_rows() if r.job == second.job_id], result)
        return
    if sim.savepoint is None or sim.savepoint_copy is None:
        _check(sim, counts, [r for r in output.committed_rows() if r.job == first.job_id], result)
        return
    s = sim.savepoint
    second = RunIdentity.from_savepoint(first, s)
    second = RunIdentity(job_id=f"{world.seed:x}b", epoch=second.epoch)
    world.reach(Step.SECOND_RUN_CHECKED)
    try:
        if output.kind == "files":
            launcher_sink(output).check_savepoint_restore(s)
    except SinkError as exc:
        result.outcome = f"refused: {exc}"
        return
    storage2 = SimStorage(world, plan)
    meta, snaps = sim.savepoint_copy
    # as savepoints.prepare_restore writes it: no run identity (the new run's epochs)
    storage2.import_checkpoint(s, {k: v for k, v in meta.items() if k != "run"}, snaps)
    sim2 = Simulation(world, plan, output, storage2, inputs, second, resume=True,
                      earlier=(first, s), layout=sim.savepoint_layout, counter_stores=stores)
    if _drive(world, sim2, result):
        rows = [r for r in output.committed_rows() if (r.job == first.job_id and r.txn <= s)
                or r.job == second.job_id]
        # the first run's output up to the savepoint is part of what is checked, with any
        # at-least-once span it had by then (a fallback past a lost shared file): its
        # replay is committed twice below the savepoint, or once there and once more by
        # the second run, which continues from the savepoint's state
        _check(sim2, counts, rows, result, inherited=sim.savepoint_fell_back)


def _drive(world: World, sim: Simulation, result: SeedResult) -> bool:
    sim.start()
    started = world.now
    finished = world.run(lambda: sim.finished() or sim.output.refused is not None,
                         MAX_STEPS, started + MAX_TIME_MS)
    result.violations.extend(sim.violations)
    if sim.output.refused is not None:  # a named error state (outputs.SimOutput.refused)
        result.outcome = f"refused: {sim.output.refused}"
        return False
    if not finished:
        result.outcome = "hung"
        result.violations.append(f"the run neither drained nor failed within "
                                 f"{MAX_TIME_MS:.0f} ms / {MAX_STEPS} steps "
                                 f"(TM {sim.tm.state}, generation {sim.tm.generation})")
        return False
    if sim.tm.state != TopologyState.DRAINED:
        result.outcome = f"{sim.tm.state.value}: {sim.tm.failure}"
        return False
    return True


def _check(sim: Simulation, counts: dict[str, int], rows: list[Row],
           result: SeedResult, inherited: frozenset[int] = frozenset()) -> None:
    """``inherited``: the checkpoints an earlier run fell back past whose output ``rows``
    include (a savepoint restore's check covers the first run's output up to it)."""
    by_key: dict[str, list[Row]] = {}
    for r in rows:
        by_key.setdefault(r.key, []).append(r)
    # a lost shared file: the documented fallback, in this run or in the earlier output
    at_least_once = bool(sim.fell_back_past or inherited)
    for key, n in counts.items():
        got = by_key.get(key, [])
        seqs = [r.seq for r in got]
        if at_least_once and set(seqs) == set(range(1, n + 1)):
            pass  # every record, some twice: the span of the damaged checkpoint
        elif seqs != list(range(1, n + 1)):
            missing = sorted(set(range(1, n + 1)) - set(seqs))
            dups = sorted({s for s in seqs if seqs.count(s) > 1})
            result.violations.append(
                f"key {key}: committed sequence {seqs}, expected 1..{n} once each in order"
                f" (missing {missing}, duplicated {dups})")
        bad = [r for r in got if r.count != r.seq]
        if bad:
            result.violations.append(f"key {key}: running count {bad[0].count} at record "
                                     f"{bad[0].seq} (state lost or counted twice)")
        ttl = sim.plan.ttl_ms
        if ttl is not None and not at_least_once:
            _check_ttl(key, got, ttl, result)
    if sim.plan.ttl_ms is not None and not at_least_once:
        _check_final_ttl_state(sim, by_key, result)
    # the state the final checkpoint stored (what a restore would load)
    meta = sim.storage.metadata_now(sim.drained_at) or {"tasks": {}}
    components = sim.layout.component_of()
    for comp, state in (("count", "counts"), ("tally", "tally")):
        totals: dict[str, int] = {}
        unreadable = False
        for t, entry in meta["tasks"].items():
            if components.get(int(t)) != comp:
                continue
            stored = sim.storage.snapshot_now(entry["handle"]) or {}
            snap = sim.storage.materialize(stored)
            if snap is None:
                gone = {f for f in stored["files"] if not sim.storage.stored(f)}
                if not gone <= sim.storage.lost:
                    result.violations.append(
                        f"the final checkpoint needs shared files "
                        f"{sorted(gone - sim.storage.lost)}, which retention deleted")
                unreadable = True  # else the fault took a file it needs: unchecked
                break
            for k, v in snap.get("states", {}).get(state, {}).items():
                totals[k] = totals.get(k, 0) + v
        if not unreadable and totals != counts:
            wrong = {k: (totals.get(k), n) for k, n in counts.items() if totals.get(k) != n}
            result.violations.append(f"{comp} state {wrong} (got, expected) differs from a "
                                     "recomputation")
    if result.violations:
        result.outcome = "violated"


def _check_ttl(key: str, rows: list[Row], ttl_ms: int, result: SeedResult) -> None:
    """The TTL state recomputed from the committed rows: a key's entry is visible to a
    record if the previous record of the key (the one that wrote it) was processed less
    than ``ttl_ms`` before; a restore that resurrected an expired entry, or lost a live
    one, shows as a wrong streak."""
    prev: Row | None = None
    for r in rows:
        live = prev is not None and prev.at > r.at - ttl_ms
        want = prev.streak + 1 if live and prev is not None else 1
        if r.streak != want:
            why = ("an expired entry resurrected" if r.streak > want else
                   "a live entry lost")
            result.violations.append(
                f"key {key}: TTL state {r.streak} at record {r.seq} (t={r.at:.1f} ms), "
                f"expected {want} (previous write at "
                f"{'none' if prev is None else f'{prev.at:.1f}'} ms, ttl {ttl_ms} ms): {why}")
            return
        prev = r


def _check_final_ttl_state(sim: Simulation, by_key: dict[str, list[Row]],
                           result: SeedResult) -> None:
    """Every entry the final checkpoint's TTL state holds is a write of its key that the
    committed output shows: its last one, or (with shared files, whose deltas carry no
    deletions, as SST files keep an expired entry until compaction) an older one left in
    the chain when the last write had expired and been swept by the snapshot: older than
    the last write, so expired too. A restamped entry matches no write."""
    meta = sim.storage.metadata_now(sim.drained_at) or {"tasks": {}}
    components = sim.layout.component_of()
    for t, entry in meta["tasks"].items():
        if components.get(int(t)) != "count":
            continue
        snap = sim.storage.materialize(sim.storage.snapshot_now(entry["handle"]) or {})
        if snap is None:
            continue  # unreadable: the shared-file check above reports it
        for k, stamped in snap.get("states", {}).get("streak", {}).items():
            writes = [(r.at, r.streak) for r in by_key.get(k, [])]
            entry_of = tuple(stamped) if isinstance(stamped, tuple) else stamped
            last = writes[-1] if writes else None
            if entry_of != last and not (sim.plan.shared_files and entry_of in writes):
                result.violations.append(
                    f"key {k}: the final checkpoint's TTL entry {entry_of} is not a write "
                    f"of the key (last: {last})")
                return


def run_seeds(seeds: range | list[int], allowed: tuple[Fault, ...] = ALL_FAULTS,
              budget_s: float | None = None, stop_at_first: bool = False,
              tally: ReachTally | None = None, sink: str | None = None,
              ) -> tuple[list[SeedResult], int, float]:
    """Run ``seeds`` (within ``budget_s`` seconds of wall time, if given); returns the
    failing results, how many seeds ran and the seconds taken. ``tally``: counts per fault
    kind the seeds that reached its target steps; ``sink``: every seed's sink kind
    (:func:`run_seed`)."""
    failures: list[SeedResult] = []
    start = time.monotonic()
    ran = 0
    for seed in seeds:
        if budget_s is not None and time.monotonic() - start > budget_s:
            break
        result = run_seed(seed, allowed, sink=sink)
        ran += 1
        if tally is not None:
            tally.add(result.reached)
        if not result.ok:
            failures.append(result)
            if stop_at_first:
                break
    return failures, ran, time.monotonic() - start
