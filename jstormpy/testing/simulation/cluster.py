"""Simulated workers, tasks and Topology Master around the real protocol objects.

What is real (the production modules, unchanged): the TM's
:class:`~jstormpy.master.coordinator.CheckpointCoordinator` and
:class:`~jstormpy.master.restore_plan.RestorePlan`, the tasks'
:class:`~jstormpy.barrier.aligner.BarrierAligner`,
:class:`~jstormpy.barrier.snapshots.TaskSnapshots` and
:class:`~jstormpy.barrier.transactions.SinkTransactions`, key-group routing and
:func:`~jstormpy.keygroups.redistribute` for rescales, the run identity and the commit-log
keys. What is simulated: processes, channels, storage and external systems, and the glue
that performs the objects' actions, written after ``runtime/worker.py``,
``runtime/executor.py`` and ``master/core.py`` (the same checks in the same order).

The job: two spout tasks replay a fixed per-key sequence; ``count`` (fields grouping,
managed state keyed by the routing key) numbers each key's records; ``tally`` (shuffle
grouping: per-task partial counts) counts them too; two sink tasks write
``(key, seq, count)`` through two-phase commit.
"""

from __future__ import annotations

import copy
import functools
import heapq
import pickle
import random
import zlib
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import (
    BackendError,
    JStormError,
    RestoreRefusedError,
    SinkError,
)
from jstormpy.barrier import task_barrier as barrier_steps
from jstormpy.barrier.aligner import BarrierAligner
from jstormpy.barrier.snapshots import AckSnapshot, DeclineSnapshot, TaskSnapshots
from jstormpy.barrier.transactions import (
    Begin,
    Commit,
    FailCheckpoint,
    PreCommit,
    Recover,
    ReportCommitted,
    RetryCommit,
    SinkStep,
    SinkTransactions,
)
from jstormpy.keygroups import key_group, redistribute, task_index_for_key_group
from jstormpy.master import coordinator_driver
from jstormpy.master.commit_point import (
    CommitOutcome,
    CommitPoint,
    CommitStatus,
    FenceMoment,
)
from jstormpy.master.commit_point import perform as perform_commit
from jstormpy.master.commit_point import report as report_commit
from jstormpy.master.coordinator import (
    CheckpointCoordinator,
    CollectGarbage,
    CoordinatorAction,
    Drained,
    SendAbort,
    SendComplete,
    SendTrigger,
    StartRecovery,
    TaskAck,
    TriggerFinal,
    WriteCommitPoint,
)
from jstormpy.master.generation_steps import begin as begin_generation
from jstormpy.master.ids_record_steps import IdsRecordStores
from jstormpy.master.quiescent_cut import CutFailed, Quiesced, QuiescentCut
from jstormpy.master.recovery_steps import (
    FallBack,
    Gate,
    Listing,
    Prepare,
    PrepareFailed,
    StartAll,
    may_resolve,
    worker_ready,
)
from jstormpy.master.recovery_steps import perform as perform_recovery
from jstormpy.master.rescale import store_bad_checkpoint
from jstormpy.master.rescale_steps import RescaleSteps, pending_rescale_committed
from jstormpy.master.rescale_steps import perform as perform_rescale
from jstormpy.master.restore_plan import (
    LATEST,
    RestorePlan,
    prepare_ids,
)
from jstormpy.master.retention_steps import perform as perform_retention
from jstormpy.master.topology_state import TopologyState
from jstormpy.master.upgrade_steps import SwitchSteps
from jstormpy.master.upgrade_steps import perform as perform_switch
from jstormpy.multilang.acks import AckLedger, AdoptSteps
from jstormpy.run_identity import RunIdentity
from jstormpy.runtime import prepare_steps
from jstormpy.runtime.prepare_steps import PrepareOrder
from jstormpy.runtime.prepare_steps import Ready as PrepareReady
from jstormpy.state_backends.base import CHECKPOINT_IDS_META, COMPLETED_META
from jstormpy.state_backends.rocksdb_files import local_copy_matches
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.file_sink import SimFileSink, open_file_sink
from jstormpy.testing.simulation.judging import Step
from jstormpy.testing.simulation.kafka_sink import SimKafkaSink, open_kafka_sink
from jstormpy.testing.simulation.outputs import Row, SimOutput
from jstormpy.testing.simulation.staged_sink import SimStagedSink, open_staged_sink
from jstormpy.testing.simulation.storage import SimStorage, merge_files
from jstormpy.testing.simulation.stores import CounterStores, NativeState
from jstormpy.testing.simulation.world import World

MAX_PARALLELISM = 8
WORKERS = 2
CHECKPOINT_INTERVAL = 12.0
HEARTBEAT_TIMEOUT = 25.0
RETRY_PREPARE = 20.0
RETAINED = 2
BASE_EVERY = 4
"""With shared files, a task's chain holds at most this many files: then a base."""
RETRIED = frozenset({"complete", "abort"})
"""TM commands a retry may deliver twice (idempotent by design); a Prepare, trigger or
start is sent once on the ordered control stream (a Prepare again only in a new
generation)."""


# -- the job -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Component parallelisms -> task ids (spouts, count, tally, sinks, in that order)."""

    count: int = 2
    tally: int = 2
    spouts: int = 2
    sinks: int = 2

    def tasks(self, component: str) -> list[int]:
        order = [("spout", self.spouts), ("count", self.count), ("tally", self.tally),
                 ("sink", self.sinks)]
        start = 0
        for name, n in order:
            if name == component:
                return list(range(start, start + n))
            start += n
        raise KeyError(component)

    def component_of(self) -> dict[int, str]:
        return {t: c for c in ("spout", "count", "tally", "sink") for t in self.tasks(c)}

    def worker_of(self, task: int) -> int:
        return task % WORKERS


def route(key: str, tasks: list[int]) -> int:
    """The task of ``tasks`` owning ``key``'s key group (a fields grouping)."""
    group = key_group(key, MAX_PARALLELISM)
    return tasks[task_index_for_key_group(MAX_PARALLELISM, len(tasks), group)]


@dataclass(frozen=True)
class Record:
    key: str
    seq: int
    count: int = 0
    streak: int = 0
    at: float = 0.0


@dataclass(frozen=True)
class BarrierItem:
    checkpoint_id: int


# -- tasks ----------------------------------------------------------------------------------------
class SimShellProcess:
    """A multilang spout's subprocess (``Fault.MULTILANG_SPOUT``) over a durable queue, its
    broker: it emits every record the broker holds no ack for, smallest index first (a
    failed one goes back in, so a key's records stay in order); an ack is recorded in the
    broker, which outlives the subprocess and the worker."""

    def __init__(self, broker: set[int], records: int) -> None:
        self.broker = broker
        self.todo = [i for i in range(records) if i not in broker]  # sorted: a heap
        self.out: set[int] = set()
        self.alive = True

    def next(self) -> int | None:
        if not self.todo:
            return None
        i = heapq.heappop(self.todo)
        self.out.add(i)
        return i

    def ack(self, i: int) -> None:
        self.broker.add(i)
        self.out.discard(i)

    def fail(self, i: int) -> None:
        if i in self.out:
            self.out.remove(i)
            heapq.heappush(self.todo, i)

    def done(self) -> bool:
        return not self.todo and not self.out


