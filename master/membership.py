"""The Topology Master's workers: who is connected, who registers, who is lost.

``Membership`` holds one :class:`~jstormpy.master.session.WorkerSession` per worker id and
decides what a registration or a loss means for the set of workers: a worker outside the
plan is told to stop, a zombie with a stale generation is fenced off, a newer registration
replaces the older session, a newer launch attempt supersedes the older ones. What such
an event means for the generation (a recovery, a Prepare, the first start) is the
recovery's (``recovery.MasterRecovery``): this class asks for it through the narrow
:class:`MembershipHost` methods, which ``MasterCore`` implements (public members only).
Everything runs under the TM's one lock.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any, Protocol

from jstormpy.api.config import Config
from jstormpy.api.errors import JStormError
from jstormpy.master.session import WorkerSession
from jstormpy.master.topology_state import TERMINAL_STATES, TopologyState
from jstormpy.proto import jstorm_pb2 as pb

log = logging.getLogger("jstormpy.master")


class MembershipHost(Protocol):
    """What membership uses of the rest of the Topology Master (``MasterCore``): its lock,
    where the topology is, and what a worker's arrival or loss means to the recovery and
    the quiescent operations."""

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The TM's one lock (re-entrant): every event runs under it."""

    @property
    def state(self) -> TopologyState:
        """Where the topology is."""

    @property
    def config(self) -> Config:
        """The running configuration (its ``workers``: the plan's worker ids)."""

    @property
    def generation(self) -> int:
        """The TM's current generation."""

    def note_generation(self, reported: int) -> None:
        """A registering worker reported generation ``reported``: the TM's counter is at
        least that from now on."""

    def part_of_recovery(self, session: WorkerSession) -> bool:
        """``session``'s worker registered before the recovery under way began: its loss
        is a knock-on of the failure that recovery handles."""

    def worker_replaced(self, worker_id: int) -> None:
        """A live worker's session was replaced by a newer registration."""

    def worker_failed(self, worker_id: int, reason: str, knock_on: bool) -> None:
        """Worker ``worker_id`` is gone (``knock_on``: part of the recovery under way)."""

    def operation_takes(self, session: WorkerSession, reported_generation: int) -> bool:
        """A rescale or gray release under way takes this registration over."""

    def worker_joined(self, session: WorkerSession) -> None:
        """A worker registered: what that means for the generation (start, prepare)."""


