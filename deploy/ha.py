"""A standby Topology Master: leader election of ``jstorm run --ha`` launchers through ZooKeeper.

Every launcher started with ``--ha zk://HOST:PORT[,HOST:PORT...]/path`` for the same
topology contends in a kazoo ``Election`` under ``/path/NAME/election``. The winner (the
*leader*) starts the Topology Master and the workers; the others (*standbys*) wait. A
leader writes its run to ``/path/NAME/run`` (a :class:`RunRecord`: job id, epoch,
generation, latest completed checkpoint), refreshed while it runs and closed with the
run's end state.

When the leader's ZooKeeper session ends (its host died, its process was killed, it was
cut off from ZooKeeper), the election's next contender leads. Finding the record still
``running``, it *takes the run over*: the same job id, the next epoch, the latest
completed checkpoint restored, a generation above every stored one (the ``--resume``
path). A standby whose leader finished the run exits with the leader's end state.

Fencing (docs/cluster.md, "A standby Topology Master"): while it leads, the launcher
renews a :class:`~jstormpy.leader_lease.LeaderLease` after every answer from ZooKeeper;
the Topology Master writes no commit point and tells no sink to commit without a valid
lease, and not when the state backend names a newer epoch. A leader whose session is
lost kills its Topology Master and workers at once and exits.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from jstormpy.api.errors import ConfigError, JStormError
from jstormpy.leader_lease import LEASE_FRACTION, LeaderLease

__all__ = ["HaSession", "HaUrl", "RunRecord", "RunState", "ha_status"]

log = logging.getLogger("jstormpy.deploy.ha")

DEFAULT_SESSION_TIMEOUT_S = 10.0
"""The ZooKeeper session timeout a launcher asks for (the server may grant less: its
bounds are 2 to 20 ticks); the leader lease is a share of the granted one."""


@dataclass(frozen=True)
class HaUrl:
    """``zk://HOST:PORT[,HOST:PORT...]/path``: the ZooKeeper ensemble and the root path.

    Example:
        >>> HaUrl.parse("zk://10.0.0.5:2181,10.0.0.6:2181/jstorm").topology_path("wc")
        '/jstorm/wc'
    """

    hosts: str
    root: str

    @classmethod
    def parse(cls, url: str) -> HaUrl:
        parts = urlsplit(url)
        if parts.scheme != "zk" or not parts.netloc:
            raise ConfigError(f"--ha {url!r}: expected zk://HOST:PORT[,HOST:PORT...]/path")
        root = "/" + parts.path.strip("/")
        if root == "/":
            raise ConfigError(f"--ha {url!r}: give a path to keep the topologies under, "
                              "e.g. zk://HOST:2181/jstorm")
        return cls(parts.netloc, root)

    def topology_path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def __str__(self) -> str:
        return f"zk://{self.hosts}{self.root}"


class RunState(Enum):
    """A run's state as the leader records it in ZooKeeper."""

    RUNNING = "running"
    DRAINED = "drained"
    STOPPED = "stopped"  # killed on request (jstorm kill, savepoint --stop)
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self is not RunState.RUNNING


@dataclass(frozen=True)
class RunRecord:
    """``/path/NAME/run``: the run the current (or last) leader drives."""

    state: RunState
    leader: str
    job_id: str = ""
    epoch: int = 0
    generation: int = 0
    checkpoint: int | None = None
    updated: float = 0.0

    def to_json(self) -> bytes:
        return json.dumps(self.status_dict(), sort_keys=True).encode()

    def status_dict(self) -> dict[str, Any]:
        """JSON-ready, as `jstorm status` and the web UI show it."""
        return {**asdict(self), "state": self.state.value}

    @classmethod
    def from_json(cls, raw: bytes | None) -> RunRecord | None:
        if not raw:
            return None
        try:
            data = json.loads(raw.decode())
            return cls(RunState(data["state"]), str(data["leader"]), str(data.get("job_id", "")),
                       int(data.get("epoch", 0)), int(data.get("generation", 0)),
                       data.get("checkpoint"), float(data.get("updated", 0.0)))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


def launcher_identity() -> str:
    """``host pid=N``: who a contender is, in `jstorm status`."""
    return f"{socket.gethostname()} pid={os.getpid()}"