class SimTask:
    """One task incarnation on a worker (a generation's copy of it)."""

    def __init__(self, worker: SimWorker, task_id: int, component: str,
                 state: dict[str, Any] | None) -> None:
        self.worker = worker
        self.sim = worker.sim
        self.task_id = task_id
        self.component = component
        self.generation = worker.generation
        self.snapshots = TaskSnapshots(task_id)
        layout = worker.layout
        upstream = {"spout": [], "count": layout.tasks("spout"),
                    "tally": layout.tasks("spout"), "sink": layout.tasks("count")}[component]
        self.aligner = BarrierAligner(upstream, aligned=True)
        self.backlog: list[tuple[int, Any]] = []  # frames before Start (the inbox)
        state = state or {}
        self.states: dict[str, Any] = {  # a native RocksDB checkpoint's state: as it is
            n: v if isinstance(v, NativeState) else dict(v)
            for n, v in state.get("states", {}).items()}
        ttl_ms = self.sim.plan.ttl_ms
        if ttl_ms is not None and component == "count":
            # the TTL state (rocksdb_ttl: the counts too) on the real memory or RocksDB
            # store, on the simulated clock; a restored dict holds the Stamped entries
            # the snapshot stored
            self.states.update(self.sim.counter_stores.open_counter(self.states, ttl_ms))
        # with shared files: the chain the restored snapshot referenced, and what changed
        # since the last snapshot (state name -> keys)
        self.files: list[str] = list(state.get("files", []))
        # each file of the chain: (size, CRC-32) as snapshots record them, and its bytes
        # (the files in the task's database, where local copies are linked from)
        self.crcs: dict[str, tuple[int, int]] = dict(state.get("crc32", {}))
        self.file_bytes: dict[str, bytes] = dict(state.get("file_bytes", {}))
        self.dirty: dict[str, set[Any]] = {}
        self.carry: dict[str, Any] | None = None  # a capture whose upload failed
        self.uploads: list[Any] = []  # the Snapshotter's queue: the head is running
        self.offset = int(state.get("offset", 0))
        self.eos_sent = bool(state.get("eos_sent", False))
        self.pending_rows: dict[int, list[Row]] = {
            int(t): list(r) for t, r in state.get("pending_rows", {}).items()}
        self.open_rows: list[Row] = []
        self.txns = SinkTransactions(sorted(self.pending_rows))
        # the "staged" kind: the real TwoPhaseCommitSink base over the simulated system;
        # the "files" kind: the real FileSink over the simulated disk; the "log" kind: the
        # real KafkaSink over the simulated broker (its managed state among the task's)
        self.sink: SimStagedSink | SimFileSink | SimKafkaSink | None = None
        if component == "sink" and self.sim.output.kind == "log":
            self.sink = open_kafka_sink(self.sim.output, self.sim.world, self.sim.plan,
                                        self.sim.run, self.sim.earlier, self.states, task_id,
                                        layout.tasks("sink").index(task_id),
                                        worker.worker_id, self.generation)
        elif component == "sink" and self.sim.output.kind == "staged":
            self.sink = open_staged_sink(self.sim.output, self.sim.run, self.sim.earlier,
                                         task_id, layout.tasks("sink").index(task_id),
                                         worker.worker_id, self.generation)
        elif component == "sink" and self.sim.output.kind == "files":
            self.sink = open_file_sink(self.sim.output, self.sim.world, self.sim.plan,
                                       self.sim.run, task_id,
                                       layout.tasks("sink").index(task_id),
                                       worker.worker_id, self.generation)
        self.started = False
        self.paused = False
        self.rr = 0
        # Fault.MULTILANG_SPOUT: the host side of a ShellSpout (jstormpy/multilang/spout.py)
        self.multilang = component == "spout" and self.sim.plan.on(Fault.MULTILANG_SPOUT)
        self.ledger = AckLedger(retained=RETAINED)
        self.adopt: AdoptSteps | None = None
        self.proc: SimShellProcess | None = None
        if self.multilang:
            self.ledger.restore(state.get("ledger"))
            parked = worker.parked.pop(task_id, None)
            if parked is not None and parked[0].alive:  # kept across the rollback
                self.proc = parked[0]
                self.adopt = self.ledger.adopt(parked[1])
                self.sim.world.reach(Step.MULTILANG_ADOPTED)
                self.sim.world.note(f"spout task {task_id}: kept multilang subprocess "
                                    f"adopted, {len(self.adopt.fails)} fails owed")
            else:
                broker = self.sim.brokers.setdefault(task_id, set())
                self.proc = SimShellProcess(broker, len(self.sim.inputs[task_id]))

    @property
    def alive(self) -> bool:
        return not self.snapshots.stopped and self.worker.alive

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.alive and self.worker.alive and not self.snapshots.stopped:
            # ShellSpout.close: the subprocess waits for the next generation's task, with
            # every id it is owed an answer for (an adoption not yet told included)
            owed = [] if self.adopt is None else list(self.adopt.fails)
            self.worker.parked[self.task_id] = (proc, owed + self.ledger.in_flight())
        self.snapshots.stop()
        if "streak" in self.states:
            self.sim.counter_stores.stop(self.states["streak"])

    # -- spouts --------------------------------------------------------------------------------
    def spout_step(self) -> None:
        if not self.alive or not self.started or self.paused:
            return
        if self.multilang:
            self._shell_spout_step()
            return
        records = self.sim.inputs[self.task_id]
        if self.offset < len(records):
            key, seq = records[self.offset]
            self.offset += 1
            self._emit_record(key, seq)
        else:
            self._end_of_input()
            return
        self.sim.world.at(self.sim.world.latency(0.5, 3), self.spout_step, "")

    def _end_of_input(self) -> None:
        """The spout's input ended: the next barrier tells the TM "finished", and the
        worker reports it now (``Worker.spout_finished`` wakes its heartbeat: the TM may
        start the final checkpoint at once, beside one in flight)."""
        self.eos_sent = True
        self.worker.to_tm("spout_finished", self.generation, self.task_id)

    def _emit_record(self, key: str, seq: int) -> None:
        """A spout's record: to its key's counter task and, round robin, to a tally."""
        layout = self.worker.layout
        self.emit(route(key, layout.tasks("count")), Record(key, seq))
        tally = layout.tasks("tally")
        self.emit(tally[self.rr % len(tally)], Record(key, seq))
        self.rr += 1

    def _shell_spout_step(self) -> None:
        """One ``next`` of a multilang spout (Fault.MULTILANG_SPOUT)."""
        proc = self.proc
        assert proc is not None
        if not proc.alive:
            return
        if self.adopt is not None:  # what the old task owed the kept subprocess
            for i in self.adopt.fails:
                proc.fail(i)
            self.adopt = None
        if proc.out and self.sim.plan.hit(self.sim.world, Fault.MULTILANG_SPOUT):
            proc.alive = False  # lost with tuples in flight: the task fails
            self.sim.world.note(f"spout task {self.task_id}: multilang subprocess lost "
                                f"with {len(proc.out)} tuples in flight")
            self.stop()
            self.worker.to_tm("task_error", self.generation, self.task_id,
                              "MultilangError: the spout's subprocess exited")
            return
        i = proc.next()
        if i is None:
            if proc.done():
                self._end_of_input()  # every record acked: it exits 0, end of input
                return
        elif self.ledger.emitted(i):
            self._emit_record(*self.sim.inputs[self.task_id][i])
        else:  # the restored checkpoint holds it: dropped (the ledger acks it later)
            self.sim.world.reach(Step.MULTILANG_REEMIT_DROPPED)
            self.sim.world.note(f"spout task {self.task_id}: re-emitted id {i} dropped "
                                "(the restored checkpoint covers it)")
        self.sim.world.at(self.sim.world.latency(0.5, 3), self.spout_step, "")

    def trigger(self, checkpoint_id: int, pause: bool) -> None:
        if not self.alive or not self.started:
            self.paused = self.paused or pause  # the command waits for the task's start
            return
        barrier_steps.perform(barrier_steps.TaskBarrier(barrier_steps.TaskKind.SPOUT,
                                                        quiescent=pause),
                              _BarrierPort(self), checkpoint_id)

    # -- bolts and sinks -----------------------------------------------------------------------
    def deliver(self, src: int, item: Any) -> None:
        if not self.alive:
            return  # its thread failed: nothing reads its inbox
        # as the executor's loop: everything of a blocked channel is held, barriers too;
        # what an alignment releases goes back to the front of the queue, in order
        queue = deque([(src, item)])
        while queue:
            src, item = queue.popleft()
            if self.aligner.is_blocked(src):
                self.aligner.hold(src, (src, item))
                continue
            if not isinstance(item, BarrierItem):
                self.process(src, item)
                continue
            if not self.aligner.on_barrier(src, item.checkpoint_id,
                                           self.sim.world.now / 1000.0):
                continue
            port = _BarrierPort(self)
            kind = barrier_steps.TaskKind.SINK if self.component == "sink" else \
                barrier_steps.TaskKind.BOLT
            barrier_steps.perform(barrier_steps.TaskBarrier(kind), port, item.checkpoint_id)
            queue.extendleft(reversed(port.released))

    def process(self, src: int, item: Any) -> None:
        assert isinstance(item, Record)
        if self.component == "count":
            counts = self.states.setdefault("counts", {})
            counts[item.key] = counts.get(item.key, 0) + 1
            self.dirty.setdefault("counts", set()).add(item.key)
            streak, at = 0, 0.0
            if "streak" in self.states:  # state_ttl: records since the key's entry expired
                ttl_state = self.states["streak"]
                streak = ttl_state.get(item.key, 0) + 1
                ttl_state[item.key] = streak
                at = self.sim.world.now
                self.dirty.setdefault("streak", set()).add(item.key)
            self.emit(route(item.key, self.worker.layout.tasks("sink")),
                      Record(item.key, item.seq, counts[item.key], streak, at))
        elif self.component == "tally":
            tally = self.states.setdefault("tally", {})
            tally[item.key] = tally.get(item.key, 0) + 1
            self.dirty.setdefault("tally", set()).add(item.key)
        elif self.component == "sink":
            if self.txns.open is None:
                raise AssertionError(f"sink task {self.task_id} got a record with no open "
                                     "transaction")
            self.open_rows.append(Row(item.key, item.seq, item.count,
                                      self.sim.run.job_id, self.txns.open, self.task_id,
                                      item.streak, item.at))

    # -- the sink's steps (executor._perform_sink_step) ------------------------------------------
    def perform(self, steps: list[SinkStep], restoring: bool = False) -> bool:
        """The steps through the sink; False if the system was unavailable, or the task
        failed (a sink error outside a restore: the task's thread dies and the TM
        recovers; at a restore the error fails the worker's prepare)."""
        try:
            ok = self.txns.run(steps, self._perform_step)
            if not ok:
                self.sim.world.reach(Step.SINK_STEP_REFUSED)
            return ok
        except RestoreRefusedError as exc:  # the TM fails the topology at once
            self.sim.output.refused = str(exc)
            return False  # a named error state: the run ends there (scenario._drive)
        except SinkError as exc:
            if restoring:
                raise
            self.sim.world.note(f"sink task {self.task_id} failed: {exc}")
            self.stop()
            self.worker.to_tm("task_error", self.generation, self.task_id, str(exc))
            return False

    def _perform_step(self, step: SinkStep) -> None:
        out = self.sim.output
        match step:
            case Begin(txn):
                out.check_up()
                self.open_rows = []
            case PreCommit(txn):
                rows = [Row(r.key, r.seq, r.count, r.job, txn, r.task, r.streak, r.at)
                        for r in self.open_rows]
                assert self.sink is not None
                self.sink.stage_rows(txn, rows)
                self.pending_rows[txn] = rows
                self.open_rows = []
            case Commit(txn):
                self.sim.check_commit(txn)
                assert self.sink is not None
                self.sink.commit(txn)
                self.pending_rows.pop(txn, None)
            case Recover(restored):
                assert self.sink is not None
                self.sink.recover(restored)
            case ReportCommitted(cid):
                self.worker.to_tm("sink_committed", self.generation, cid, self.task_id)
            case FailCheckpoint(cid, reason):
                self.worker.to_tm("fail", self.generation, cid, self.task_id, reason)
            case RetryCommit(cid):
                self.sim.world.at(20, lambda: self.complete(cid), f"task {self.task_id}: "
                                  f"retry commit {cid}")

    def complete(self, checkpoint_id: int) -> None:
        if self.alive and self.component == "sink" and self.started:
            self.perform(self.txns.complete(checkpoint_id))
        if self.multilang and self.alive and self.proc is not None and self.proc.alive:
            for i in self.ledger.complete(checkpoint_id):  # ShellSpout.on_checkpoint_complete
                self.proc.ack(i)

    # -- snapshots (the executor's _BarrierPort capture / upload, _upload_snapshot) ----------
    def snapshot_extra(self, checkpoint_id: int) -> dict[str, Any]:
        """What the task's snapshot holds besides its states (at ``Capture``)."""
        if self.component == "sink":
            return {"pending_rows": {t: list(r) for t, r in self.pending_rows.items()}}
        if self.component != "spout":
            return {}
        if self.multilang:
            self.ledger.barrier(checkpoint_id)
            return {"ledger": self.ledger.snapshot(), "eos_sent": self.eos_sent}
        return {"offset": self.offset, "eos_sent": self.eos_sent}

    def capture(self, checkpoint_id: int, extra: dict[str, Any]) -> tuple[Any, bool]:
        """Capture at the barrier (task thread): the upload job and whether the
        ``Snapshotter`` thread takes it a moment later (a frozen RocksDB database)."""
        ticket = self.snapshots.barrier(checkpoint_id, self.generation)
        capture: dict[str, Any] | None = None
        # rocksdb_ttl: the database frozen now, read when the upload runs
        frozen = self.sim.counter_stores.snapshot(self.states)
        if self.sim.plan.shared_files and self.component in ("count", "tally"):
            base = not self.files or len(self.files) >= BASE_EVERY
            stored = {n: stored_entries(v) for n, v in self.states.items()
                      if frozen is None or n not in frozen.names}
            if frozen is not None and not frozen.native:  # a delta's entries are chosen
                stored.update(frozen.read(self.task_id, checkpoint_id,  # at the barrier
                                          ticket.generation))
                frozen = None
            capture = {"kind": "base" if base else "delta", "states": {
                n: (entries if base else
                    {k: entries[k] for k in self.dirty.get(n, ()) if k in entries})
                for n, entries in stored.items()}}
            self.dirty = {}
            data: dict[str, Any] = dict(extra)
        else:
            data = {"states": {n: stored_entries(v) for n, v in self.states.items()
                               if frozen is None or n not in frozen.names}, **extra}
        finished = self.component == "spout" and self.eos_sent
        key = (checkpoint_id, self.task_id, ticket.generation)
        worker_alive = self.worker.alive_check()

        def upload() -> None:
            if frozen is not None:  # applied and checkpointed at the barrier (stores.py)
                data.setdefault("states", {}).update(
                    frozen.read(self.task_id, checkpoint_id, ticket.generation))
            new_files: dict[str, Any] = {}
            files = self.files
            if capture is not None:  # IncrementalKeyedState.write: carry, segment, chain
                cap = capture if self.carry is None else _merge_capture(self.carry, capture)
                self.carry = None
                name = (f"inc/task-{self.task_id:05d}/seg-{checkpoint_id:010d}"
                        f"-g{ticket.generation}.{cap['kind']}")
                new_files = {name: cap}
                files = [name] if cap["kind"] == "base" else [*self.files, name]
                data["files"] = files
                blob = pickle.dumps(cap)
                crcs = {**self.crcs, name: (len(blob), zlib.crc32(blob))}
                data["crc32"] = {f: crcs[f] for f in files if f in crcs}

            def uploaded(handle: Any, error: BaseException | None) -> None:
                if capture is not None:
                    name = next(iter(new_files))
                    if error is None or self.sim.storage.stored(name):
                        self.files = files  # the segment was written: the chain has it
                        self.crcs = {f: crcs[f] for f in files if f in crcs}
                        self.file_bytes = {f: self.file_bytes[f] if f != name else blob
                                           for f in files if f in self.file_bytes
                                           or f == name}
                        if error is None and self.sim.plan.on(Fault.LOCAL_RECOVERY):
                            self.worker.keep_local(self.task_id, files, self.file_bytes)
                    else:
                        self.carry = new_files[name]  # merged into the next one
                if error is not None:
                    reports = self.snapshots.failed(ticket, str(error))
                else:
                    reports = self.snapshots.uploaded(ticket, handle, 1)
                self._report(reports, finished)
                self._next_upload()
            self.sim.storage.put_snapshot(key, data, worker_alive, uploaded, new_files)
        return upload, frozen is not None

    def upload(self, checkpoint_id: int, job: Any, later: bool) -> None:
        """Upload after the task's earlier snapshots (its ``Snapshotter`` thread runs one
        job at a time, in order)."""
        self.uploads.append(job)
        if len(self.uploads) == 1:
            if later:  # rocksdb_ttl: the Snapshotter thread takes the job a moment later,
                # and the task goes on writing to its database meanwhile
                self.sim.world.at(self.sim.world.latency(0.2, 4), job,
                                  f"task {self.task_id}: snapshot {checkpoint_id} read")
            else:
                job()

    def _report(self, reports: list[Any], finished: bool) -> None:
        """Send the TM what the task's snapshots report (none once the task stopped)."""
        for r in reports:
            match r:
                case AckSnapshot(t, h, _):
                    self.worker.to_tm("ack", t.generation, t.checkpoint_id, self.task_id, h,
                                      finished)
                case DeclineSnapshot(t, why):
                    self.worker.to_tm("fail", t.generation, t.checkpoint_id, self.task_id,
                                      why)

    def _next_upload(self) -> None:
        self.uploads.pop(0)
        if self.uploads:
            self.uploads[0]()

    # -- channels -----------------------------------------------------------------------------
    def downstream(self) -> list[int]:
        layout = self.worker.layout
        return {"spout": layout.tasks("count") + layout.tasks("tally"),
                "count": layout.tasks("sink"), "tally": [], "sink": []}[self.component]

    def emit(self, dst: int, item: Any) -> None:
        self.sim.network.send(self.task_id, dst, self.generation, item)


