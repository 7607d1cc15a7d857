"""Checkpoint coordination in the Topology Master: trigger, acks, the commit point,
timeouts, drain (DESIGN §4, ``docs/checkpointing.md``).

:class:`CheckpointCoordination` is a part of :class:`~jstormpy.master.core.MasterCore`
(a mixin over the same state and lock). State-backend calls never run under the lock:
they go to :class:`BackendIO`, one FIFO thread per TM, and report back by taking the
lock. So a backend that hangs delays checkpoints — each call bounded by
``Config.state_backend_timeout_ms`` — but never ``jstorm status``, ``kill``, heartbeats
or control messages. FIFO order matters: a recovery's listing of completed checkpoints
runs after every metadata write queued before it, so it sees each commit point that
was reached.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jstormpy.errors import BackendError, BackendTimeoutError
from jstormpy.faults import fault_point
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.state_backends.base import COMPLETED_META

if TYPE_CHECKING:
    from jstormpy.master.core import MasterCore

log = logging.getLogger("jstormpy.master")


@dataclass
class PendingCheckpoint:
    """A checkpoint in flight."""

    checkpoint_id: int
    generation: int
    started: float
    started_wall: float
    acks: dict[int, Any] = field(default_factory=dict)
    alignment_ms: float = 0.0


class BackendIO:
    """One thread running the TM's state-backend calls in submission order."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._idle = threading.Condition()
        self._busy = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` after every job submitted before it."""
        with self._idle:
            self._busy += 1
        self._jobs.put(job)

    def wait_idle(self, timeout: float) -> bool:
        """Block until every submitted job ran (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("state-backend job failed")
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()


class CheckpointCoordination:
    """Trigger, ack, complete, abort and time out checkpoints (part of MasterCore)."""

    def _checkpoints_busy(self: MasterCore) -> int:
        """Checkpoints in flight or whose commit point is being written."""
        return len(self.inflight) + len(self.committing)

    def _maybe_final_checkpoint(self: MasterCore) -> None:
        """Every spout finished and nothing in flight: start the final checkpoint now
        rather than at the next tick."""
        if self.state == "running" and self.final_checkpoint is None \
                and not self._checkpoints_busy() \
                and self.spout_tasks and self.finished_spouts >= set(self.spout_tasks):
            self.trigger_checkpoint()

    def trigger_checkpoint(self: MasterCore, force: bool = False) -> int | None:
        """Start a checkpoint now (if running and within the concurrency limit)."""
        with self.lock:
            if self.state != "running" or self.upgrade.holds_checkpoints() \
                    or self.rescale.holds_checkpoints():  # upgrade/rescale hooks
                return None
            if len(self._alive()) < self.config.workers or self.pending_partial_start is not None:
                return None  # at_most_once with a worker being respawned: it could not ack
            if self._checkpoints_busy() >= self.config.max_concurrent_checkpoints and not force:
                return None
            return self._start_checkpoint()[0]

    def _start_checkpoint(self: MasterCore, pause: bool = False) -> tuple[int, float]:
        """Allocate the next checkpoint id, track it in flight and send its trigger
        (``pause``: the spouts stop after the barrier, the gray-release/rescale cut).
        Returns the id and the monotonic time it started. Called under the lock."""
        cid = self.next_checkpoint_id
        self.next_checkpoint_id += 1
        now = time.monotonic()
        self.inflight[cid] = PendingCheckpoint(cid, self.generation, now, time.time())
        self.last_trigger = now
        self._broadcast(trigger=pb.TriggerCheckpoint(checkpoint_id=cid,
                                                     generation=self.generation, pause=pause))
        return cid, now

    def on_checkpoint_ack(self: MasterCore, ack: Any) -> None:
        """A task snapshotted for a checkpoint."""
        with self.lock:
            pending = self.inflight.get(ack.checkpoint_id)
            if pending is None or ack.generation != self.generation:
                return
            pending.acks[ack.task_id] = ack
            pending.alignment_ms = max(pending.alignment_ms, ack.alignment_ms)
            if len(pending.acks) >= len(self.all_tasks):
                self._complete(pending)

    def on_checkpoint_failed(self: MasterCore, msg: Any) -> None:
        """A task could not snapshot: abort that checkpoint, keep running."""
        with self.lock:
            if msg.generation != self.generation:  # a late report of a void generation
                return
            pending = self.inflight.pop(msg.checkpoint_id, None)
            if pending is None:
                return
            self._record(pending, "failed", f"task {msg.task_id}: {msg.reason}")
            self._abort(msg.checkpoint_id, msg.reason)

    def _abort(self: MasterCore, cid: int, reason: str) -> None:
        self._broadcast(abort=pb.AbortCheckpoint(checkpoint_id=cid, generation=self.generation,
                                                 reason=reason))

    def _record(self: MasterCore, pending: PendingCheckpoint, status: str, error: str = "",
                size: int = 0) -> dict[str, Any]:
        duration_ms = round((time.monotonic() - pending.started) * 1000, 2)
        entry = {"id": pending.checkpoint_id, "generation": pending.generation,
                 "status": status, "started_at": pending.started_wall,
                 "duration_ms": duration_ms,
                 "alignment_ms": round(pending.alignment_ms, 2), "size_bytes": size,
                 "error": error,
                 # a completed checkpoint stays restorable until retention deletes it
                 "retained": status == "completed"}
        self.history.append(entry)
        if status == "completed":  # cumulative, unlike the bounded history
            self.checkpoint_durations.observe(duration_ms)
        else:
            log.warning("checkpoint %d %s: %s", pending.checkpoint_id, status, error)
        return entry

    def _stalled_tasks(self: MasterCore, pending: PendingCheckpoint) -> str:
        """The tasks that never acked ``pending``, by component name and task id."""
        missing = [t for t in self.all_tasks if t not in pending.acks]
        return ", ".join(f"{self.task_component.get(t, '?')}[task {t}]"
                         for t in missing) or "none"

    def _complete(self: MasterCore, pending: PendingCheckpoint) -> None:
        """Every task acked: write the commit point (off the lock), then finish."""
        cid = pending.checkpoint_id
        del self.inflight[cid]
        size = sum(a.size_bytes for a in pending.acks.values())
        finished = bool(self.spout_tasks) and all(
            pending.acks[t].finished for t in self.spout_tasks if t in pending.acks)
        if not self.stateful:
            self._finish_complete(pending, finished, size)
            return
        meta = {"generation": pending.generation,
                "tasks": {str(t): {"handle": a.handle, "size": a.size_bytes}
                          for t, a in pending.acks.items()},
                "spouts_finished": finished, "size_bytes": size,
                "completed_at": time.time(),
                "duration_ms": (time.monotonic() - pending.started) * 1000}
        if self.run is not None:  # which run completed it (run_identity.py)
            meta["run"] = self.run.to_dict()
        self.committing[cid] = pending
        self.backend_io.submit(lambda: self._write_commit_point(pending, meta, finished, size))

    def _write_commit_point(self: MasterCore, pending: PendingCheckpoint, meta: dict[str, Any],
                            finished: bool, size: int) -> None:
        """BackendIO thread: write ``_metadata`` (the commit point), then report back."""
        cid = pending.checkpoint_id
        error: BackendError | None = None
        try:
            self.backend.write_metadata(cid, meta)
        except BackendError as exc:
            error = exc
        with self.lock:
            self.committing.pop(cid, None)
            # ids after this one never reuse it, whether or not the write landed
            self.id_floor = max(self.id_floor, cid)
            if error is not None:
                # a write that timed out may still land later: never restore from it
                self.bad_checkpoints.add(cid)
                if pending.generation != self.generation:
                    return
                self._record(pending, "failed", f"metadata write failed: {error}")
                self._abort(cid, f"metadata write failed: {error}")
                if isinstance(error, BackendTimeoutError):
                    self._count_timeout(cid, f"the state backend did not answer: {error}")
                return
            self.completed_floor = max(self.completed_floor, cid)
            self.backend_io.submit(lambda: self._persist_completed_floor(cid))
            fault_point("master_after_metadata", cid)
            if pending.generation != self.generation or self.state != "running":
                return  # complete on storage; the recovery under way lists it after us
            self._finish_complete(pending, finished, size)

    def _finish_complete(self: MasterCore, pending: PendingCheckpoint, finished: bool,
                         size: int) -> None:
        cid = pending.checkpoint_id
        self.timed_out_in_a_row = 0
        entry = self._record(pending, "completed", size=size)
        self.last_completed = entry
        self._broadcast(complete=pb.CompleteCheckpoint(checkpoint_id=cid,
                                                       generation=self.generation))
        if finished and self.final_checkpoint is None:
            self.final_checkpoint = cid
            self.commits_needed = set(self.sink_tasks)
            self._maybe_drained()
        else:
            self._maybe_final_checkpoint()  # spouts finished while this one was in flight
        if self.stateful:
            self.backend_io.submit(self._garbage_collect)

    def _persist_completed_floor(self: MasterCore, cid: int) -> None:
        """BackendIO thread: store the newest completed id beside the generation, so a
        resumed TM also refuses a listing that lacks it (COMPLETED_META)."""
        if cid < self.completed_floor:
            return  # a newer one completed meanwhile and is persisted by its own job
        try:
            self.backend.put_meta(COMPLETED_META, str(cid).encode())
        except BackendError as exc:
            log.warning("cannot persist the completed checkpoint id %d: %s", cid, exc)

    def _garbage_collect(self: MasterCore) -> None:
        try:
            deleted = set(self.backend.garbage_collect(self.config.checkpoints_retained))
        except BackendError as exc:
            log.warning("checkpoint garbage collection failed: %s", exc)
            return
        if deleted:  # status and the UI no longer offer them as restorable
            with self.lock:
                for entry in self.history:
                    if entry["id"] in deleted and entry.get("retained"):
                        entry["retained"] = False

    def on_sink_committed(self: MasterCore, msg: Any) -> None:
        """A sink made a checkpoint's output visible."""
        with self.lock:
            if msg.generation != self.generation:
                return
            self.rescale.on_sink_committed(msg)  # rescale hook
            if self.final_checkpoint is not None and msg.checkpoint_id >= self.final_checkpoint:
                self.commits_needed.discard(msg.task_id)
                self._maybe_drained()

    def _maybe_drained(self: MasterCore) -> None:
        if self.final_checkpoint is not None and not self.commits_needed \
                and self.state == "running":
            log.info("topology %s drained at checkpoint %d", self.name, self.final_checkpoint)
            self._set_state("drained")
            self._broadcast(shutdown=pb.Shutdown(reason="drained"))

    def _expire_checkpoints(self: MasterCore, now: float) -> bool:
        """Abort checkpoints older than ``checkpoint_timeout_ms``; True if that started a
        recovery (``tolerable_failed_checkpoints`` exceeded)."""
        for cid, pending in list(self.inflight.items()):
            if now - pending.started > self.config.checkpoint_timeout_ms / 1000.0:
                del self.inflight[cid]
                stalled = self._stalled_tasks(pending)
                self._record(pending, "timed_out",
                             f"{len(pending.acks)}/{len(self.all_tasks)} tasks acked; "
                             f"stalled: {stalled}")
                self._abort(cid, "timeout")
                if self._count_timeout(cid, f"stalled: {stalled}"):
                    return True
        return False

    def _count_timeout(self: MasterCore, cid: int, why: str) -> bool:
        """One more checkpoint timed out; past the tolerance, start a recovery (True)."""
        self.timed_out_in_a_row += 1
        if self.timed_out_in_a_row <= self.config.tolerable_failed_checkpoints:
            return False
        self.timed_out_in_a_row = 0
        tolerable = self.config.tolerable_failed_checkpoints
        self._begin_recovery(f"checkpoint {cid} timed out, {tolerable + 1} timeout(s) in a row "
                             f"(tolerable_failed_checkpoints={tolerable}); {why}")
        return True
