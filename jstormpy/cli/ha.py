"""``jstorm run FILE --ha zk://HOST:PORT/path``: lead the run, or stand by to take it over.

The ZooKeeper side (election, run record, lease renewal) is ``deploy/ha.py``; this is the
launcher's part: what a leader starts (a fresh run, or the takeover of a run whose record
says it is still running), what it records while it runs (the run record in ZooKeeper, and
what it sees there for its TM's web UI: jstormpy/ha_view.py), and what a launcher does when it
loses its session (kill its Topology Master and workers at once, exit 3). See
docs/cluster.md, "A standby Topology Master".
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import JStormError
from jstormpy.api.failure import FINAL_STATUS_FILE
from jstormpy.cli.client import jstorm_home
from jstormpy.ha_view import HaView
from jstormpy.leader_lease import LEADER_LEASE_ENV, LEASE_FILE, LeaderLease
from jstormpy.master.topology_state import TopologyState

__all__ = ["LOST_EXIT_CODE", "Leadership", "run_with_ha"]

LOST_EXIT_CODE = 3
"""``jstorm run --ha`` exit status when it lost its leadership (ZooKeeper session)."""

RECORD_EVERY_S = 1.0
"""How often a leader refreshes its run record (latest checkpoint, generation, epoch)."""


@dataclass
class Leadership:
    """What a leader hands ``launch_run``: resume or not, the TM's environment (its lease),
    and the hook it calls with the handle once the TM serves."""

    session: Any  # deploy.ha.HaSession
    resume: bool
    lease: LeaderLease
    env: dict[str, str] = field(default_factory=dict)
    handle: Any = None
    stop: threading.Event = field(default_factory=threading.Event)
    last_status: dict[str, Any] = field(default_factory=dict)

    def started(self, handle: Any) -> None:
        from jstormpy.deploy.ha import RunState

        self.handle = handle
        if handle.run_dir is not None:  # the URL for `jstorm status`, at once
            HaView(str(self.session.url), self.session.identity).write(handle.run_dir)
        self._record(RunState.RUNNING)
        threading.Thread(target=self._refresh, name="ha-record", daemon=True).start()

    def _record(self, state: Any) -> None:
        from jstormpy.deploy.ha import RunRecord

        if self.session.lost.is_set():
            return
        try:
            status = self.handle.status()
            self.last_status = status
        except JStormError:
            status = self.last_status
        run = status.get("run") or {}
        last = status.get("last_completed_checkpoint") or {}
        record = RunRecord(state, self.session.identity, str(run.get("job_id", "")),
                           int(run.get("epoch", 0)), int(status.get("generation", 0)),
                           last.get("id"), time.time())
        try:
            self.session.write_record(record)
            contenders = self.session.contenders()
        except Exception as exc:  # noqa: BLE001 - ZooKeeper away: the lease handles it
            print(f"ha: could not record the run in ZooKeeper: {exc}", flush=True)
            return
        if self.handle.run_dir is not None:  # for the TM's web UI (jstormpy/ha_view.py)
            HaView(str(self.session.url), contenders[0] if contenders else None,
                   tuple(contenders[1:]), record.status_dict()).write(self.handle.run_dir)

    def _refresh(self) -> None:
        from jstormpy.deploy.ha import RunState

        while not self.stop.wait(RECORD_EVERY_S):
            self._record(RunState.RUNNING)

    def finish(self) -> None:
        """Record the run's end state (drained, stopped, failed) from its final status."""
        from jstormpy.deploy.ha import RunState

        self.stop.set()
        if self.handle is None or self.handle.run_dir is None:
            return
        final = self.handle.run_dir / FINAL_STATUS_FILE
        if not final.exists():
            return  # ended without a final state (lost, interrupted): the run goes on
        state = json.loads(final.read_text()).get("state")
        ends = {TopologyState.DRAINED: RunState.DRAINED, TopologyState.KILLED: RunState.STOPPED,
                TopologyState.FAILED: RunState.FAILED}
        if state in ends:
            self._record(ends[state])


def run_with_ha(args: argparse.Namespace, name: str,
                launch: Callable[[Leadership], int]) -> int:
    """Contend for the leadership of ``name``'s run; as leader, ``launch`` it (a takeover
    when the run record says running); as standby, wait. Returns the exit status."""
    from jstormpy.deploy.ha import HaSession

    session = HaSession(args.ha, name, args.ha_session_timeout)
    session.connect()
    print(f"ha: {session.identity} joined the election for {name!r} at {session.url} "
          f"(session timeout {session.session_timeout_s:.1f} s)", flush=True)
    lease = LeaderLease(jstorm_home() / "runs" / name / LEASE_FILE)
    lease.path.parent.mkdir(parents=True, exist_ok=True)
    lease.revoke()  # an earlier leader's lease here is not this one's

    def lead() -> int:
        record, _version = session.read_record()
        takeover = record is not None and not record.state.final
        resume = bool(args.resume) or takeover
        leadership = Leadership(session, resume, lease, {LEADER_LEASE_ENV: str(lease.path)})

        def lost(reason: str) -> None:
            print(f"ha: lost the leadership ({reason}): killing this Topology Master and its "
                  "workers; a standby takes the run over", flush=True)
            lease.revoke()
            if leadership.handle is not None:
                leadership.handle.abandon(f"lost the leadership: {reason}")

        session.start_lease(lease, lost)
        took = time.monotonic()
        if takeover and record is not None:
            print(f"ha: leader; taking over run {record.job_id} (epoch {record.epoch}, "
                  f"generation {record.generation}, last checkpoint #{record.checkpoint}) "
                  f"from {record.leader}", flush=True)
        else:
            print(f"ha: leader; starting {'a resumed' if resume else 'a fresh'} run",
                  flush=True)
        try:
            code = launch(leadership)
        except JStormError:
            if session.lost.is_set():
                return LOST_EXIT_CODE
            leadership.finish()
            raise
        finally:
            session.stop_lease(lease)
        if session.lost.is_set():
            return LOST_EXIT_CODE
        leadership.finish()
        print(f"ha: the run ended after {time.monotonic() - took:.1f} s as leader", flush=True)
        return code

    def standby(leader: str) -> None:
        print(f"ha: standby; {leader} leads {name!r}", flush=True)

    try:
        result = session.lead(lead, standby)
        if result is None:
            done = session.finished_since_start()
            print(f"ha: the leader closed the run ({done.state.value if done else 'ended'}); "
                  "nothing to take over", flush=True)
            return 0
        return result
    finally:
        session.close()