class _BarrierPort:
    """How a simulated task performs its barrier steps (:class:`~jstormpy.barrier.
    task_barrier.BarrierPort`), in the order the executor does. One per barrier."""

    def __init__(self, task: SimTask) -> None:
        self.task = task
        self.job: tuple[Any, bool] | None = None
        self.released: list[Any] = []

    def pause_ticks(self, barrier: int) -> None:
        pass  # the simulated bolts have no ticks

    def flush(self, barrier: int) -> None:
        pass  # a simulated task's emits are sent at once

    def stage(self, barrier: int) -> bool:
        task = self.task
        return task.perform(task.txns.barrier(barrier))

    def capture(self, barrier: int, state: bool) -> None:
        task = self.task
        self.job = task.capture(barrier, task.snapshot_extra(barrier))

    def broadcast(self, barrier: int) -> None:
        task = self.task
        for dst in task.downstream():
            task.emit(dst, BarrierItem(barrier))

    def upload(self, barrier: int, state: bool) -> None:
        assert self.job is not None  # captured first (barrier/task_barrier.py)
        self.task.upload(barrier, *self.job)

    def begin_next(self, barrier: int) -> None:
        task = self.task
        task.perform(task.txns.snapshot_taken(barrier))

    def release(self, barrier: int) -> None:
        self.released = self.task.aligner.release()

    def pause(self, barrier: int) -> None:
        self.task.paused = True


def stored_entries(state: Any) -> dict[Any, Any]:
    """What a snapshot stores of a state: a copy of its entries as the executor pickles
    them (a TTL state: its live ``Stamped`` entries, after a sweep)."""
    return dict(state) if type(state) is dict else copy.copy(state)


class _SimPreparePort:
    """A Prepare's steps (``runtime/prepare_steps.py``) on a simulated worker: snapshot
    reads go to the simulated storage (shared files chain, local copies) and answer later,
    or never if the worker died meanwhile."""

    def __init__(self, worker: SimWorker, restored: int, base: int, layout: Layout) -> None:
        self.worker = worker
        self.sim = worker.sim
        self.restored = restored
        self.base = base
        self.layout = layout
        self.alive = worker.alive_check()
        self.tasks: dict[int, SimTask] = {}

    @property
    def generation(self) -> int:
        return self.worker.generation

    def stop_tasks(self, generation: int) -> None:
        for t in self.worker.tasks.values():
            t.stop()  # snapshots still uploading report nothing
        self.worker.tasks = {}

    def take_generation(self, generation: int) -> None:
        w = self.worker
        w.generation = generation
        w.layout = self.layout
        w.base = self.base
        if self.sim.plan.on(Fault.LOCAL_RECOVERY):
            w.drop_local_others([t for t in sorted(self.layout.component_of())
                                 if self.layout.worker_of(t) == w.worker_id])

    def read_snapshot(self, task_id: int, handle: str,
                      then: Callable[[Any, BaseException | None], None]) -> None:
        w, sim = self.worker, self.sim

        def done(data: Any, error: BaseException | None) -> None:
            if error is not None or not data or not data.get("files"):
                then(data, error)
                return

            # its keyed state is in shared files: read them before the task is built; the
            # task goes on with the same chain
            chain = list(data["files"])
            local = (w.restore_local(chain, data.get("crc32", {}))
                     if sim.plan.on(Fault.LOCAL_RECOVERY) else {})
            rest = [f for f in chain if f not in local]

            def files_read(files: Any, err: BaseException | None) -> None:
                if err is not None:
                    then(None, err)
                    return
                got = {**dict(zip(rest, files, strict=True)), **local}
                sim.world.reach(Step.SHARED_CHAIN_RESTORED)
                if sim.plan.on(Fault.LOCAL_RECOVERY):
                    w.local_previous[task_id] = set(chain)  # LocalCopies.seed
                then({**data, "states": {**(data.get("states") or {}),  # native RocksDB
                                         **merge_files([got[f] for f in chain])},
                      "file_bytes": {f: pickle.dumps(got[f]) for f in chain}}, None)
            if rest:
                sim.storage.read_shared(rest, self.alive, files_read)
            else:
                files_read([], None)
        sim.storage.read_snapshot(handle, self.alive, done)

    def current(self, generation: int) -> bool:
        return generation == self.worker.generation and self.alive()

    def begin_build(self, tasks: Sequence[int]) -> None:
        pass  # the simulated data plane needs no wiring

    def build_task(self, task_id: int, snapshot: Any) -> None:
        self.tasks[task_id] = SimTask(self.worker, task_id,
                                      self.layout.component_of()[task_id], snapshot)

    def built(self, tasks: Sequence[int]) -> None:
        self.worker.tasks = self.tasks

    def sinks(self) -> Sequence[int]:
        return [t for t, task in self.tasks.items() if task.component == "sink"]

    def restore_sink(self, task_id: int) -> None:
        t = self.tasks[task_id]
        if not t.perform(t.txns.restore(self.restored if self.sim.stateful else None,
                                        self.base), restoring=True):
            raise SinkError("external system unavailable at restore")

    def answerable(self, error: Exception) -> bool:
        return isinstance(error, (SinkError, AssertionError))

    def ready(self, ready: PrepareReady) -> None:
        self.worker.to_tm("ready", ready.generation, ready.ok, ready.corrupt, ready.error)


