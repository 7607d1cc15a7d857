"""Task executors: one thread per task, running a spout loop or a bolt loop.

A bolt task takes items ``(src_task, kind, stream, payload)`` from its bounded input
queue: DATA batches are executed tuple by tuple (``execute``) or whole (``execute_batch``,
the batch API: one :class:`~jstormpy.api.batch.Batch` per DATA item, so never across a
marker); BARRIER items go through the
:class:`~jstormpy.barrier.aligner.BarrierAligner`; WATERMARK items advance the task's
watermark (minimum over input channels); END_OF_STREAM marks a channel finished.
"""

from __future__ import annotations

import json
import logging
import pickle
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from jstormpy.api.batch import Batch, failed_input
from jstormpy.api.component import ERRORS_STREAM, Tuple, managed_states
from jstormpy.api.errors import TopologyError
from jstormpy.barrier import task_barrier as barrier_steps
from jstormpy.barrier.aligner import BarrierAligner
from jstormpy.barrier.snapshots import (
    AckSnapshot,
    DeclineSnapshot,
    SnapshotReport,
    SnapshotTicket,
    TaskSnapshots,
)
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
from jstormpy.faults import fault_point
from jstormpy.picklecheck import snapshot_pickle_error
from jstormpy.runtime.credits import TaskInbox
from jstormpy.runtime.incremental import IncrementalCapture, IncrementalKeyedState
from jstormpy.runtime.routing import (
    MessageKind,
    OutputCollector,
    QuiescentBarrier,
)
from jstormpy.runtime.snapshots import (
    SnapshotStream,
    Snapshotter,
    SnapshotView,
    capture,
    release,
    serialise_stream,
    stall_ms,
    upload_native,
    verify,
)
from jstormpy.runtime.task_host import TaskCommand, TaskHost, TaskMetricsCounters, TaskStopped
from jstormpy.state_backends.shared_files import encode_refs

log = logging.getLogger("jstormpy.task")

# The item kinds as the plain ints items carry (an Enum-class attribute lookup per item
# costs more than the comparison).
_DATA, _BARRIER, _WATERMARK, _END_OF_STREAM = (int(k) for k in MessageKind)

COMMIT_RETRY_S = 1.0
"""A sink commit deferred by SinkUnavailableError is retried after this long if no later
checkpoint completes first (after a bounded job's final checkpoint none does)."""


READY_POLL_S = 0.05
"""How often a chained task's thread looks at its commands and its source waits for
the chained task's start-up."""
IDLE_POLL_S = 0.05
"""How long a bolt with an empty inbox and nothing to flush waits before it looks at its
ticks and returns its credit."""


class _SnapshotInput:
    """What a task was working on when its state could not be pickled (for error reports)."""

    def __repr__(self) -> str:
        return "<the task's state, pickled for a checkpoint>"


_SNAPSHOT_INPUT = _SnapshotInput()


