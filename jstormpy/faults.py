"""Fault-injection points: SIGKILL this process at a precise protocol moment.

Armed through the environment (set by :mod:`jstormpy.testing.chaos`), never in normal
runs: ``JSTORM_FAULTS="point@checkpoint[@worker],..."`` and ``JSTORM_FAULT_DIR`` (where a
marker file makes each fault fire once, so the restarted process does not die again).

Flags (no checkpoint id): ``drop_throttle_release`` (the TM never sends a throttle
release; spouts must resume when their lease expires).

Points: ``after_snapshot`` (a task stored its snapshot, the checkpoint is in flight),
``sink_before_commit`` / ``sink_after_commit`` (a sink got complete(n)),
``master_after_metadata`` (the TM wrote checkpoint n's metadata — the commit point — but
has not told anyone), ``rescale_after_commit`` (the TM wrote the rescaled checkpoint's
metadata, the new layout's files are still pending, no worker was told: arm it without a
checkpoint id).
Incremental checkpoints add ``after_segment`` (a task wrote its
segment for checkpoint n — a base when compacting — but not its snapshot) and
``master_during_segment_gc`` (the TM, after checkpoint n completed, deleted some of the
unreferenced segments but not all; with a RocksDB store the unreferenced SST files too).
A RocksDB store with incremental checkpoints adds ``during_sst_upload`` (a task uploaded
the first new SST file of checkpoint n, not the rest nor its snapshot). These three are
not in :data:`POINTS`, so seeded random schedules stay as they were.

Routes (``JSTORM_CHAOS_ROUTES``, a JSON object set by :mod:`jstormpy.testing.chaos` when it
puts fault-injecting TCP proxies on the network): ``{"A>B": [host, port], "A>tm": [...]}``
sends worker A's data connections to worker B, or its control channel to the Topology
Master, through that proxy instead of straight to the peer. Unset: no effect.
"""

from __future__ import annotations

import json
import os
import signal
from functools import lru_cache

ROUTES_ENV = "JSTORM_CHAOS_ROUTES"

POINTS = ("after_snapshot", "sink_before_commit", "sink_after_commit", "master_after_metadata",
          "rescale_after_commit")


def fault_enabled(flag: str) -> bool:
    """Whether a behavioural fault flag (e.g. ``drop_throttle_release``) is armed."""
    return any(name == flag for name, _cid, _wid in _armed())


@lru_cache(maxsize=1)
def _armed() -> tuple[tuple[str, int, int | None], ...]:
    spec = os.environ.get("JSTORM_FAULTS", "")
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        fields = part.split("@")
        worker = int(fields[2]) if len(fields) > 2 else None
        out.append((fields[0], int(fields[1]) if len(fields) > 1 else 0, worker))
    return tuple(out)


def fault_point(point: str, checkpoint_id: int, worker_id: int | None = None) -> None:
    """SIGKILL this process if ``point`` is armed for this checkpoint (and worker), once."""
    armed = _armed()
    if not armed:
        return
    for name, cid, wid in armed:
        if name == point and cid == checkpoint_id and (wid is None or wid == worker_id):
            folder = os.environ.get("JSTORM_FAULT_DIR", "")
            if folder:
                marker = os.path.join(folder, f"{name}@{cid}@{wid}")
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
            os.kill(os.getpid(), signal.SIGKILL)


@lru_cache(maxsize=1)
def _routes() -> dict[str, tuple[str, int]]:
    spec = os.environ.get(ROUTES_ENV, "")
    if not spec:
        return {}
    return {k: (str(v[0]), int(v[1])) for k, v in json.loads(spec).items()}


def chaos_route(src_worker: int, dst: int | str, address: tuple[str, int]) -> tuple[str, int]:
    """Where worker ``src_worker`` must connect to reach ``dst`` (a worker id, or ``"tm"``):
    a fault-injecting proxy if a route is armed (see module doc), else ``address``."""
    routes = _routes()
    return routes.get(f"{src_worker}>{dst}", address) if routes else address