# -- workers --------------------------------------------------------------------------------------
class SimWorker:
    """A worker process: its tasks of the current generation and its TM session."""

    def __init__(self, sim: Simulation, worker_id: int) -> None:
        self.sim = sim
        self.worker_id = worker_id
        self.alive = True
        self.incarnation = 0
        self.generation = 0
        self.layout = sim.layout
        self.tasks: dict[int, SimTask] = {}
        self.base = 0
        self.session = 0  # the control stream (a broken one is replaced)
        # local recovery: copies of the tasks' shared files on this host's disk (they
        # outlive a crash), and per task the files of the upload before the last
        self.local: dict[str, bytes] = {}
        self.local_previous: dict[int, set[str]] = {}
        # multilang spouts' subprocesses kept across a rollback (task id -> it and the ids
        # its old task had not acked); they die with the process
        self.parked: dict[int, tuple[SimShellProcess, list[int]]] = {}

    # -- local recovery (state_backends/rocksdb_files.py LocalCopies) ----------------------------
    def keep_local(self, task_id: int, files: list[str], file_bytes: dict[str, bytes]) -> None:
        """After an upload: copies of its files and of the upload before; the task's others
        are deleted (``LocalCopies.keep``)."""
        current = set(files)
        for f in files:
            if f in file_bytes:
                self.local.setdefault(f, file_bytes[f])
        wanted = current | self.local_previous.get(task_id, set())
        prefix = f"inc/task-{task_id:05d}/"
        for f in [f for f in self.local if f.startswith(prefix) and f not in wanted]:
            del self.local[f]
        self.local_previous[task_id] = current

    def drop_local_others(self, task_ids: list[int]) -> None:
        """The copies of tasks this worker no longer runs (``LocalCopies.drop_others``)."""
        mine = tuple(f"inc/task-{t:05d}/" for t in task_ids)
        for f in [f for f in self.local if not f.startswith(mine)]:
            del self.local[f]

    def damage_local(self, files: list[str]) -> None:
        """The ``local_recovery`` fault: one local copy of ``files`` is garbled, truncated,
        deleted, or replaced by another file (another generation's, under its name)."""
        held = [f for f in files if self.local.get(f)]  # a copy truncated to nothing: left
        if not held:
            return
        rng = self.sim.world.rng
        victim = rng.choice(held)
        data = self.local[victim]
        how = rng.choice(("garbled", "truncated", "deleted", "replaced"))
        if how == "garbled":
            i = rng.randrange(len(data))
            self.local[victim] = data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1:]
        elif how == "truncated":
            self.local[victim] = data[:rng.randrange(len(data))]
        elif how == "deleted":
            del self.local[victim]
        else:
            others = sorted(f for f in self.local if self.local[f] != data)
            self.local[victim] = (self.local[rng.choice(others)] if others else
                                  pickle.dumps({"kind": "base", "states": {}}))
        self.sim.world.note(f"worker {self.worker_id}: local copy of {victim} {how}")

    def restore_local(self, files: list[str], crcs: dict[str, Any]) -> dict[str, Any]:
        """The files of a restored chain taken from intact local copies (the real
        ``local_copy_matches``); the others are downloaded."""
        if self.sim.plan.hit(self.sim.world, Fault.LOCAL_RECOVERY):
            self.damage_local(files)
        taken: dict[str, Any] = {}
        for f in files:
            size, crc = crcs.get(f, (0, None))
            copy_ = self.local.get(f)
            if local_copy_matches(copy_, size, crc):
                assert copy_ is not None
                taken[f] = pickle.loads(copy_)
        if taken:
            self.sim.world.reach(Step.LOCAL_COPIES_TAKEN)
        return taken

    def alive_check(self) -> Any:
        incarnation = self.incarnation
        return lambda: self.alive and self.incarnation == incarnation

    def to_tm(self, kind: str, *args: Any) -> None:
        self.sim.control.to_tm(self, kind, *args)

    def register(self) -> None:
        self.session += 1  # a new control stream
        self.to_tm("register", self.generation)

    def crash(self) -> None:
        self.alive = False
        for t in self.tasks.values():
            t.stop()
        self.tasks = {}
        for proc, _ in self.parked.values():
            proc.alive = False
        self.parked = {}
        self.sim.world.note(f"worker {self.worker_id} crashed")

    def restart(self) -> None:
        self.alive = True
        self.incarnation += 1
        self.generation = 0
        self.register()

    # -- TM commands (runtime/worker.py) --------------------------------------------------------
    def on_shutdown(self, generation: int) -> None:
        """Shutdown(exit_code=75) of a gray release: the process exits after the commands
        before it on its control stream; its launcher restarts it on the new code."""
        self.crash()
        self.sim.world.at(self.sim.world.latency(5, 40), self.restart,
                          f"worker {self.worker_id} restarts (gray release)")

    def on_prepare(self, generation: int, handles: dict[int, str], restored: int, base: int,
                   layout: Layout) -> None:
        """Prepare: production's order (``runtime/prepare_steps.py``), on simulated storage."""
        mine = tuple(t for t in sorted(layout.component_of())
                     if layout.worker_of(t) == self.worker_id)
        prepare_steps.perform(PrepareOrder(generation, mine, handles),
                              _SimPreparePort(self, restored, base, layout))

    def on_start(self, generation: int) -> None:
        if generation != self.generation:
            return
        for t in self.tasks.values():
            if t.started:
                continue  # start_tasks starts each task once
            t.started = True
            if t.component == "sink":
                try:
                    t.perform(t.txns.start(self.base + 1))
                except SinkError as exc:  # the task's thread dies: the TM recovers
                    t.stop()
                    self.to_tm("task_error", self.generation, t.task_id, str(exc))
                    continue
            backlog, t.backlog = t.backlog, []
            for src, item in backlog:
                t.deliver(src, item)
            if t.component == "spout":
                self.sim.world.at(self.sim.world.latency(0.5, 3), t.spout_step, "")

    def on_trigger(self, generation: int, checkpoint_id: int, pause: bool) -> None:
        if generation != self.generation:
            return
        for t in self.tasks.values():
            if t.component == "spout":
                t.trigger(checkpoint_id, pause)

    def on_complete(self, generation: int, checkpoint_id: int) -> None:
        if generation != self.generation:
            return
        for t in self.tasks.values():
            t.complete(checkpoint_id)

    def on_abort(self, generation: int, checkpoint_id: int) -> None:
        if generation != self.generation:
            return
        for t in self.tasks.values():
            if t.component == "sink":
                t.perform(t.txns.abort(checkpoint_id))

    def on_resume(self, generation: int) -> None:
        if generation != self.generation:
            return
        for t in self.tasks.values():
            if t.component == "spout" and t.paused:
                t.paused = False
                self.sim.world.at(1, t.spout_step, "")


# -- the network ----------------------------------------------------------------------------------
class Stream:
    """A FIFO connection: items arrive in order, each after a random delay."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.queue: deque[tuple[Any, str]] = deque()
        self.busy = False

    def put(self, fn: Any, label: str) -> None:
        self.queue.append((fn, label))
        if not self.busy:
            self.busy = True
            self.sim.world.at(self.sim.delay(), self._pump, "")

    def _pump(self) -> None:
        fn, label = self.queue.popleft()
        if label:
            self.sim.world.note(label)
        fn()
        if self.queue:
            self.sim.world.at(self.sim.delay(), self._pump, "")
        else:
            self.busy = False


class Network:
    """FIFO data channels between tasks (TCP between workers), tagged with the sender's
    generation; the receiving worker drops frames of another generation, in the same step
    as it looks the task up (hole 8)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.channels: dict[tuple[int, int], Stream] = {}

    def send(self, src: int, dst: int, generation: int, item: Any) -> None:
        ch = self.channels.get((src, dst))
        if ch is None:
            ch = self.channels[(src, dst)] = Stream(self.sim)
        ch.put(lambda: self._deliver(src, dst, generation, item), "")

    def _deliver(self, src: int, dst: int, generation: int, item: Any) -> None:
        worker = self.sim.workers[self.sim.layout_now().worker_of(dst)]
        task = worker.tasks.get(dst) if worker.alive else None
        if task is None or generation != worker.generation:
            return
        if task.started:
            task.deliver(src, item)
        else:
            task.backlog.append((src, item))


class Control:
    """The gRPC streams between the TM and each worker: in order per stream; a lost
    message breaks its stream (the TM sees the worker lost, the worker registers again);
    a retried call may arrive twice."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.streams: dict[tuple[str, int, int, int], Stream] = {}

    def _stream(self, direction: str, worker: SimWorker) -> Stream:
        key = (direction, self.sim.tm.incarnation, worker.worker_id, worker.session)
        st = self.streams.get(key)
        if st is None:
            st = self.streams[key] = Stream(self.sim)
        return st

    def _lost(self, worker: SimWorker, what: str) -> bool:
        sim = self.sim
        if not sim.plan.hit(sim.world, Fault.MESSAGE_LOSS):
            return False
        sim.world.note(f"lost {what}; the stream of worker {worker.worker_id} breaks")
        worker.session += 1
        tm = sim.tm
        sim.world.at(HEARTBEAT_TIMEOUT / 5, lambda: tm.worker_lost(worker.worker_id,
                                                                   "stream broke"),
                     f"TM: stream of worker {worker.worker_id} broke")
        return True

    def to_worker(self, worker: SimWorker, kind: str, *args: Any) -> None:
        sim = self.sim
        session, incarnation, tm = worker.session, worker.incarnation, sim.tm
        if self._lost(worker, f"TM->worker {worker.worker_id} {kind}"):
            return
        copies = 2 if kind in RETRIED and sim.plan.hit(sim.world,
                                                       Fault.MESSAGE_DUPLICATE) else 1

        def deliver() -> None:
            if worker.alive and worker.incarnation == incarnation and \
                    worker.session == session and tm.alive:
                getattr(worker, f"on_{kind}")(*args)
        for _ in range(copies):
            self._stream("down", worker).put(deliver,
                                             f"TM->worker {worker.worker_id}: {kind}{args}")

    def to_tm(self, worker: SimWorker, kind: str, *args: Any) -> None:
        sim = self.sim
        session, incarnation, tm = worker.session, worker.incarnation, sim.tm
        if kind != "register" and self._lost(worker, f"worker {worker.worker_id}->TM {kind}"):
            return
        copies = 2 if kind != "register" and sim.plan.hit(
            sim.world, Fault.MESSAGE_DUPLICATE) else 1

        def deliver() -> None:
            if tm.alive and worker.incarnation == incarnation and worker.session == session:
                getattr(tm, f"on_{kind}")(worker.worker_id, *args)
        for _ in range(copies):
            self._stream("up", worker).put(deliver,
                                           f"worker {worker.worker_id}->TM: {kind}{args}")


# -- the Topology Master --------------------------------------------------------------------------
class _CommitPort:
    """How the simulated TM performs the commit path's steps
    (:class:`~jstormpy.master.commit_point.CommitPort`), as ``MasterCore``'s port does,
    on the simulated storage: each answers when its storage call completes, and not at
    all once the TM died."""

    def __init__(self, tm: SimMaster) -> None:
        self.tm, self.sim = tm, tm.sim

    def check_fence(self, checkpoint_id: int, moment: FenceMoment,
                    then: Callable[[bool], None]) -> None:
        then(not self.tm.alive)  # deposed: it stopped at once

    def create_commit_point(self, checkpoint_id: int, metadata: Mapping[str, Any],
                            then: Callable[[BackendError | None], None]) -> None:
        tm, sim = self.tm, self.sim
        if tm.state == TopologyState.RUNNING and sim.plan.hit(sim.world, Fault.LEADER_DEPOSED):
            # its lease was valid when it began the write; the write is slow, the lease
            # runs out meanwhile: the launcher kills the TM, a standby takes over
            sim.storage.put_metadata(checkpoint_id, dict(metadata), tm.alive_check(),
                                     lambda *_: None, late=sim.world.latency(1, 400))
            sim.depose_tm()
            return

        def written(_: Any, error: BaseException | None) -> None:
            if error is None:
                sim.on_completed(checkpoint_id)
            then(_backend_error(error))
        sim.storage.put_metadata(checkpoint_id, dict(metadata), tm.alive_check(), written)

    def store_floor(self, checkpoint_id: int,
                    then: Callable[[BackendError | None], None]) -> None:
        tm = self.tm
        if checkpoint_id <= tm.persisted_floor:  # as MasterCheckpoints.persist_completed_floor
            then(None)
            return

        def floor_written(_: Any, error: BaseException | None) -> None:
            if error is None:
                tm.persisted_floor = max(tm.persisted_floor, checkpoint_id)
            then(_backend_error(error))
        self.sim.storage.put_meta(COMPLETED_META, checkpoint_id, tm.alive_check(),
                                  floor_written)


def _backend_error(error: BaseException | None) -> BackendError | None:
    if error is None or isinstance(error, BackendError):
        return error
    return BackendError(str(error))


class _MasterPort:
    """How the simulated TM performs the coordinator's actions
    (:class:`~jstormpy.master.coordinator_driver.CoordinatorPort`), as ``MasterCore``'s
    port does, on the simulated control streams and storage."""

    def __init__(self, tm: SimMaster) -> None:
        self.tm, self.sim = tm, tm.sim

    def stopped(self) -> bool:
        return not self.tm.alive  # deposed while writing a commit point: it stops at once

    def send_trigger(self, action: SendTrigger) -> None:
        for w in self.sim.workers:
            self.sim.control.to_worker(w, "trigger", action.generation, action.checkpoint_id,
                                       action.pause)

    def write_commit_point(self, action: WriteCommitPoint) -> None:
        self.tm.write_commit_point(action.checkpoint_id, dict(action.metadata))

    def send_complete(self, action: SendComplete) -> None:
        sim = self.sim
        for w in sim.workers:
            sim.control.to_worker(w, "complete", action.generation, action.checkpoint_id)
        sim.rescale_after_complete(self.tm, action.checkpoint_id,  # a Shutdown after it
                                   action.generation)
        self._cut_may_follow()

    def send_abort(self, action: SendAbort) -> None:
        sim = self.sim
        for w in sim.workers:
            sim.control.to_worker(w, "abort", action.generation, action.checkpoint_id)
        sim.rescale_aborted(self.tm, action.checkpoint_id, action.generation, action.reason)
        self._cut_may_follow()

    def _cut_may_follow(self) -> None:
        """A checkpoint ended: a holding operation's cut may follow at once."""
        if self.sim.rescale_state == "pausing":
            self.sim.world.at(1, self.tm.drive_cut, "")

    def collect_garbage(self, action: CollectGarbage) -> None:
        # the real StateBackend.garbage_collect(keep, bad, upto) on the simulated disk, a
        # TM call, through the driver MasterCheckpoints.garbage_collect uses too
        if self.tm.coordinator.busy():
            self.sim.world.reach(Step.RETENTION_IN_FLIGHT)
        perform_retention(self.tm.coordinator, RETAINED, self)

    def locked(self) -> AbstractContextManager[Any]:
        return nullcontext()  # one simulated thread

    def garbage_collect(self, keep: int, bad: Collection[int], upto: int,
                        then: Callable[[Sequence[int] | None, BaseException | None],
                                       None]) -> None:
        self.sim.storage.collect_garbage(keep, frozenset(bad), upto, self.tm.alive_check(),
                                         then)

    def trigger_final(self, action: TriggerFinal) -> None:
        self.tm.maybe_final_checkpoint()

    def drained(self, action: Drained) -> None:
        self.tm.state = TopologyState.DRAINED
        self.sim.drained_at = action.checkpoint_id
        self.sim.world.note(f"TM: drained at checkpoint {action.checkpoint_id}")

    def start_recovery(self, action: StartRecovery) -> None:
        self.tm.begin_recovery(action.reason)