class TaskExecutor:
    """Runs one task (spout or bolt) in its own thread (a chained bolt: in its source's,
    see "chained mode" below)."""

    def __init__(self, task_id: int, component_name: str, kind: str, component: Any,
                 collector: OutputCollector, host: TaskHost, *, is_sink: bool = False,
                 inq: TaskInbox | None = None, input_channels: tuple[int, ...] = (),
                 source_index: dict[tuple[int, str], tuple[str, dict[str, int]]] | None = None,
                 linger_s: float = 0.005, restored: dict[str, Any] | None = None,
                 credit_batch: dict[int, int] | None = None,
                 id_floor: int = 0,
                 incremental: IncrementalKeyedState | None = None) -> None:
        self.task_id = task_id
        self.incremental = incremental  # Config.incremental_checkpoints (runtime/incremental.py)
        self.component_name = component_name
        self.kind = kind
        self.component = component
        self.collector = collector
        self.host = host
        self.is_sink = is_sink
        self.inq = inq
        self.input_channels = input_channels
        self.source_index = source_index or {}
        self.linger_s = linger_s
        # ops: Config.latency_timing=False skips the per-batch clock reads (docs/operations.md)
        config = host.config
        self.timing = config.latency_timing if config is not None else True
        # Config.on_error="dead_letter": a failing tuple goes to the bolt's errors stream
        self.dead_letters = config is not None and config.on_error == "dead_letter"
        self.ctrl: deque[tuple[TaskCommand, Any]] = deque()
        self.wake = threading.Event()
        self.stopping = False
        self.failed = False
        self.metrics = TaskMetricsCounters()
        self.thread: threading.Thread | None = None
        self.throttled_until = 0.0
        self.paused = False  # gray release: stopped after a quiescent barrier until resumed
        self.ticks_paused = False  # gray release: no on_tick between that barrier and resume
        restored = restored or {}
        self.eos_sent = bool(restored.get("eos_sent", False))
        self.eos_channels: set[int] = set(restored.get("eos_channels", ()))
        self.channel_wm: dict[int, float] = dict(restored.get("channel_wm", {}))
        self.watermark = float(restored.get("watermark", float("-inf")))
        self.inputs_finished = bool(restored.get("inputs_finished", False))
        # a sink's two-phase commit (barrier/transactions.py): the executor performs its steps
        self.txns = SinkTransactions(restored.get("sink_pending", ()))
        self.commit_retry_at: float | None = None  # a deferred sink commit: when to retry
        self.aligner = BarrierAligner(list(input_channels), host.guarantee == "exactly_once")
        self.pending: deque[Any] = deque()
        self.credit_batch = credit_batch or {}
        self.id_floor = id_floor  # a sink's first transaction is id_floor + 1
        self.credit_owed: dict[int, int] = {}
        self.tuple_classes: dict[tuple[int, str], type[Tuple]] = {}
        self.snapshotter: Snapshotter | None = None  # started at the first snapshot
        # which generation each snapshot in flight belongs to; fenced by stop() (hole 6)
        self.snapshots = TaskSnapshots(task_id)
        # chained mode (set by the worker before start(); see "chained mode" below)
        self.chained = False
        self.chain_lock = threading.Lock()
        self.chain_ready = threading.Event()  # the task's own start-up (a sink's begin) ran
        self.chain_closed = False  # its own thread ended: the component is cleaned up
        self.chain_flushed = time.monotonic()
        self.cpu_final = 0.0  # CPU time of the ended task thread (heartbeat.task_cpu_seconds)
        self.verified_states: set[str] = set()  # immutable-valued at an earlier capture
        # batch API (opt-in): execute_batch(batch) per channel batch, next_batch() in spouts
        batch_execute = getattr(component, "execute_batch", None)
        self.batch_execute = batch_execute if callable(batch_execute) else None
        self.next_tick = 0.0
        tick = getattr(component, "tick_interval_ms", None)
        self.tick_s = tick / 1000.0 if tick else None

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the task thread."""
        target = self._run_spout if self.kind == "spout" else \
            self._run_chain_owner if self.chained else self._run_bolt
        self.thread = threading.Thread(target=self._guarded, args=(target,),
                                       name=f"task-{self.task_id}-{self.component_name}",
                                       daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Ask the thread to stop (it finishes the user call in progress)."""
        self.stopping = True
        self.snapshots.stop()  # snapshots still uploading report nothing: they are void
        self.wake.set()
        if self.inq is not None:  # a bolt waiting on its empty inbox
            self.inq.wake()

    def join(self, timeout: float) -> bool:
        """Wait for the thread; True if it ended."""
        if self.thread is None:
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def command(self, name: TaskCommand, arg: Any) -> None:
        """Queue a command for the task thread (it runs between two user calls)."""
        self.ctrl.append((name, arg))
        self.wake.set()
        if self.inq is not None:  # a bolt waiting on its empty inbox runs it now, not at
            self.inq.wake()       # its next poll (a sink's commit ends a bounded run)

    def _guarded(self, target: Callable[[], None]) -> None:
        try:
            target()
        except TaskStopped:
            pass
        except Exception as exc:  # an engine bug or a user error outside execute
            if not self.stopping:
                log.exception("task %s (%s) crashed", self.task_id, self.component_name)
                self.failed = True
                self.host.report_error(self.task_id, self.component_name, exc, None)
        finally:
            self.cpu_final = time.thread_time()
            if self.snapshotter is not None:
                self.snapshotter.close()  # after the snapshots already queued
            if self.chained:  # its source calls it no more, and is not inside it now
                with self.chain_lock:
                    self.chain_closed = True
                    self._close_component()
            else:
                self._close_component()

    def _close_component(self) -> None:
        try:
            if self.kind == "spout":
                self.component.close()
            else:
                self.component.cleanup()
        except Exception:
            log.exception("task %s close/cleanup failed", self.task_id)

    # -- user errors ----------------------------------------------------------------------
    def _user_error(self, exc: BaseException, tup: Any) -> None:
        self.metrics.errors += 1
        tup = failed_input(exc, tup)  # a batch's failing record, when the bolt named it
        if self.dead_letters and self.kind == "bolt" and isinstance(tup, Tuple):
            log.warning("task %s (%s) raised %s on %r: sent to its %r stream",
                        self.task_id, self.component_name, exc.__class__.__name__, tup,
                        ERRORS_STREAM)
            try:
                self.collector.emit((self.component_name, self.task_id,
                                     f"{type(exc).__name__}: {exc}", traceback.format_exc(),
                                     list(tup.values)), ERRORS_STREAM)
            except TopologyError:  # nothing subscribes to the errors stream: logged only
                pass
            return
        log.error("task %s (%s) raised %s on %r\n%s", self.task_id, self.component_name,
                  exc.__class__.__name__, tup, traceback.format_exc())
        self.host.report_error(self.task_id, self.component_name, exc, tup)
        if self.host.guarantee != "at_most_once":
            # the Topology Master rolls the topology back; stop making progress meanwhile
            self.failed = True
            raise TaskStopped

    # -- control commands -------------------------------------------------------------------
    def _process_ctrl(self) -> None:
        while self.ctrl:
            name, arg = self.ctrl.popleft()
            if name is TaskCommand.TRIGGER:
                self._spout_checkpoint(arg)
            elif name is TaskCommand.COMPLETE:
                self._complete(arg)
            elif name is TaskCommand.THROTTLE:
                self.throttled_until = arg
            elif name is TaskCommand.TRIGGER_PAUSE:  # barrier, then nothing until RESUME
                self._spout_checkpoint(QuiescentBarrier(arg))
            elif name is TaskCommand.RESUME:
                self.paused = False
                self.ticks_paused = False
        if self.stopping:
            raise TaskStopped

    def _complete(self, checkpoint_id: int) -> None:
        if self.is_sink:
            self.commit_retry_at = None
            self.perform_sink_steps(self.txns.complete(checkpoint_id))
        hook = getattr(self.component, "on_checkpoint_complete", None)
        if callable(hook):
            hook(checkpoint_id)

    # -- a sink's two-phase commit ---------------------------------------------------------
    def restore_sink(self, restored: int | None, id_floor: int) -> None:
        """After the sink's ``prepare``: re-commit the restored snapshot's staged
        transactions and recover to ``restored`` (the worker's restore path); new
        transactions start at ``id_floor + 1``."""
        self.perform_sink_steps(self.txns.restore(restored, id_floor))

    def perform_sink_steps(self, steps: list[SinkStep]) -> bool:
        """Perform steps of :class:`SinkTransactions` on this task's sink and host; False
        if the external system was unavailable."""
        return self.txns.run(steps, self._perform_sink_step)

    def _perform_sink_step(self, step: SinkStep) -> None:
        sink = self.component
        worker = self.host.worker_id
        match step:
            case Begin(txn):
                sink.begin(txn)
            case PreCommit(txn):
                sink.pre_commit(txn)
            case Commit(txn):
                fault_point("sink_before_commit", txn, worker)
                sink.commit(txn)
                fault_point("sink_after_commit", txn, worker)
            case Recover(restored):
                sink.recover(restored)
            case ReportCommitted(checkpoint_id):
                self.host.report_committed(checkpoint_id, self.task_id)
            case FailCheckpoint(checkpoint_id, reason):
                log.warning("task %s: checkpoint %s aborted, sink unavailable: %s",
                            self.task_id, checkpoint_id, reason)
                self.host.fail_checkpoint(checkpoint_id, self.task_id, reason)
            case RetryCommit(checkpoint_id):
                # retried at the next completion, or in COMMIT_RETRY_S if none comes
                log.warning("task %s: commit up to %s deferred: sink unavailable",
                            self.task_id, checkpoint_id)
                self.commit_retry_at = time.monotonic() + COMMIT_RETRY_S

    # -- snapshots ------------------------------------------------------------------------
    def _snapshot_dict(self) -> dict[str, Any]:
        comp = self.component
        snap: dict[str, Any] = {"states": managed_states(comp),
                                "state_version": getattr(type(comp), "state_version", None),
                                "max_parallelism": self.host.max_parallelism}
        custom = getattr(comp, "snapshot", None)
        if callable(custom):
            snap["custom"] = custom()
        snap["forwarded_wm"] = self.collector.forwarded  # event-time combining's bound
        if self.kind == "spout":
            snap["finished"] = comp.finished
            snap["eos_sent"] = self.eos_sent
        else:
            snap["eos_channels"] = sorted(self.eos_channels)
            snap["channel_wm"] = self.channel_wm
            snap["watermark"] = self.watermark
            snap["inputs_finished"] = self.inputs_finished
            snap["sink_pending"] = list(self.txns.pending)
        return snap

    def _snapshot_bytes(self) -> bytes:
        """The whole snapshot serialised on the calling thread (synchronous form)."""
        return pickle.dumps(self._snapshot_dict(), protocol=pickle.HIGHEST_PROTOCOL)

    def _take_snapshot(self, checkpoint_id: int, alignment_ms: float, emit_barrier: bool) -> None:
        """A bolt's barrier steps with ``alignment_ms`` given (tests and the snapshot-pause
        bench call it; ``emit_barrier`` False sends no barrier downstream)."""
        plan = barrier_steps.TaskBarrier(barrier_steps.TaskKind.BOLT, self._stateful())
        barrier_steps.perform(plan, _BarrierPort(self, alignment_ms, emit_barrier),
                              checkpoint_id)

    def _report_snapshot(self, reports: list[SnapshotReport], finished: bool,
                         alignment_ms: float, snapshot_ms: float,
                         pause_ms: float = 0.0) -> None:
        for report in reports:
            match report:
                case AckSnapshot(ticket, handle, size):
                    self.host.ack_checkpoint(ticket.checkpoint_id, self.task_id, handle, size,
                                             finished, alignment_ms, snapshot_ms,
                                             generation=ticket.generation, pause_ms=pause_ms)
                case DeclineSnapshot(ticket, reason):
                    self.host.fail_checkpoint(ticket.checkpoint_id, self.task_id, reason,
                                              generation=ticket.generation)

    def _upload_snapshot(self, ticket: SnapshotTicket, view: SnapshotView,
                         alignment_ms: float, finished: bool, t0: float,
                         inc: IncrementalCapture | None = None,
                         pause_ms: float = 0.0) -> None:
        """Snapshot thread: serialise, upload, ack (not if the task was stopped meanwhile:
        a rollback or shutdown voids the checkpoint). With incremental checkpoints the
        segment is written first, then the snapshot naming the chain. The ack reports
        ``pause_ms`` (the barrier's synchronous part) plus the time the task thread waited
        for this barrier's RocksDB apply (:func:`~jstormpy.runtime.snapshots.stall_ms`)."""
        checkpoint_id, generation = ticket.checkpoint_id, ticket.generation
        stream: SnapshotStream | None = None
        try:
            size = 0
            verify(view)  # before any segment is written
            backend = self.host.backend
            attempt = self.host.incarnation
            worker_id = self.host.worker_id
            shared, size = upload_native(
                view, backend, task_id=self.task_id, checkpoint_id=checkpoint_id,
                generation=generation, attempt=attempt,
                after_first_upload=lambda: fault_point("during_sst_upload", checkpoint_id,
                                                       worker_id))
            refs = encode_refs(shared) if view.native else None
            if inc is not None and self.incremental is not None:
                entry, chain_refs, seg_size = self.incremental.write(
                    backend, inc, checkpoint_id, generation, attempt)
                fault_point("after_segment", checkpoint_id, self.host.worker_id)
                view.extra = {**(view.extra or {}), "incremental": entry}
                size += seg_size
                refs = encode_refs([*shared, *json.loads(chain_refs)])
            # written as it is made: a full dump never is whole in memory here
            stream = serialise_stream(view)
            handle = self.host.write_snapshot(checkpoint_id, self.task_id, stream,
                                              refs=refs, generation=generation)
            size += stream.size
        except Exception as exc:
            log.error("task %s: snapshot for checkpoint %s failed: %s", self.task_id,
                      checkpoint_id, exc)
            self._report_snapshot(self.snapshots.failed(ticket, str(exc)), finished,
                                  alignment_ms, 0.0)
            return
        finally:
            if stream is not None:  # a write given up by its deadline stops reading
                stream.close()
            pause_ms += stall_ms(view)
            release(view)
        if self.snapshots.stopped:
            return  # a rollback replaced this task meanwhile: the checkpoint is void
        fault_point("after_snapshot", checkpoint_id, self.host.worker_id)
        self._report_snapshot(self.snapshots.uploaded(ticket, handle, size),
                              finished, alignment_ms, (time.monotonic() - t0) * 1000.0,
                              pause_ms)

    def _spout_checkpoint(self, barrier: int) -> None:
        """The spout's barrier steps (barrier/task_barrier.py), triggered by the TM."""
        plan = barrier_steps.TaskBarrier(barrier_steps.TaskKind.SPOUT, self._stateful(),
                                         isinstance(barrier, QuiescentBarrier))
        barrier_steps.perform(plan, _BarrierPort(self, 0.0), barrier)

    def _stateful(self) -> bool:
        return self.host.guarantee != "at_most_once"

    # -- spout loop -----------------------------------------------------------------------
    def _run_spout(self) -> None:
        comp = self.component
        coll = self.collector
        next_batch = getattr(comp, "next_batch", None)
        next_tuple = next_batch if callable(next_batch) else comp.next_tuple
        wake = self.wake
        last_flush = time.monotonic()
        while True:
            if self.ctrl or self.stopping:
                self._process_ctrl()
            if self.paused:
                wake.wait(0.05)
                wake.clear()
                continue
            if comp.finished:
                self._send_end_of_stream()
                wake.wait(0.05)
                wake.clear()
                continue
            now = time.monotonic()
            if self.throttled_until > now:
                coll.flush()
                wake.wait(min(self.throttled_until - now, 0.05))
                wake.clear()
                continue
            before = coll.emitted
            try:
                next_tuple()
            except TaskStopped:
                raise
            except Exception as exc:
                self._user_error(exc, None)
            if comp.finished:
                # end of stream goes out right behind the last emit, before any barrier a
                # trigger queued meanwhile: the final checkpoint must follow it (hole 3)
                self._send_end_of_stream()
                continue
            if coll.emitted == before:
                coll.flush()
                last_flush = time.monotonic()
                wake.wait(0.001)
                wake.clear()
            elif now - last_flush >= self.linger_s:  # read live: jstorm config
                coll.flush()
                last_flush = now

    def _send_end_of_stream(self) -> None:
        """Flush and send END_OF_STREAM on every output channel, once; tell the host."""
        if self.eos_sent:
            return
        self.collector.flush()
        self.collector.broadcast(MessageKind.END_OF_STREAM, None)
        self.eos_sent = True
        self.host.spout_finished(self.task_id)

    # -- bolt loop --------------------------------------------------------------------------
    def _run_bolt(self) -> None:
        assert self.inq is not None
        q = self.inq
        coll = self.collector
        pending = self.pending
        aligner = self.aligner
        self._begin_sink()
        last_flush = time.monotonic()
        while True:
            if self.ctrl or self.stopping:
                self._process_ctrl()
            if pending:
                item = pending.popleft()
            else:
                timeout = self.linger_s if coll.dirty else IDLE_POLL_S
                if self.tick_s is not None:
                    timeout = min(timeout, max(self.next_tick - time.monotonic(), 0.0))
                try:
                    item = q.get(timeout)
                except IndexError:
                    coll.flush()
                    self._return_all_credit()
                    last_flush = time.monotonic()
                    self._run_due(last_flush)
                    continue
            src, kind, stream, payload = item
            if aligner.blocked and src in aligner.blocked:
                aligner.hold(src, item)  # no credit back: the blocked channel slows down
                continue
            owed = self.credit_owed.get(src, 0) + 1
            if owed >= self.credit_batch.get(src, 1):
                self.host.return_credit(src, self.task_id, owed)
                owed = 0
            self.credit_owed[src] = owed
            self._handle(src, kind, stream, payload)
            now = time.monotonic()
            if coll.dirty and (now - last_flush >= self.linger_s or (not pending and q.empty())):
                coll.flush()
                last_flush = now
            self._run_due(now)

    def _begin_sink(self) -> None:
        """A sink opens its first transaction when its task starts."""
        if self.is_sink:
            self.perform_sink_steps(self.txns.start(self.id_floor + 1))

    def _handle(self, src: int, kind: int, stream: str, payload: Any) -> None:
        """Process one item of input channel ``src``: a batch or a marker."""
        if kind == _DATA:
            self._execute_batch(src, stream, payload)
        elif kind == _BARRIER:
            self._on_barrier(src, payload)
        elif kind == _WATERMARK:
            self._on_watermark(src, payload)
        elif kind == _END_OF_STREAM:
            self._on_end_of_stream(src)

    def _run_due(self, now: float) -> None:
        """A tick and a deferred sink commit, when due."""
        if self.tick_s is not None and now >= self.next_tick:
            self._maybe_tick()
        if self.commit_retry_at is not None and now >= self.commit_retry_at:
            self._complete(self.txns.retry or 0)

    def _return_all_credit(self) -> None:
        owed = self.credit_owed
        for src, n in owed.items():
            if n:
                self.host.return_credit(src, self.task_id, n)
                owed[src] = 0

    def _maybe_tick(self) -> None:
        if self.tick_s is None or self.ticks_paused:
            return
        now = time.monotonic()
        if now >= self.next_tick:
            self.next_tick = now + self.tick_s
            try:
                self.component.on_tick(time.time() * 1000.0)
            except TaskStopped:
                raise
            except Exception as exc:
                self._user_error(exc, None)

    def _execute_batch(self, src: int, stream: str, payload: list[Any]) -> None:
        try:
            source, index = self.source_index[(src, stream)]
        except KeyError:
            log.warning("task %s: dropped a batch from task %s on undeclared stream %r",
                        self.task_id, src, stream)
            return
        if payload.__class__ is tuple:  # combined before the shuffle (runtime/combine.py)
            self._execute_partials(src, payload)
            return
        if self.batch_execute is not None:
            self._execute_columnar(src, stream, payload, source, index)
            return
        execute = self.component.execute
        timing = self.timing
        t0 = time.perf_counter() if timing else 0.0
        n = len(payload)
        tup = None
        # one iterator over the batch: after a user error (at_most_once) the loop resumes
        # with the next tuple; no per-tuple counter
        tuple_cls = self.tuple_classes.get((src, stream))
        if tuple_cls is None:
            tuple_cls = self.tuple_classes[(src, stream)] = Tuple.bound(index, source, stream,
                                                                        src)
        rows = iter(payload)
        refs = sys.getrefcount
        while True:
            try:
                for values in rows:
                    # reuse the last Tuple if only this loop still holds it (the user kept
                    # no reference: 2 = our variable + the argument): a slot store, not an
                    # allocation; a Tuple the user kept is never touched again
                    if tup is None or refs(tup) > 2:
                        tup = tuple_cls(values)  # type: ignore[call-arg]  # Tuple.bound
                    else:
                        tup.values = values
                    execute(tup)
                break
            except TaskStopped:
                raise
            except Exception as exc:
                self._user_error(exc, tup)
                tup = None
        self.metrics.executed += n
        if n and timing:
            self.metrics.observe_ms((time.perf_counter() - t0) * 1000.0 / n, n)

    def _execute_columnar(self, src: int, stream: str, payload: list[Any], source: str,
                          index: dict[str, int]) -> None:
        """Batch API: one ``execute_batch`` call for the whole channel batch."""
        tuple_cls = self.tuple_classes.get((src, stream))
        if tuple_cls is None:
            tuple_cls = self.tuple_classes[(src, stream)] = Tuple.bound(index, source, stream,
                                                                        src)
        batch = Batch(payload, index, source, stream, src, tuple_cls)
        timing = self.timing
        t0 = time.perf_counter() if timing else 0.0
        try:
            self.batch_execute(batch)  # type: ignore[misc]
        except TaskStopped:
            raise
        except Exception as exc:
            self._user_error(exc, batch)
        n = len(payload)
        self.metrics.executed += n
        if n and timing:
            self.metrics.observe_ms((time.perf_counter() - t0) * 1000.0 / n, n)

    def _execute_partials(self, src: int, payload: tuple[list[Any], list[Any], int]) -> None:
        """A batch combined before the shuffle: ``(keys, partial accumulators, records)``,
        folded in by the component's ``execute_partials``; it counts as the records it
        stands for."""
        keys, accs, records = payload
        t0 = time.perf_counter() if self.timing else 0.0
        try:
            self.component.execute_partials(src, keys, accs)
        except TaskStopped:
            raise
        except Exception as exc:
            self._user_error(exc, None)
        self.metrics.executed += records
        if records and self.timing:
            self.metrics.observe_ms((time.perf_counter() - t0) * 1000.0 / records, records)

    def _on_barrier(self, src: int, checkpoint_id: int) -> None:
        if not self.aligner.on_barrier(src, checkpoint_id, time.monotonic()):
            return
        # aligned on every input: the task's barrier steps (barrier/task_barrier.py)
        alignment_ms = self.aligner.alignment_ms(checkpoint_id, time.monotonic())
        kind = barrier_steps.TaskKind.SINK if self.is_sink else barrier_steps.TaskKind.BOLT
        plan = barrier_steps.TaskBarrier(kind, self._stateful(),
                                         isinstance(checkpoint_id, QuiescentBarrier))
        barrier_steps.perform(plan, _BarrierPort(self, alignment_ms), checkpoint_id)

    def _on_watermark(self, src: int, watermark: float) -> None:
        if watermark > self.channel_wm.get(src, float("-inf")):
            self.channel_wm[src] = watermark
        self._advance_watermark()

    def _advance_watermark(self) -> None:
        inf = float("inf")
        low = min((inf if c in self.eos_channels else self.channel_wm.get(c, float("-inf")))
                  for c in self.input_channels) if self.input_channels else inf
        if low > self.watermark:
            self.watermark = low
            try:
                self.component.on_watermark(low)
            except TaskStopped:
                raise
            except Exception as exc:
                self._user_error(exc, None)
            if low != inf:
                self.collector.emit_watermark(low)

    def _on_end_of_stream(self, src: int) -> None:
        self.eos_channels.add(src)
        self._advance_watermark()
        if self.eos_channels >= set(self.input_channels) and not self.inputs_finished:
            self.inputs_finished = True
            try:
                self.component.on_inputs_finished()
            except TaskStopped:
                raise
            except Exception as exc:
                self._user_error(exc, None)
            self.collector.flush()
            self.collector.broadcast(MessageKind.END_OF_STREAM, None)

    # -- chained mode ---------------------------------------------------------------------
    # A bolt task chained into its source task's thread (``runtime/channel_plan.py``): the
    # source's sends to it call run_chained, which runs the batch or marker through
    # _handle right there: no queue, no credit, no hand-off between threads. Barriers,
    # watermarks and end-of-stream stay in order with the data because they travel the
    # same call path. The task keeps a thread of its own (_run_chain_owner) for what does
    # not arrive on its input: the Topology Master's commands (a sink's commit when a
    # checkpoint completes, stop), ticks, deferred sink commits and the linger flush of
    # its own output when its source is idle. chain_lock serialises that thread and the
    # source's calls, so the component never runs in two threads at once.
    def run_chained(self, item: Any) -> None:
        """Process one item of the task's only input channel in the caller's thread.

        Raises:
            TaskStopped: the task is stopping, or its own thread ended (it failed: the
                worker reported why, and the component is cleaned up).
        """
        while not self.chain_ready.wait(READY_POLL_S):
            if self.stopping or self.chain_closed:
                raise TaskStopped
        with self.chain_lock:
            if self.stopping or self.chain_closed:
                raise TaskStopped
            self._handle(*item)
            self._flush_lingered(time.monotonic())

    def _flush_lingered(self, now: float) -> None:
        """Send the task's partly filled output batches once they waited ``linger_s``."""
        if self.collector.dirty and now - self.chain_flushed >= self.linger_s:
            self.collector.flush()
            self.chain_flushed = now

    def _run_chain_owner(self) -> None:
        """The chained task's own thread: commands, ticks, commit retries, idle flushes."""
        with self.chain_lock:
            self._begin_sink()
        self.chain_ready.set()
        coll = self.collector
        while True:
            timeout = self.linger_s if coll.dirty else READY_POLL_S
            if self.tick_s is not None:
                timeout = min(timeout, max(self.next_tick - time.monotonic(), 0.0))
            self.wake.wait(timeout)
            self.wake.clear()
            with self.chain_lock:
                if self.ctrl or self.stopping:
                    self._process_ctrl()
                now = time.monotonic()
                self._flush_lingered(now)
                self._run_due(now)