class Membership:
    """The workers' sessions of one topology, and the events that change them."""

    def __init__(self, host: MembershipHost) -> None:
        self.host = host
        self.sessions: dict[int, WorkerSession] = {}

    # -- views ---------------------------------------------------------------------------------
    def alive_sessions(self) -> list[WorkerSession]:
        """The sessions of the workers that are alive."""
        return [s for s in self.sessions.values() if s.alive]

    def session(self, worker_id: int) -> WorkerSession | None:
        """The session of worker ``worker_id`` (alive or not), if it ever registered."""
        return self.sessions.get(worker_id)

    def broadcast(self, **body: Any) -> None:
        """Send one control message (``body``: the oneof field) to every live worker."""
        for s in self.alive_sessions():
            s.send(**body)

    def peer_addresses(self) -> list[Any]:
        """The data-plane address of every live worker, as sent in ``Peers``."""
        return [pb.WorkerAddress(worker_id=s.worker_id, host=s.host, port=s.port)
                for s in self.alive_sessions()]

    def any_lost(self) -> bool:
        """Some worker that registered is known to be dead."""
        return any(not s.alive for s in self.sessions.values())

    def forget_surplus_workers(self) -> None:
        """Drop the sessions of worker ids the configuration no longer has (a rescale to
        fewer workers stopped them for good)."""
        for wid in [w for w in self.sessions if w >= self.host.config.workers]:
            del self.sessions[wid]

    # -- events --------------------------------------------------------------------------------
    def register(self, session: WorkerSession, reported_generation: int) -> None:
        """A worker opened its control stream."""
        with self.host.lock:
            workers = self.host.config.workers
            if session.worker_id < 0:
                raise JStormError(f"worker id {session.worker_id} is negative")
            if session.worker_id >= workers:
                # not part of the plan, e.g. a surplus worker of a rescale to fewer workers
                # that outlived a TM crash after the commit point: tell it to stop for good
                # (exit 0: the launcher does not restart it) rather than let it retry
                log.warning("worker %d (pid %d) is not part of the plan (%d workers): told "
                            "to stop", session.worker_id, session.pid, workers)
                session.alive = False
                session.send(shutdown=pb.Shutdown(
                    reason=f"worker id {session.worker_id} is not part of the plan: the "
                           f"topology runs {workers} workers", exit_code=0))
                return
            old = self.sessions.get(session.worker_id)
            generation = self.host.generation
            if old is not None and old.alive and 0 < reported_generation < generation:
                # a zombie (frozen past its timeout, replaced meanwhile) reconnecting with
                # the generation it froze in: fenced off, the live worker stays
                log.warning("worker %d (pid %d) registered with stale generation %d < %d: "
                            "fenced off", session.worker_id, session.pid,
                            reported_generation, generation)
                session.alive = False
                session.send(shutdown=pb.Shutdown(reason="fenced: stale generation"))
                return
            if session.launch_attempt:
                self._supersede_older_launches(session.launch_attempt)
            if old is not None and old.alive:
                old.alive = False
                old.send(shutdown=pb.Shutdown(reason="replaced by a newer registration"))
                self.host.worker_replaced(session.worker_id)
            self.sessions[session.worker_id] = session
            self.host.note_generation(reported_generation)
            log.info("worker %d registered (pid %d, data port %d)", session.worker_id,
                     session.pid, session.port)
            if self.host.state in TERMINAL_STATES:
                session.send(shutdown=pb.Shutdown(reason=f"topology is {self.host.state}"))
                return
            if self.host.operation_takes(session, reported_generation):  # rescale, upgrade
                return
            self.host.worker_joined(session)

    def _supersede_older_launches(self, attempt: int) -> None:
        """On Spark a failed barrier stage is resubmitted whole: once a worker of launch
        attempt N registers, every worker of an earlier attempt is on its way out, even if its
        control stream has not closed yet. Each is dropped now -- a knock-on of the failure
        under recovery (no second restart, the first reason kept) -- so that the recovery
        waits for the new attempt's workers instead of completing with a doomed one and
        being followed by a second recovery when it is replaced."""
        for old in self.alive_sessions():
            if 0 < old.launch_attempt < attempt:
                old.alive = False
                old.send(shutdown=pb.Shutdown(reason=f"superseded by launch attempt {attempt}"))
                knock_on = self.host.part_of_recovery(old)
                log.warning("worker %d (pid %d, launch attempt %d) superseded by launch "
                            "attempt %d%s", old.worker_id, old.pid, old.launch_attempt, attempt,
                            " (part of the failure being recovered)" if knock_on else "")
                self.host.worker_failed(old.worker_id, f"worker {old.worker_id} lost: "
                                        f"superseded by launch attempt {attempt}", knock_on)

    def worker_lost(self, session: WorkerSession, reason: str) -> None:
        """A control stream ended or heartbeats stopped."""
        with self.host.lock:
            known = self.sessions.get(session.worker_id)
            if known is None or known is not session or not session.alive:
                return
            session.alive = False
            if self.host.state in TERMINAL_STATES:  # it told its workers to go: expected
                log.info("worker %d left: %s (topology %s)", session.worker_id, reason,
                         self.host.state)
                return
            # a worker that registered before the recovery under way began goes down with
            # the failure that recovery handles (on Spark a lost task fails the whole
            # barrier stage): it costs no second restart and keeps the first reason
            knock_on = self.host.part_of_recovery(session)
            log.warning("worker %d lost: %s%s", session.worker_id, reason,
                        " (part of the failure being recovered)" if knock_on else "")
            self.host.worker_failed(session.worker_id,
                                    f"worker {session.worker_id} lost: {reason}", knock_on)