class _GenerationPort:
    """How the simulated TM starts a generation
    (:class:`~jstormpy.master.generation_steps.GenerationPort`), as ``MasterCore``'s port
    does."""

    def __init__(self, tm: SimMaster) -> None:
        self.tm = tm

    @property
    def generation(self) -> int:
        return self.tm.generation

    def operations_hear(self, reason: str) -> None:
        sim = self.tm.sim
        if sim.rescale_state != "committing":  # RescaleController.on_new_generation
            sim.rescale_state = ""  # the new generation's spouts are not paused

    def count_restart(self, reason: str) -> str | None:
        return None  # no restart strategy: every restart is allowed

    def fail(self, reason: str) -> None:
        raise AssertionError(f"the simulated TM never refuses a restart: {reason}")

    def recovering(self, generation: int, target: int | None, reason: str) -> None:
        tm = self.tm
        tm.generation = generation
        ahead = tm.recovery
        if not (tm.state == TopologyState.STARTING and ahead is not None
                and ahead.generation == generation and ahead.target == target):
            # as MasterCore: the restore resolved ahead (SimMaster.resolve_ahead) goes on
            # as this generation's, when it is the one that begins
            tm.recovery = Recovery(generation, target)
        tm.state = TopologyState.RECOVERING
        tm.sim.world.note(f"TM: generation {generation}: {reason}")

    def maybe_prepare(self) -> None:
        self.tm.maybe_prepare()


class _IdsRecordPort:
    """How the simulated TM stores its ids record
    (:class:`~jstormpy.master.ids_record_steps.IdsRecordPort`), as ``MasterCore``'s port
    does, on the simulated storage."""

    def __init__(self, tm: SimMaster) -> None:
        self.tm = tm

    def locked(self) -> AbstractContextManager[Any]:
        return nullcontext()  # one simulated thread

    def on_storage(self, step: Callable[[], None]) -> None:
        step()  # the simulated storage calls are events of their own

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        self.tm.sim.storage.put_meta(CHECKPOINT_IDS_META, ids, self.tm.alive_check(),
                                     lambda _, error: then(error))

    def not_stored(self, why: str, error: BaseException) -> None:
        self.tm.sim.world.note(f"TM: ids record not stored ({why}): {str(error)[:60]}")


class _RecoveryPort:
    """How the simulated TM performs a recovery's restore
    (:class:`~jstormpy.master.recovery_steps.RecoveryPort`), as ``MasterCore``'s port
    does, on the simulated storage and control streams: each storage call answers when it
    completes, and not at all once the TM died."""

    def __init__(self, tm: SimMaster, rec: Recovery) -> None:
        self.tm, self.sim, self.rec = tm, tm.sim, rec

    def locked(self) -> AbstractContextManager[Any]:
        return nullcontext()  # one simulated thread

    def current(self) -> bool:
        return self.tm.alive and self.rec is self.tm.recovery

    def may_prepare(self) -> bool:
        tm = self.tm
        return tm.state == TopologyState.RECOVERING and len(tm.registered) >= WORKERS

    def put_generation(self, generation: int,
                       then: Callable[[BaseException | None], None]) -> None:
        self._put("generation", generation, then)

    def put_ids_record(self, ids: bytes, then: Callable[[BaseException | None], None]) -> None:
        self._put(CHECKPOINT_IDS_META, ids, then)

    def put_floor(self, checkpoint_id: int,
                  then: Callable[[BaseException | None], None]) -> None:
        self._put(COMPLETED_META, checkpoint_id, then)

    def _put(self, name: str, value: int | bytes,
             then: Callable[[BaseException | None], None]) -> None:
        self.sim.storage.put_meta(name, value, self.tm.alive_check(),
                                  lambda _, error: then(error))

    def list_checkpoints(self,
                         then: Callable[[Listing | None, BaseException | None], None]) -> None:
        def listed(ids: Any, error: BaseException | None) -> None:
            then(None if error is not None else Listing(*ids), error)
        self.sim.storage.list_completed(self.tm.alive_check(), listed)

    def read_metadata(self, checkpoint_id: int,
                      then: Callable[[Mapping[str, Any] | None, BaseException | None],
                                     None]) -> None:
        self.sim.storage.read_metadata(checkpoint_id, self.tm.alive_check(), then)

    def generation_stored(self, generation: int) -> None:
        tm = self.tm
        tm.persisted_generation = max(tm.persisted_generation, generation)

    def floor_stored(self, checkpoint_id: int) -> None:
        tm = self.tm
        tm.persisted_floor = max(tm.persisted_floor, checkpoint_id)

    def retry_later(self, reason: str) -> None:
        tm = self.tm
        tm.sim.world.note(f"TM: recovery waits: {reason[:80]}")
        self.rec.plan = None
        tm.sim.world.at(RETRY_PREPARE, tm.maybe_prepare, "TM: retry prepare")

    def refuse(self, reason: str) -> None:
        tm = self.tm
        tm.state = TopologyState.FAILED
        tm.failure = reason
        tm.sim.world.note(f"TM: failed: {reason[:80]}")

    def recover_again(self, checkpoint_id: int, why: str) -> None:
        self.tm.begin_recovery(f"checkpoint {checkpoint_id} unusable")

    def hold(self) -> None:
        self.sim.world.note(f"TM: restore of generation {self.rec.generation} held: a worker "
                            "is to register")
        self.rec.plan = None
        self.rec.held = True

    def prepare(self, prepare: Prepare) -> None:
        tm, sim, rec = self.tm, self.sim, self.rec
        if prepare.target is not None:
            sim.world.reach(Step.RESTORE)
        rec.restored, rec.base = prepare.restored, prepare.base
        rec.target = prepare.target
        rec.resolved = True
        sim.on_prepares(rec.generation, tm)
        sim.on_restore(rec.restored)
        for w in sim.workers:
            sim.control.to_worker(w, "prepare", rec.generation, dict(prepare.handles),
                                  rec.restored, rec.base, tm.layout)


@dataclass
class Recovery:
    generation: int
    target: int | None
    plan: RestorePlan | None = None
    resolved: bool = False  # its Prepares went out (MasterCore.prepared_generation)
    held: bool = False  # resolved before every worker registered (MasterRecovery.held)
    restored: int = 0
    base: int = 0
    ready: set[int] = field(default_factory=set)