class _BarrierPort:
    """How this task performs its barrier steps (:class:`~jstormpy.barrier.task_barrier.
    BarrierPort`): the task thread captures (copies of immutable-valued state dicts, the
    rest pickled); serialising the copies, the upload and the ack run on the task's
    snapshot thread (docs/checkpointing.md, asynchronous snapshots). One per barrier: it
    carries the capture from ``capture`` to ``upload``."""

    def __init__(self, task: TaskExecutor, alignment_ms: float,
                 emit_barrier: bool = True) -> None:
        self.task = task
        self.alignment_ms = alignment_ms
        self.emit_barrier = emit_barrier
        self.t0 = time.monotonic()
        self.ticket: SnapshotTicket | None = None
        self.view: SnapshotView | None = None
        self.inc: IncrementalCapture | None = None

    def pause_ticks(self, barrier: int) -> None:
        # gray release: nothing may be emitted on the task's own initiative after the
        # quiescent cut until the upgrade resumes (issue 13 hole 4)
        self.task.ticks_paused = True

    def flush(self, barrier: int) -> None:
        self.task.collector.flush()

    def stage(self, barrier: int) -> bool:
        # False: the external system is down, this checkpoint is given up (FailCheckpoint)
        # and the open transaction is staged at the next barrier; the task keeps running
        task = self.task
        return task.perform_sink_steps(task.txns.barrier(int(barrier)))

    def capture(self, barrier: int, state: bool) -> None:
        task = self.task
        self.t0 = time.monotonic()
        checkpoint_id = int(barrier)
        # the snapshot belongs to this barrier's generation, whenever its upload ends: a
        # late write under a newer generation's name would be that generation's own key
        # for the same checkpoint id (same process, same fencing token), hole 6
        self.ticket = task.snapshots.barrier(checkpoint_id, task.host.generation)
        noted = getattr(task.component, "before_snapshot", None)  # connectors: learn the id
        if callable(noted):
            noted(checkpoint_id)
            if task.collector.dirty:  # what the hook emitted (a multilang bolt's last
                task.collector.flush()  # acks' emits) goes ahead of the barrier
        if not state:
            return
        snap = task._snapshot_dict()
        if task.incremental is not None:  # tracked keyed state: a delta or a base
            self.inc = task.incremental.capture(snap)
        try:
            self.view = capture(snap, task.verified_states)
        except Exception as exc:  # e.g. a Lock in state: name the state and the key
            error = snapshot_pickle_error(task.component_name, task.task_id, snap, exc)
            error.__cause__ = exc
            # reported like a user error on an input, the same "input" every time: the
            # TM recognises it when it repeats right after the restore it caused
            task._user_error(error, _SNAPSHOT_INPUT)
            raise error from exc  # at_most_once takes no snapshots: not reached

    def broadcast(self, barrier: int) -> None:
        if not self.emit_barrier:
            return
        try:  # as received: a quiescent barrier stays one downstream
            self.task.collector.broadcast(MessageKind.BARRIER, barrier)
        except BaseException:  # e.g. the task is stopped: the snapshot thread never
            if self.view is not None:  # gets the view, so its sealed RocksDB writes are
                release(self.view)     # applied here (a later flush would wait for them)
            raise

    def upload(self, barrier: int, state: bool) -> None:
        task, ticket, view = self.task, self.ticket, self.view
        assert ticket is not None  # captured first (barrier/task_barrier.py)
        # "finished" tells the TM this barrier follows the spout's end of stream, so the
        # checkpoint covers everything end of input causes downstream (hole 3)
        finished = task.kind == "spout" and task.eos_sent
        pause_ms = task.metrics.snapshot_pause_ms = (time.monotonic() - self.t0) * 1000.0
        if view is None:
            fault_point("after_snapshot", ticket.checkpoint_id, task.host.worker_id)
            task._report_snapshot(task.snapshots.uploaded(ticket, "", 0), finished,
                                  self.alignment_ms, pause_ms, pause_ms)
            return
        if task.snapshotter is None:
            task.snapshotter = Snapshotter(f"snapshot-{task.task_id}-{task.component_name}")
        alignment_ms, t0, inc = self.alignment_ms, self.t0, self.inc
        task.snapshotter.submit(lambda: task._upload_snapshot(
            ticket, view, alignment_ms, finished, t0, inc, pause_ms))

    def begin_next(self, barrier: int) -> None:
        task = self.task
        task.perform_sink_steps(task.txns.snapshot_taken(int(barrier)))

    def release(self, barrier: int) -> None:
        task = self.task
        released = task.aligner.release()
        if released:
            task.pending.extendleft(reversed(released))

    def pause(self, barrier: int) -> None:
        self.task.paused = True
