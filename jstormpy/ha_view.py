"""The HA view: who leads a ``--ha`` run, who stands by, and what ZooKeeper records of it.

A leader's launcher (``jstormpy/cli/ha.py``) sees ZooKeeper; its Topology Master does not
(``master`` does not import the launchers). The launcher writes what it sees into the run
directory every time it refreshes the run record (every second), and the TM's web UI
(``GET /api/status``, ``master/http.py``) shows it as ``jstorm status`` shows ZooKeeper's
answer: the same ``ha`` dictionary (leader, standbys, the recorded run with its epoch).
The file also carries the ``--ha`` URL, which `jstorm status NAME` on the leader's host
asks ZooKeeper with.

Example:
    >>> import tempfile, pathlib
    >>> run_dir = pathlib.Path(tempfile.mkdtemp())
    >>> HaView("zk://10.0.0.5:2181/jstorm", "host-a pid=1", ("host-b pid=2",)).write(run_dir)
    >>> HaView.read(run_dir).standby
    ('host-b pid=2',)
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HA_FILE", "HaView"]

HA_FILE = "ha.json"
"""In the run directory of a ``--ha`` run: its :class:`HaView`."""


@dataclass(frozen=True)
class HaView:
    """One look at ZooKeeper by the leader's launcher.

    Attributes:
        url: The ``--ha`` URL.
        leader: The contender that leads (``HOST pid=N``), None when none is seen.
        standby: The other contenders, next leader first.
        run: The run record as ``deploy.ha.ha_status`` gives it (state, leader, job id,
            epoch, generation, latest checkpoint), or None before the first one.
        seen_at: When the launcher looked (wall-clock seconds).
    """

    url: str
    leader: str | None = None
    standby: tuple[str, ...] = ()
    run: dict[str, Any] | None = None
    seen_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The ``ha`` dictionary of ``jstorm status --json`` and ``/api/status``."""
        return {"url": self.url, "leader": self.leader, "standby": list(self.standby),
                "run": self.run, "seen_at": self.seen_at}

    def write(self, run_dir: Path) -> None:
        """Replace the run directory's view (atomically: a reader sees a whole one)."""
        path = Path(run_dir) / HA_FILE
        tmp = path.with_name(f".{HA_FILE}.{os.getpid()}")
        tmp.write_text(json.dumps(self.to_dict(), sort_keys=True))
        os.replace(tmp, path)

    @classmethod
    def read(cls, run_dir: Path) -> HaView | None:
        """The run directory's view, or None (not a ``--ha`` run, or unreadable)."""
        try:
            data = json.loads((Path(run_dir) / HA_FILE).read_text())
            return cls(str(data["url"]), data.get("leader"), tuple(data.get("standby") or ()),
                       data.get("run"), float(data.get("seen_at") or 0.0))
        except (OSError, ValueError, KeyError, TypeError):
            return None