class SimMaster:
    """The TM process: the real coordinator and restore plan, performed like
    ``MasterCore`` performs them."""

    def __init__(self, sim: Simulation, resume: bool) -> None:
        self.sim = sim
        self.alive = True
        sim.tm_incarnations += 1
        self.incarnation = sim.tm_incarnations
        self.resume = resume
        self.state = TopologyState.STARTING
        self.booted = False  # read meta/ (boot): a registration may begin the first generation
        self.failure = ""
        self.generation = 0
        self.persisted_generation = 0
        self.persisted_floor = 0  # meta "completed_floor" as last written
        self.registered: set[int] = set()
        self.recovery: Recovery | None = None
        self.layout = sim.layout
        self.coordinator = CheckpointCoordinator(stateful=True, max_concurrent=2,
                                                 timeout_s=0.2, tolerable_timeouts=2)
        # spout task -> the generation whose worker reported it finished
        self.finished_spouts: dict[int, int] = {}
        self.coordinator.set_layout(self.layout.component_of(), self.layout.tasks("spout"),
                                    self.layout.tasks("sink"))
        self.ids_stores = IdsRecordStores(self.coordinator, _IdsRecordPort(self))
        self.rescale_done = False
        self.upgrade_done = False
        self.epoch = 0  # the run's TM epoch (take_over_run at boot)
        self.deposed = False

    def boot(self) -> None:
        """Read what a predecessor stored (a restarted TM resumes above it)."""
        if not self.alive:
            return
        if self.resume:
            if self.sim.plan.hit(self.sim.world, Fault.READ_ERROR):
                self.sim.world.at(RETRY_PREPARE, self.boot, "TM: retry reading meta/")
                return
            self.generation = self.sim.storage.meta_int_now("generation")
            self.persisted_generation = self.generation
            self.coordinator.adopt_completed_floor(self.sim.storage.meta_int_now(COMPLETED_META))
            self.persisted_floor = self.coordinator.completed_floor
            ids = self.sim.storage.meta_now(CHECKPOINT_IDS_META)
            if ids:
                self.coordinator.adopt_ids_record(ids)
        if self.sim.layout_checkpoint:  # RescaleController.attach_run_dir: rescale.json
            self.coordinator.adopt_layout(self.sim.layout_checkpoint)
        if self.resume and self.incarnation > 1:
            self.sim.world.reach(Step.TM_RESUMED)
        # as take_over_run, before serving: a resume is the run's next epoch
        self.epoch = self.sim.storage.meta_int_now("epoch") + 1 if self.resume else 1
        self.sim.storage.set_meta_now("epoch", self.epoch)
        self.booted = True
        self.resolve_ahead()
        for w in self.sim.workers:
            if w.alive:
                w.register()
        self.sim.world.at(CHECKPOINT_INTERVAL, self.tick, "")

    def now(self) -> float:
        return self.sim.world.now / 1000.0

    # -- membership --------------------------------------------------------------------------
    def on_register(self, worker_id: int, reported_generation: int) -> None:
        self.registered.add(worker_id)
        self.generation = max(self.generation, reported_generation)
        if self.state == TopologyState.RUNNING and self.sim.upgrading(worker_id):
            self.sim.upgrade_prepare(self, worker_id)  # UpgradeController.on_register
        elif self.state == TopologyState.RUNNING:
            self.begin_recovery(f"worker {worker_id} re-registered")
        elif self.state == TopologyState.STARTING and self.booted:
            # as MasterCore: the first generation begins at the first registration (the
            # Prepares wait for every worker), above what that worker reports
            target = LATEST if self.resume else None
            self.begin_recovery("start", target)
        elif self.state == TopologyState.RECOVERING and self.recovery is not None and \
                self.recovery.resolved:
            # its Prepare went out on the old stream: a new generation (MasterCore.register)
            self.begin_recovery(f"worker {worker_id} re-registered")
        elif self.state == TopologyState.RECOVERING:
            self.maybe_prepare()

    def worker_lost(self, worker_id: int, reason: str) -> None:
        if not self.alive or self.state in (TopologyState.DRAINED, TopologyState.FAILED):
            return
        self.registered.discard(worker_id)
        worker = self.sim.workers[worker_id]
        if self.state in (TopologyState.RUNNING, TopologyState.RECOVERING):
            self.begin_recovery(f"worker {worker_id} lost: {reason}")
        # the worker's process lives on (a broken stream): it registers again
        if worker.alive:
            self.sim.world.at(5, worker.register, f"worker {worker_id} re-registers")

    # -- recovery (MasterCore._begin_generation / _resolve_restore / on_ready) -----------------
    def begin_recovery(self, reason: str, target: int | None = LATEST) -> None:
        """A new generation (``generation_steps.begin``, as ``MasterCore.begin_generation``;
        the simulator has no restart strategy: every restart is allowed)."""
        begin_generation(self.coordinator, _GenerationPort(self), reason, target,
                         count_restart=True)

    def resolve_ahead(self) -> None:
        """As ``MasterRecovery.resolve_ahead``: taken over, before any registration, the
        first generation's restore is resolved (its stores made), its outcome held."""
        if self.state != TopologyState.STARTING or self.recovery is not None:
            return
        self.recovery = Recovery(self.generation + 1, LATEST if self.resume else None)
        self._resolve(self.recovery)

    def maybe_prepare(self) -> None:
        rec = self.recovery
        if rec is None or self.state != TopologyState.RECOVERING:
            return  # as MasterCore: a retry is due only while recovering
        if may_resolve(registered=len(self.registered), workers=WORKERS,
                       resolving=rec.plan is not None,
                       committing=bool(self.coordinator.committing),
                       held=rec.held) != Gate.GO:
            return
        self._resolve(rec)

    def _resolve(self, rec: Recovery) -> None:
        rec.plan = RestorePlan(rec.generation, rec.target, stateful=True,
                               persisted_generation=self.persisted_generation,
                               completed_floor=self.coordinator.completed_floor,
                               bad=self.coordinator.bad, persisted_floor=self.persisted_floor,
                               epoch=self.epoch, epoch_starts=self.coordinator.epoch_starts,
                               layout_floor=self.coordinator.layout_floor)
        perform_recovery(rec.plan, self.coordinator, _RecoveryPort(self, rec))

    def on_ready(self, worker_id: int, generation: int, ok: bool, corrupt: bool,
                 error: str) -> None:
        if self.state == TopologyState.RUNNING and generation == self.generation and \
                self.sim.upgrading(worker_id):
            self.sim.upgrade_ready(self, worker_id, ok, error)
            return
        rec = self.recovery
        if rec is None or generation != self.generation or self.state != TopologyState.RECOVERING:
            return
        target = rec.target
        outcome = worker_ready(self.coordinator, rec.ready, worker_id, ok=ok, corrupt=corrupt,
                               target=target, workers=WORKERS, base=rec.base, now=self.now())
        match outcome:
            case FallBack(cid):
                self.sim.world.reach(Step.FELL_BACK)
                if cid in self.sim.completed or cid in self.coordinator.restored:
                    # docs/checkpointing.md, "a snapshot of c is corrupt": the fallback
                    # past a committed checkpoint is at-least-once for its span
                    self.sim.fell_back_past.add(cid)
                self.begin_recovery(f"worker {worker_id} failed to prepare: {error}")
            case PrepareFailed():
                self.begin_recovery(f"worker {worker_id} failed to prepare: {error}")
            case StartAll():
                self.state = TopologyState.RUNNING
                for w in self.sim.workers:
                    self.sim.control.to_worker(w, "start", rec.generation)

    # -- checkpoints (MasterCheckpoints.perform) -----------------------------------------------
    def tick(self) -> None:
        if not self.alive or self.state in (TopologyState.DRAINED, TopologyState.FAILED):
            return
        # MasterCore.tick: reserve ids ahead
        self.ids_stores.tick(running=self.state == TopologyState.RUNNING)
        if self.state == TopologyState.RUNNING:
            self.perform(self.coordinator.expire(self.now()))
        coord, sim = self.coordinator, self.sim
        if self.state == TopologyState.RUNNING and coord.final_checkpoint is None:
            if not sim.rescale_state and coord.may_start() and not sim.rescale_due(self):
                self.perform(coord.start(self.now(), self.now())[1])
            else:
                self.drive_cut()
        self.sim.world.at(CHECKPOINT_INTERVAL, self.tick, "")

    def drive_cut(self) -> None:
        """A rescale or gray release holding: start its quiescent checkpoint once the cut
        allows it (``QuiescentOperation._drive_to_cut``, which MasterCore's 20 ms tick
        calls: here at each tick and as soon as a checkpoint ends)."""
        coord, sim, cut = self.coordinator, self.sim, self.sim.cut
        if not self.alive or self.state != TopologyState.RUNNING or \
                coord.final_checkpoint is not None or sim.rescale_state != "pausing" or \
                cut is None or not cut.may_quiesce(running=True, in_flight=len(coord.inflight),
                                                   committing=len(coord.committing),
                                                   may_start=coord.may_start()):
            return
        cid, actions = coord.start(self.now(), self.now(), pause=True)
        cut.started(cid, self.generation)
        sim.rescale_checkpoint = cid
        self.perform(actions)

    def on_task_error(self, worker_id: int, generation: int, task_id: int,
                      error: str) -> None:
        if generation == self.generation and self.state == TopologyState.RUNNING:
            self.begin_recovery(f"task {task_id} failed: {error}")

    def on_ack(self, worker_id: int, generation: int, checkpoint_id: int, task_id: int,
               handle: str, finished: bool) -> None:
        self.perform(self.coordinator.ack(generation, checkpoint_id,
                                          TaskAck(task_id, handle, 1, finished, 0.0),
                                          self.now(), self.now()))
        self.maybe_final_checkpoint()  # MasterCheckpoints.on_ack

    def on_spout_finished(self, worker_id: int, generation: int, task_id: int) -> None:
        """A worker's heartbeat says spout ``task_id`` finished (``MasterCore.on_heartbeat``:
        ``maybe_final_checkpoint``)."""
        self.finished_spouts[task_id] = generation
        self.maybe_final_checkpoint()

    def maybe_final_checkpoint(self) -> None:
        """``MasterCheckpoints.maybe_final_checkpoint``: every spout finished, start the
        final checkpoint now, beside one in flight that cannot be the final one
        (``CheckpointCoordinator.final_may_start``)."""
        coord, sim = self.coordinator, self.sim
        finished = bool(coord.spout_tasks) and all(
            self.finished_spouts.get(t) == self.generation for t in coord.spout_tasks)
        if not self.alive or self.state != TopologyState.RUNNING or sim.rescale_state \
                or not coord.final_may_start(finished) or not coord.may_start(force=True):
            return
        if coord.busy():
            sim.world.reach(Step.FINAL_BESIDE_IN_FLIGHT)
            sim.world.note(f"TM: final checkpoint beside {sorted(coord.inflight)} in flight, "
                           f"{sorted(coord.committing)} committing")
        self.perform(coord.start(self.now(), self.now())[1])

    def on_fail(self, worker_id: int, generation: int, checkpoint_id: int, task_id: int,
                reason: str) -> None:
        self.perform(self.coordinator.task_failed(generation, checkpoint_id, task_id, reason,
                                                  self.now()))

    def on_sink_committed(self, worker_id: int, generation: int, checkpoint_id: int,
                          task_id: int) -> None:
        if generation == self.generation:
            self.sim.rescale_committed(self, checkpoint_id, task_id)
        self.perform(self.coordinator.sink_committed(generation, checkpoint_id, task_id))

    def perform(self, actions: list[CoordinatorAction]) -> None:
        """The coordinator's actions, through the driver MasterCore uses too
        (``coordinator_driver.perform``)."""
        coordinator_driver.perform(actions, _MasterPort(self))

    def write_commit_point(self, cid: int, meta: dict[str, Any]) -> None:
        """The one commit path (``commit_point.perform``, as ``MasterCore``), then its
        outcome to the coordinator."""
        commit = CommitPoint(cid, meta, {**self.sim.run.to_dict(), "epoch": self.epoch},
                             self.persisted_floor)

        def done(outcome: CommitOutcome) -> None:
            if outcome.status == CommitStatus.FENCED:
                return
            self.perform(report_commit(self.coordinator, cid, outcome,
                                       self.state == TopologyState.RUNNING, self.now(),
                                       self.now()))
            if outcome.status == CommitStatus.FAILED:  # MasterCore.store_ids_record_now
                self.ids_stores.store(f"bad checkpoint {cid}")
            if self.state == TopologyState.RECOVERING:
                self.maybe_prepare()
        perform_commit(commit, _CommitPort(self), done)

    def alive_check(self) -> Any:
        return lambda: self.alive

    def crash(self) -> None:
        self.alive = False
        self.sim.world.note("TM crashed")


