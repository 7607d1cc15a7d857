"""Savepoint then restore of a large keyed state, on file:// and hdfs:// (issue 15).

A completed checkpoint holds ``--keys`` keys of managed keyed state, written by the
engine's own checkpoint path (``jstormpy.testing.incremental.TaskCheckpointer``) for a
bolt of 2 tasks, each with the keys of its key-group range. Then, on each backend:

* **savepoint** — :func:`jstormpy.operations.savepoints.write_savepoint`, what ``jstorm savepoint``
  runs once its checkpoint completed: read the task snapshots, split them by key group,
  write the self-contained savepoint (manifest last);
* **import** — :func:`jstormpy.operations.savepoints.import_savepoint`, what ``--from-savepoint``
  runs before the workers start: redistribute by key group to a new parallelism (4) and
  write it as the new run's only completed checkpoint;
* **task restore** — each new task loads its snapshot as a worker does at restore
  (``load_task_snapshot``).

Every key's restored value is compared with the original. The forced checkpoint and the
process start-up of ``jstorm savepoint --stop`` / ``jstorm run --from-savepoint`` are not
included (docs/upgrade.md and docs/checkpointing.md measure those).

    .venv/bin/python -m bench.savepoint_bench [--keys 1000000] [--backends file,hdfs] [--json]

hdfs:// is the WebHDFS protocol test server (``jstormpy.testing.servers.webhdfs``) on localhost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jstormpy import Config, SequenceSpout, TopologyBuilder
from jstormpy.api.topology import Topology
from jstormpy.keygroups import key_group_range
from jstormpy.operations.savepoints import import_savepoint, write_savepoint
from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.state_backends.changelog import key_groups_of, load_task_snapshot
from jstormpy.testing.incremental import KeyedCounter, TaskCheckpointer

MAX_P = 128


def topology(keyed: int) -> Topology:
    b = TopologyBuilder("savepoint-bench")
    b.set_spout("events", SequenceSpout(keys=1, per_key=1), parallelism=1)
    b.set_bolt("keyed", KeyedCounter, parallelism=keyed).fields_grouping("events", ["key"])
    return b.build()


def write_checkpoint(backend: StateBackend, keys: int) -> tuple[dict[str, int], float]:
    """Checkpoint 1 of ``topology(2)``: task 1 (spout) empty, tasks 2-3 the keys of their
    key-group ranges. Returns the original state and the checkpoint time."""
    state = {f"user:{i:09d}": i for i in range(keys)}
    groups = key_groups_of(state, MAX_P)
    ranges = [key_group_range(MAX_P, 2, i) for i in range(2)]
    t0 = time.perf_counter()
    entries = {}
    spout = TaskCheckpointer(backend, Config(), task_id=1, max_parallelism=MAX_P)
    r = spout.checkpoint(1, commit=False)
    entries["1"] = {"handle": r.handle, "size": r.bytes_written}
    for index, rng in enumerate(ranges):
        task = TaskCheckpointer(backend, Config(), task_id=2 + index, key_groups=rng,
                                max_parallelism=MAX_P)
        task.comp.counts.update((k, v) for (k, v), g in zip(state.items(), groups,
                                                             strict=True) if g in rng)
        r = task.checkpoint(1, commit=False)
        entries[str(2 + index)] = {"handle": r.handle, "size": r.bytes_written}
    backend.create_metadata(1, {"generation": 1, "tasks": entries, "completed_at": time.time()})
    return state, time.perf_counter() - t0


def size_of(backend: StateBackend, prefix: str) -> int:
    return sum(len(backend.get_object(k)) for k in backend.list_objects(prefix))


def run(keys: int, base_uri: str) -> dict[str, Any]:
    """Checkpoint, savepoint, import at parallelism 4, task restores; the figures."""
    source = open_backend(f"{base_uri}/checkpoints")
    state, t_checkpoint = write_checkpoint(source, keys)
    checkpoint_bytes = size_of(source, "chk-")
    t0 = time.perf_counter()
    sp_uri = write_savepoint(source, 1, topology(2), f"{base_uri}/savepoint", MAX_P)
    t_savepoint = time.perf_counter() - t0
    sp = open_backend(sp_uri)
    sp_bytes, sp_objects = size_of(sp, ""), len(sp.list_objects(""))
    sp.close()
    target = open_backend(f"{base_uri}/restored")
    new = topology(4)
    t0 = time.perf_counter()
    cid = import_savepoint(sp_uri, new, target, MAX_P)
    t_import = time.perf_counter() - t0
    meta = target.read_metadata(cid)
    restored: dict[str, int] = {}
    t0 = time.perf_counter()
    for task_id in new.task_ids()["keyed"]:
        snap = load_task_snapshot(target, meta["tasks"][str(task_id)]["handle"])
        restored.update(snap["states"].get("counts", {}))
    t_tasks = time.perf_counter() - t0
    for b in (source, target):
        b.close()
    return {"keys": keys, "checkpoint_s": round(t_checkpoint, 2),
            "checkpoint_mb": round(checkpoint_bytes / 1e6, 1),
            "savepoint_s": round(t_savepoint, 2), "savepoint_mb": round(sp_bytes / 1e6, 1),
            "savepoint_objects": sp_objects, "import_s": round(t_import, 2),
            "task_restore_s": round(t_tasks, 2),
            "restore_s": round(t_import + t_tasks, 2), "equal": restored == state}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--backends", default="file,hdfs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jstorm-savepoint-bench-"))
    rows = []
    try:
        for kind in args.backends.split(","):
            if kind == "file":
                rows.append({"backend": "file://", **run(args.keys, f"file://{tmp}/file")})
            elif kind == "hdfs":
                from jstormpy.testing.servers.webhdfs import WebHdfsServer

                with WebHdfsServer(tmp / "hdfs") as server:
                    rows.append({"backend": "hdfs:// (WebHdfsServer)",
                                 **run(args.keys, f"hdfs://127.0.0.1:{server.port}/bench")})
            else:
                raise SystemExit(f"unknown backend {kind!r} (file, hdfs)")
            r = rows[-1]
            print(f"{r['backend']}: {r['keys']:,} keys, checkpoint {r['checkpoint_mb']} MB; "
                  f"savepoint {r['savepoint_s']} s ({r['savepoint_mb']} MB, "
                  f"{r['savepoint_objects']} objects); restore at parallelism 4: import "
                  f"{r['import_s']} s + task restores {r['task_restore_s']} s = "
                  f"{r['restore_s']} s; every key equal: {r['equal']}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        import json

        print("BENCH_JSON " + json.dumps({"rows": rows, "loadavg": os.getloadavg()}))
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