class HaSession:
    """One launcher's ZooKeeper session for one topology: contend, lead, renew the lease.

    Args:
        url: The ``--ha`` URL.
        name: The topology's name.
        session_timeout_s: What to ask ZooKeeper for (``Config``-free: the CLI's
            ``--ha-session-timeout``).
    """

    def __init__(self, url: str | HaUrl, name: str,
                 session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S) -> None:
        from kazoo.client import KazooClient

        self.url = url if isinstance(url, HaUrl) else HaUrl.parse(url)
        self.name = name
        self.base = self.url.topology_path(name)
        self.identity = launcher_identity()
        self.zk = KazooClient(hosts=self.url.hosts, timeout=session_timeout_s)
        self._asked_s = session_timeout_s
        self._granted_s = 0.0
        self._capture_granted_timeout()
        self.election = self.zk.Election(f"{self.base}/election", self.identity)
        self.lost = threading.Event()
        self.lost_reason = ""
        self._on_lost: Callable[[str], None] | None = None
        self._renewer: threading.Thread | None = None
        self._stop_renewing = threading.Event()
        self._closing = False  # close() ends the session on purpose: that is no loss
        self._record_version = -1  # the record's version when this launcher started

    # -- connection ---------------------------------------------------------------------------
    def connect(self, timeout_s: float = 30.0) -> None:
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            self.zk.start(timeout=timeout_s)
        except KazooTimeoutError as exc:
            raise JStormError(f"--ha: no ZooKeeper answers at {self.url.hosts} within "
                              f"{timeout_s:.0f} s") from exc
        self.zk.add_listener(self._state_changed)
        self.zk.ensure_path(f"{self.base}/election")
        stat = self.zk.exists(f"{self.base}/run")
        self._record_version = stat.version if stat is not None else -1

    @property
    def session_timeout_s(self) -> float:
        """The session timeout ZooKeeper granted (what the lease is based on): the server
        may grant less than asked (its maximum is 20 ticks)."""
        return self._granted_s or self._asked_s

    def _capture_granted_timeout(self) -> None:
        """kazoo logs the granted session timeout but keeps only a read timeout of 2/3 of
        it, returned by its connection's ``_connect``; wrap that to learn it. Without the
        hook (another kazoo), the asked-for timeout counts (documented: keep it within the
        server's bounds)."""
        connection = getattr(self.zk, "_connection", None)
        connect = getattr(connection, "_connect", None)
        if connection is None or connect is None:
            return

        def capture(*args: Any) -> Any:
            result = connect(*args)
            self._granted_s = float(result[0]) * 1.5 / 1000.0
            return result

        connection._connect = capture

    def close(self) -> None:
        self._closing = True
        self._on_lost = None
        self._stop_renewing.set()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001 - closing a session that may be gone already
            log.debug("closing the ZooKeeper session", exc_info=True)

    def _state_changed(self, state: Any) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST and not self._closing:
            self._lose("its ZooKeeper session expired")
        elif state == KazooState.SUSPENDED:
            log.warning("ha: connection to ZooKeeper suspended; the leader lease runs out "
                        "unless it comes back")

    def _lose(self, reason: str) -> None:
        if self.lost.is_set():
            return
        self.lost_reason = reason
        self.lost.set()
        callback = self._on_lost
        if callback is not None:  # never block kazoo's event thread
            threading.Thread(target=callback, args=(reason,), name="ha-lost",
                             daemon=True).start()

    # -- the run record ------------------------------------------------------------------------
    def read_record(self) -> tuple[RunRecord | None, int]:
        """The run record and its version (-1: none)."""
        from kazoo.exceptions import NoNodeError

        try:
            raw, stat = self.zk.get(f"{self.base}/run")
        except NoNodeError:
            return None, -1
        return RunRecord.from_json(raw), stat.version

    def write_record(self, record: RunRecord) -> None:
        """Write the run record (leader only)."""
        from kazoo.exceptions import NoNodeError

        path = f"{self.base}/run"
        try:
            self.zk.set(path, record.to_json())
        except NoNodeError:
            self.zk.create(path, record.to_json(), makepath=True)

    def finished_since_start(self) -> RunRecord | None:
        """The record, if a leader closed the run after this launcher started."""
        record, version = self.read_record()
        if record is not None and record.state.final and version > self._record_version:
            return record
        return None

    # -- election ------------------------------------------------------------------------------
    def contenders(self) -> list[str]:
        """The launchers in the election, leader first."""
        return list(self.election.contenders())

    def lead(self, work: Callable[[], int], on_standby: Callable[[str], None]) -> int | None:
        """Block until this launcher leads, then run ``work`` (the leader's whole run) and
        return its result; None when a leader closed the run while this one waited."""
        from kazoo.recipe.watchers import DataWatch

        finished = threading.Event()

        def watch(data: bytes | None, stat: Any) -> bool:  # kazoo's thread: no blocking
            if finished.is_set():
                return False
            record = RunRecord.from_json(data)
            if record is not None and record.state.final and stat is not None \
                    and stat.version > self._record_version:
                finished.set()
                self.election.cancel()
                return False
            return True

        DataWatch(self.zk, f"{self.base}/run", watch)
        others = [c for c in self.contenders() if c != self.identity]
        if others:
            on_standby(others[0])
        result: list[int] = []

        def leading() -> None:
            if self.finished_since_start() is None:
                result.append(work())
        try:
            self.election.run(leading)
        except Exception as exc:
            from kazoo.exceptions import CancelledError

            if not isinstance(exc, CancelledError):
                raise
        finished.set()
        return result[0] if result else None

    # -- the lease -----------------------------------------------------------------------------
    def start_lease(self, lease: LeaderLease, on_lost: Callable[[str], None]) -> None:
        """Renew ``lease`` after every ZooKeeper answer (leader only), now and every
        tenth of the session timeout; call ``on_lost`` (once, on another thread) when the
        session is lost or the lease runs out."""
        self._on_lost = on_lost
        timeout = self.session_timeout_s
        self._renew(lease, timeout)
        if not lease.valid():
            raise JStormError("--ha: ZooKeeper did not answer the first lease renewal")
        self._renewer = threading.Thread(target=self._renew_loop, args=(lease, timeout),
                                         name="ha-lease", daemon=True)
        self._renewer.start()

    def _renew(self, lease: LeaderLease, timeout: float) -> None:
        sent = time.monotonic()
        try:
            self.zk.exists_async(f"{self.base}/election").get(timeout=timeout * LEASE_FRACTION)
        except Exception:  # noqa: BLE001 - no answer: the lease is simply not renewed
            return
        if not self.lost.is_set():
            lease.renew(sent, timeout)

    def _renew_loop(self, lease: LeaderLease, timeout: float) -> None:
        while not self._stop_renewing.wait(timeout / 10):
            self._renew(lease, timeout)
            if not lease.valid():
                self._lose("its leader lease ran out (no answer from ZooKeeper within "
                           f"{timeout * LEASE_FRACTION:.1f} s)")
            if self.lost.is_set():
                lease.revoke()
                return

    def stop_lease(self, lease: LeaderLease) -> None:
        self._on_lost = None  # the run is over: nothing left to kill
        self._stop_renewing.set()
        if self._renewer is not None:
            self._renewer.join(5)
        lease.revoke()


def ha_status(url: str, name: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """What `jstorm status NAME --ha URL` shows: leader, standbys, the run record."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError
    from kazoo.handlers.threading import KazooTimeoutError

    ha = HaUrl.parse(url)
    zk = KazooClient(hosts=ha.hosts, timeout=timeout_s)
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError as exc:
        raise JStormError(f"no ZooKeeper answers at {ha.hosts}") from exc
    try:
        base = ha.topology_path(name)
        try:
            contenders = list(zk.Election(f"{base}/election").contenders())
        except NoNodeError:
            contenders = []
        try:
            raw, _stat = zk.get(f"{base}/run")
        except NoNodeError:
            raw = b""
        record = RunRecord.from_json(raw)
    finally:
        zk.stop()
        zk.close()
    return {"url": str(ha), "leader": contenders[0] if contenders else None,
            "standby": contenders[1:],
            "run": None if record is None else record.status_dict()}