# -- one run --------------------------------------------------------------------------------------
class Simulation:
    """One job run (or two, for the lifecycle faults) from one seed."""

    def __init__(self, world: World, plan: FaultPlan, output: SimOutput,
                 storage: SimStorage, inputs: dict[int, list[tuple[str, int]]],
                 run: RunIdentity, resume: bool = False,
                 earlier: tuple[RunIdentity, int] | None = None,
                 layout: Layout | None = None,
                 counter_stores: CounterStores | None = None) -> None:
        self.world = world
        self.counter_stores = counter_stores or CounterStores(False, world.clock_ms,
                                                              MAX_PARALLELISM)
        """The counter's state stores (the seed's: both runs of a lifecycle fault)."""
        self.plan = plan
        self.output = output
        self.storage = storage
        self.inputs = inputs
        self.run = run
        self.earlier = earlier
        self.stateful = True
        self.layout = layout or Layout()
        self.network = Network(self)
        self.control = Control(self)
        self.tm_incarnations = 0
        self.workers = [SimWorker(self, w) for w in range(WORKERS)]
        self.tm = SimMaster(self, resume)
        self.completed: set[int] = set(storage.completed_now())
        self.fell_back_past: set[int] = set()
        """Committed checkpoints a restore found damaged (a lost shared file) and fell back
        past: output is at-least-once for their span, by design."""
        self.violations: list[str] = []
        self.brokers: dict[int, set[int]] = {}
        """Fault.MULTILANG_SPOUT: per spout task, the indices its queue holds acks for."""
        self.generations: dict[int, int] = {}  # generation -> the TM incarnation that used it
        self.rescale_state = ""
        self.quiescent_kind = ""  # "rescale" or "upgrade": the operation the cut is for
        self.cut: QuiescentCut | None = None  # its way to the cut, while "pausing"
        self.upgrade_worker: int | None = None
        self.rescale_checkpoint = 0
        self.rescale_commits: set[int] = set()
        self.rescale_sinks_then: Callable[[], None] | None = None
        self.upgrade_registered_then: Callable[[], None] | None = None
        self.upgrade_ready_then: Callable[[str], None] | None = None
        self.pending_rescale: tuple[int, Layout] | None = None
        """A rescale staged and not yet adopted: its checkpoint and its layout."""
        self.layout_checkpoint = 0
        """The first checkpoint of the running layout (``rescale.json``): the layout
        floor a Topology Master starts from."""
        self.savepoint: int | None = None
        self.drained_at = 0
        self.savepoint_at: int | None = None
        self.savepoint_layout = self.layout
        self.savepoint_copy: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.savepoint_fell_back: frozenset[int] = frozenset()
        """``fell_back_past`` when the savepoint was taken: the at-least-once spans inside
        the output the savepoint covers (a run restored from it continues that output)."""

    def layout_now(self) -> Layout:
        return self.tm.layout

    def delay(self) -> float:
        """A message's delay: short, or (with message_delay) up to 30x longer."""
        d = self.world.latency(0.2, 2)
        if self.plan.on(Fault.MESSAGE_DELAY) and self.world.chance(0.2):
            self.plan.struck(Fault.MESSAGE_DELAY)
            d *= self.world.rng.uniform(5, 30)
        return d

    # -- invariants checked as they happen ----------------------------------------------------
    def check_commit(self, txn: int) -> None:
        if not any(c >= txn for c in self.storage.landed):
            self.violations.append(f"commit of transaction {txn}, which no completed "
                                   "checkpoint covers")

    def on_prepares(self, generation: int, tm: SimMaster) -> None:
        """The TM sends the Prepares of ``generation``. A generation names one timeline:
        the workers' frame filter and the sinks' fence tokens rely on a restarted TM never
        handing out one an earlier incarnation already did (issue 23, hole 7)."""
        first = self.generations.setdefault(generation, tm.incarnation)
        if first != tm.incarnation:
            self.violations.append(
                f"generation {generation} handed out again by a restarted Topology Master "
                f"(incarnation {tm.incarnation}; incarnation {first} had): live workers "
                "accept the earlier timeline's frames and fence tokens do not advance")

    def on_restore(self, restored: int) -> None:
        committed = [r.txn for r in self.output.committed_rows() if r.job == self.run.job_id]
        if committed and restored < max(committed) and not self.tm.coordinator.bad:
            self.violations.append(f"restore of checkpoint {restored} below committed "
                                   f"transaction {max(committed)}")

    # -- rescale (master/rescale.py: quiescent checkpoint, redistribute, restore) -------------
    def rescale_due(self, tm: SimMaster) -> bool:
        """Whether the next checkpoint is the quiescent cut of a rescale or a gray release
        (``quiescent_kind`` says which; master/quiescent.py)."""
        if self.rescale_state:
            return False
        done = len(self.completed)
        rescale, upgrade = self.plan.rescale_at, self.plan.upgrade_at
        if rescale is not None and not tm.rescale_done and done >= rescale // 2:
            # halved as the gray release's: the rescale's commit point is written after
            # every sink committed the cut, and a job that drains meanwhile ends first
            self.quiescent_kind = "rescale"
        elif upgrade is not None and not tm.upgrade_done and done >= upgrade // 2:
            # at the first checkpoint, or after the first or second completed one (the
            # draw's 1-4 halved: every draw as it was); later, the job had mostly finished
            # and its drain cut the release off (one drawn release in seven completed)
            self.quiescent_kind = "upgrade"
        else:
            return False
        self.rescale_state = "pausing"
        self.cut = QuiescentCut(wait_for_commits=self.quiescent_kind == "upgrade")
        return True  # (the tick starts the quiescent checkpoint when the cut allows it)

    def rescale_after_complete(self, tm: SimMaster, cid: int, generation: int) -> bool:
        """The quiescent checkpoint completed. A rescale waits until every sink committed
        it, then redistributes and restores at the new parallelism (refused: resumes at the
        old one); a gray release restarts one worker at once (master/upgrade.py)."""
        if self.rescale_state == "pausing" and self.cut is not None and \
                isinstance(self.cut.ended(cid, generation, "completed"), Quiesced):
            if self.quiescent_kind == "upgrade":
                self._upgrade(tm, cid)
            else:  # steps 3-6: master/rescale_steps.py, as RescaleController performs them
                perform_rescale(RescaleSteps(cid), _RescalePort(self, tm))
        return False

    # -- gray release (master/upgrade.py: quiescent checkpoint, restart a batch, restore it) --
    def _upgrade(self, tm: SimMaster, cid: int) -> None:
        """Steps 3-5 of a gray release: master/upgrade_steps.py, as ``UpgradeController``
        performs them, through the simulator's port: one worker restarts on new code, is
        prepared from ``cid`` in the current generation (partial), and the other keeps its
        tasks, state and generation."""
        tm.upgrade_done = True
        perform_switch(SwitchSteps(cid), _SwitchPort(self, tm))

    def upgrading(self, worker_id: int) -> bool:
        return self.rescale_state == "upgrading" and worker_id == self.upgrade_worker

    def upgrade_prepare(self, tm: SimMaster, worker_id: int) -> None:
        """The restarted worker registered (``UpgradeController.on_register``)."""
        then, self.upgrade_registered_then = self.upgrade_registered_then, None
        if then is not None:
            then()
        else:  # registered again mid-switch (a broken stream): a new generation aborts it
            self.world.reach(Step.GRAY_RELEASE_ABORTED)
            tm.begin_recovery(f"worker {worker_id} re-registered during the switch")

    def upgrade_ready(self, tm: SimMaster, worker_id: int, ok: bool, error: str) -> None:
        """It answered its Prepare (``UpgradeController.on_ready``)."""
        then, self.upgrade_ready_then = self.upgrade_ready_then, None
        if then is not None:
            then("" if ok else f"worker {worker_id} failed to prepare: {error}")

    def rescale_aborted(self, tm: SimMaster, cid: int, generation: int, reason: str) -> None:
        if self.rescale_state == "pausing" and self.cut is not None and \
                isinstance(self.cut.ended(cid, generation, "aborted", reason), CutFailed):
            self.world.reach(Step.GRAY_RELEASE_ABORTED if self.quiescent_kind == "upgrade"
                             else Step.RESCALE_REFUSED)
            self.rescale_state = ""
            for w in self.workers:
                self.control.to_worker(w, "resume", tm.generation)

    def rescale_committed(self, tm: SimMaster, cid: int, task: int) -> None:
        if self.rescale_state != "sinks" or cid < self.rescale_checkpoint:
            return
        self.rescale_commits.add(task)
        if self.rescale_commits >= set(self.layout.tasks("sink")) and \
                self.rescale_sinks_then is not None:
            then, self.rescale_sinks_then = self.rescale_sinks_then, None
            then()

    def adopt_pending_rescale(self) -> None:
        """A restarted TM finds a rescale staged (``finish_pending_rescale``): it adopts
        the new layout if the rescaled checkpoint completed and is not bad, else drops
        it."""
        if self.pending_rescale is None:
            return
        cid, layout = self.pending_rescale
        self.pending_rescale = None
        raw = self.storage.meta_now(CHECKPOINT_IDS_META)
        bad: frozenset[int] = frozenset()
        if raw:
            ids = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                        tolerable_timeouts=0)
            ids.adopt_ids_record(raw)
            bad = ids.bad
        if pending_rescale_committed(cid, self.storage.completed_now(), bad):
            self.layout, self.layout_checkpoint = layout, cid
            self.world.note(f"TM: adopted the rescale committed as checkpoint {cid}")
            self.world.reach(Step.RESCALE_COMPLETED)
        else:  # its commit point may still land: stored as bad first (master/rescale.py)
            store_bad_checkpoint(self.storage.inspect, cid)
            self.world.note(f"TM: dropped an uncommitted rescale (checkpoint {cid})")
            self.world.reach(Step.RESCALE_REFUSED)

    def on_completed(self, cid: int) -> None:
        self.completed.add(cid)
        if self.savepoint_at is not None and self.savepoint is None and \
                len(self.completed) >= self.savepoint_at and not self.rescale_state:
            # a savepoint is a self-contained copy (jstorm savepoint): shared files are
            # read into it
            copy = self.storage.checkpoint_copy(cid)
            if copy is None:
                return
            self.savepoint = cid
            self.savepoint_layout = self.layout
            self.savepoint_copy = copy
            self.savepoint_fell_back = frozenset(self.fell_back_past)

    # -- faults scheduled by the plan ---------------------------------------------------------
    def schedule_faults(self) -> None:
        if self.plan.file_loss_at is not None:
            self.world.at(self.plan.file_loss_at, self._lose_a_shared_file,
                          "fault: a shared file is lost")
        for t, w in self.plan.crash_times:
            self.world.at(t, functools.partial(self._crash_worker, w), f"fault: crash worker {w}")
        for t in self.plan.tm_crash_times:
            self.world.at(t, self._crash_tm, "fault: crash TM")
        if self.plan.sink_down is not None:
            start, end = self.plan.sink_down
            self.world.at(start, lambda: setattr(self.output, "down", True),
                          "fault: external system down")
            self.world.at(end, lambda: setattr(self.output, "down", False),
                          "fault: external system back")

    def _lose_a_shared_file(self) -> None:
        files = self.storage.shared_files_now()
        if files:
            key = self.world.rng.choice(files)
            self.storage.lose(key)
            self.world.note(f"storage: lost {key}")

    def _crash_worker(self, w: int) -> None:
        worker = self.workers[w]
        if not worker.alive or self.tm.state in (TopologyState.DRAINED, TopologyState.FAILED):
            return
        worker.crash()
        tm = self.tm
        self.world.at(HEARTBEAT_TIMEOUT, lambda: tm.worker_lost(w, "heartbeat timeout"),
                      f"TM: worker {w} missed heartbeats")
        self.world.at(self.world.latency(5, 40), worker.restart, f"worker {w} restarts")

    def depose_tm(self) -> None:
        """The TM lost its lead mid-commit (LEADER_DEPOSED): it stops; a standby's TM takes
        the run over (the next epoch) once the old leader's session expired."""
        self.tm.deposed = True
        self.world.note(f"TM epoch {self.tm.epoch} deposed")
        self._crash_tm()

    def _crash_tm(self) -> None:
        if self.tm.state in (TopologyState.DRAINED, TopologyState.FAILED) or not self.tm.alive:
            return  # a dead TM's restart is already on its way: one launcher, one TM
        old = self.tm
        old.crash()

        def restart() -> None:
            # a rescale cut off by the crash: finish_pending_rescale, attach_run_dir
            self.rescale_state, self.rescale_sinks_then = "", None
            self.adopt_pending_rescale()
            self.tm = SimMaster(self, resume=True)
            self.tm.boot()
        self.world.at(self.world.latency(5, 40), restart, "TM restarts")

    def start(self) -> None:
        self.schedule_faults()
        self.tm.boot()

    def finished(self) -> bool:
        return self.tm.state in (TopologyState.DRAINED, TopologyState.FAILED)


class _RescalePort:
    """How the simulated TM performs a rescale's steps after its quiescent cut
    (:class:`~jstormpy.master.rescale_steps.RescalePort`), as ``RescaleController`` does:
    the new layout's checkpoint written from the quiescent one by the real
    ``keygroups.redistribute``, its commit point through the one commit path on the
    simulated storage, the layout floor set by the real coordinator."""

    def __init__(self, sim: Simulation, tm: SimMaster) -> None:
        self.sim, self.tm = sim, tm
        self.layout: Layout | None = None
        self.metadata: dict[str, Any] = {}

    def live(self) -> bool:
        return self.tm.alive and self.sim.tm is self.tm

    def await_sinks(self, quiescent: int, then: Callable[[], None]) -> None:
        sim = self.sim
        sim.rescale_state = "sinks"
        sim.rescale_commits = set()
        sim.rescale_sinks_then = then

    def allocate_id(self) -> int:
        self.tm.rescale_done = True
        return self.tm.coordinator.allocate_id()

    def write_rescaled(self, quiescent: int, target: int,
                       then: Callable[[str], None]) -> None:
        sim, tm = self.sim, self.tm
        # half the seeds (a generator of their own: every other draw stays as it was) ask
        # for "tally" too, which keeps a partial count per task (shuffle-fed): the real
        # redistribute refuses to split it, and the rescale is refused (hole 5 lets it
        # through and loses values); the others rescale the keyed counter only, and the
        # rescale completes
        both = random.Random(f"{sim.world.seed}:rescale").random() < 0.5
        old = sim.layout
        new = Layout(count=3 if old.count == 2 else 1, tally=3 if both else old.tally)
        meta = sim.storage.metadata_now(quiescent)
        by_task = {} if meta is None else {
            int(t): sim.storage.materialize(sim.storage.snapshot_now(v["handle"]))
            for t, v in meta["tasks"].items()}
        if meta is None or any(v is None for v in by_task.values()):
            then(f"checkpoint {quiescent} is gone")
            return
        try:
            moved: dict[int, Any] = {}
            for comp in ("count", "tally"):
                snaps: list[dict[str, Any]] = [by_task[t] or {} for t in old.tasks(comp)]
                parts = redistribute(comp, snaps, getattr(new, comp), MAX_PARALLELISM)
                for t, part in zip(new.tasks(comp), parts, strict=True):
                    moved[t] = part
        except JStormError as exc:
            then(str(exc))
            return
        for comp in ("spout", "sink"):
            for old_t, new_t in zip(old.tasks(comp), new.tasks(comp), strict=True):
                moved[new_t] = by_task[old_t]
        for t in new.tasks("sink"):
            # as rescale_state._reset_channels: every sink committed the quiescent
            # checkpoint, so nothing staged is left to re-commit under the new task ids
            moved[t] = {**(moved[t] or {}), "pending_rows": {}}
        tasks = sim.storage.write_rescaled(target, tm.generation, moved)
        self.layout = new
        self.metadata = {k: v for k, v in meta.items() if k != "run"} | {"tasks": tasks}
        then("")

    def stage(self, target: int, then: Callable[[str], None]) -> None:
        assert self.layout is not None
        self.sim.rescale_state = "committing"
        self.sim.pending_rescale = (target, self.layout)
        then("")

    def commit(self, target: int, then: Callable[[CommitOutcome], None]) -> None:
        tm = self.tm
        commit = CommitPoint(target, self.metadata, {**self.sim.run.to_dict(),
                                                     "epoch": tm.epoch}, tm.persisted_floor)
        perform_commit(commit, _CommitPort(tm), then)

    def mark_bad(self, target: int, outcome: CommitOutcome, then: Callable[[], None]) -> None:
        tm, storage = self.tm, self.sim.storage
        tm.coordinator.mark_bad(target)

        def discarded(_: Any, error: BaseException | None) -> None:
            then()

        def ids_stored() -> None:
            if outcome.exists:  # another writer's commit point is not ours to delete
                then()
            else:
                storage.discard(target, tm.alive_check(), discarded)
        tm.ids_stores.store(f"bad rescaled checkpoint {target}", ids_stored)

    def adopt_layout(self, target: int) -> None:
        sim, tm, new = self.sim, self.tm, self.layout
        assert new is not None
        if not self.live():
            return
        sim.pending_rescale = None
        sim.rescale_state = ""
        sim.layout = tm.layout = new
        sim.layout_checkpoint = target
        tm.coordinator.set_layout(new.component_of(), new.tasks("spout"), new.tasks("sink"))
        tm.coordinator.adopt_layout(target)
        sim.world.note(f"rescaled to count={new.count} tally={new.tally} at checkpoint "
                       f"{target}")
        sim.world.reach(Step.RESCALE_COMPLETED)
        if tm.state in (TopologyState.RUNNING, TopologyState.RECOVERING):
            tm.begin_recovery("rescale", target)

    def abort(self, reason: str, resume: bool, staged: bool) -> None:
        sim, tm = self.sim, self.tm
        if not self.live():
            return
        if staged:
            sim.pending_rescale = None
        sim.world.note(f"rescale aborted: {reason[:160]}")
        sim.world.reach(Step.RESCALE_REFUSED)
        sim.rescale_state = ""
        if resume and tm.state == TopologyState.RUNNING:
            for w in sim.workers:
                sim.control.to_worker(w, "resume", tm.generation)


class _SwitchPort:
    """How the simulated TM performs a gray release's switch after its quiescent cut
    (:class:`~jstormpy.master.upgrade_steps.SwitchPort`), as ``UpgradeController`` does:
    a batch of one worker restarts (``Shutdown``, exit 75), the checkpoint's handles are
    read through the TM's serialised storage calls (its faults strike them), the worker is
    prepared in the current generation, then everything resumes."""

    def __init__(self, sim: Simulation, tm: SimMaster) -> None:
        self.sim, self.tm = sim, tm

    def switching(self) -> bool:
        """Still this TM's switch (a recovery or a TM crash cuts it off)."""
        sim = self.sim
        return self.tm.alive and sim.tm is self.tm and sim.rescale_state == "upgrading"

    def stop_batch(self, then: Callable[[], None]) -> None:
        sim, tm = self.sim, self.tm
        w = sim.world.rng.randrange(len(sim.workers))
        sim.rescale_state = "upgrading"
        sim.upgrade_worker = w
        sim.upgrade_registered_then = then
        sim.world.note(f"gray release: worker {w} restarts on new code at checkpoint "
                       f"{sim.rescale_checkpoint}")
        sim.control.to_worker(sim.workers[w], "shutdown", tm.generation)

    def read_checkpoint(self, quiescent: int,
                        then: Callable[[Mapping[int, str], str], None]) -> None:
        def read(meta: Any, error: BaseException | None) -> None:
            if not self.switching():
                return  # aborted meanwhile
            if error is not None or meta is None:
                then({}, str(error))
                return
            then({int(t): v["handle"] for t, v in meta["tasks"].items()}, "")
        self.sim.storage.read_metadata(quiescent, self.tm.alive_check(), read)

    def prepare_batch(self, quiescent: int, handles: Mapping[int, str],
                      then: Callable[[str], None]) -> None:
        sim, tm = self.sim, self.tm
        w, layout = sim.upgrade_worker, sim.layout
        assert w is not None
        sim.upgrade_ready_then = then
        mine = {t: h for t, h in handles.items() if layout.worker_of(t) == w}
        restored, base = prepare_ids(quiescent, tm.coordinator.id_floor, True)
        sim.control.to_worker(sim.workers[w], "prepare", tm.generation, mine, restored,
                              base, layout)

    def resume(self) -> None:
        sim, tm = self.sim, self.tm
        w = sim.upgrade_worker
        assert w is not None
        sim.world.reach(Step.GRAY_RELEASE_COMPLETED)
        sim.rescale_state = ""
        sim.upgrade_worker = None
        sim.control.to_worker(sim.workers[w], "start", tm.generation)
        for worker in sim.workers:
            sim.control.to_worker(worker, "resume", tm.generation)

    def abort(self, reason: str) -> None:
        if not self.switching():
            return
        self.sim.world.reach(Step.GRAY_RELEASE_ABORTED)
        self.tm.begin_recovery(f"gray release aborted: {reason}")


def _merge_capture(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A capture equal to writing ``old`` then ``new`` (incremental._merge)."""
    if new["kind"] == "base":
        return new
    states = {n: dict(v) for n, v in old["states"].items()}
    for n, v in new["states"].items():
        states.setdefault(n, {}).update(v)
    return {"kind": old["kind"], "states": states}
