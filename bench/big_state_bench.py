"""Big keyed state on RocksDB with incremental checkpoints (issue 25, benchmarks 1-3).

A keyed job on a ``LocalCluster`` with 2 workers and
``Config(state_store="rocksdb", incremental_checkpoints=True)``, a checkpoint every
``--interval-ms`` (5 s), a ``file://`` state backend and the RocksDB databases in a
directory of the run. A spout (2 tasks) emits key numbers, a bolt (2 tasks, fields
grouping on the key) writes ``--value-bytes`` (160) bytes per key into
``self.state("kv")``: a slice of one 4 MB random buffer at an offset that depends on the
key and its version, so the values are incompressible and cost nothing to make.

1. *Load*: every key ``0 .. --keys - 1`` once (20,000,000 by default: >= 3 GB on disk).
   Reported: records/s, each worker's peak RSS (psutil on the worker's pid, children
   included, sampled every 0.5 s all run long), disk used by the RocksDB directories
   (hard links counted once) and by the backend, checkpoint bytes and duration.
2. *Incremental*: rounds of ``--changed`` (1 %) of the keys, each a fresh random sample,
   new values. A round starts right after the spout's snapshot of a checkpoint and the
   spout then waits for the next checkpoint, so a checkpoint holds at most one round;
   those holding a whole round are measured (``--intervals`` of them): bytes the
   checkpoint wrote against a full checkpoint of the same state (the SST files and task
   snapshots it references), duration p50/p99 (trigger to completed, the TM's figure) and
   the task-thread pause p50/p99: in the bolt, the time from the barrier (the engine's
   ``before_snapshot`` hook, called as the task thread starts its snapshot) to the next
   record it executes, i.e. the pause plus the wait for that record (an upper bound);
   beside it the engine's own figure, p50/p99 over the bolt tasks: each checkpoint's
   ``task_pause_ms`` in the TM's checkpoint history (the snapshot's synchronous part plus
   any wait for the barrier's RocksDB apply, docs/state-stores.md). The hook only notes
   the time: whatever it did would count in the engine's figure (it used to rewrite the
   bolt's log file there, which was the whole tail of that figure).
3. *Recovery*: SIGKILL one worker; the time from the kill until every bolt task executes
   records again (its ``executed`` counter restarts in the new generation), first with
   local recovery (the default: the restarted worker takes its SST files from its local
   copies), then without: right after the kill the bench deletes the workers' local
   copies (``<state dir>/worker-<id>/local``), so every file is downloaded from the
   backend. The workers' log lines say where the files came from; they are printed.

Progress lines (keys, records/s, RSS, disk, last checkpoint) are printed every
``--progress-s`` so a run stopped early still yields figures at the N it reached.

    python -m bench.big_state_bench [--keys 20000000] [--intervals 10] [--json]
    python -m bench.big_state_bench --keys 500000          # a minute or two
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cloudpickle
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import bench_home, emit_json, pct  # noqa: E402

from jstormpy import Bolt, Config, JStormError, LocalCluster, Spout, TopologyBuilder  # noqa: E402
from jstormpy.state_backends.file import FileBackend  # noqa: E402
from jstormpy.state_backends.shared_files import referenced_files  # noqa: E402

BUFFER_BYTES = 4 << 20
RESTORE_LINE = re.compile(r"task (\d+): opened the RocksDB checkpoint of .*?: (\d+ SST file.*)$")
SPOUT_CHUNK = 200


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


# -- components --------------------------------------------------------------------------------
class KeySpout(Spout):
    """Task ``i`` of ``p`` owns keys ``i, i + p, ...``. Phase 1 emits each once, in order;
    phase 2 emits rounds, each a random ``changed`` share of its keys, one round per
    checkpoint interval at most (it waits for the snapshot after each round). Emits
    ``(key, version)``; its position is its snapshot (exactly-once replay)."""

    outputs = ("key", "version")

    def __init__(self, keys: int, changed: float, result_dir: str) -> None:
        self.keys = keys
        self.changed = changed
        self.result_dir = result_dir
        self.offset = 0          # phase 1: keys emitted by this task
        self.round = 0           # phase 2: the round being emitted
        self.pos = 0             # phase 2: its records emitted
        self.waiting = False     # phase 2: round done, waiting for the next snapshot

    def open(self, conf, context):
        self.par = context.parallelism
        self.idx = context.task_index
        self.mine = len(range(self.idx, self.keys, self.par))
        self.per_round = max(1, int(self.mine * self.changed))
        self.picks: list[int] = []
        self.picks_round = -1
        self.emitted_since = 0   # records since the last snapshot
        self.log_path = Path(self.result_dir) / f"spout-{context.task_id}.json"
        self.cp_log: dict[str, Any] = {"task": context.task_id, "checkpoints": {},
                                    "loaded_at": None}
        if self.log_path.exists():  # a restarted worker keeps the earlier entries
            self.cp_log = json.loads(self.log_path.read_text())

    def _round_picks(self) -> list[int]:
        if self.picks_round != self.round:
            rng = random.Random(self.round * 1_000 + self.idx)
            self.picks = rng.sample(range(self.mine), self.per_round)
            self.picks_round = self.round
        return self.picks

    def next_tuple(self):
        emit = self.emit
        par, idx = self.par, self.idx
        if self.offset < self.mine:  # phase 1
            end = min(self.mine, self.offset + SPOUT_CHUNK)
            for j in range(self.offset, end):
                emit((idx + j * par, 0))
            self.emitted_since += end - self.offset
            self.offset = end
            if end == self.mine:
                self.cp_log["loaded_at"] = time.time()
                _write_json(self.log_path, self.cp_log)
            return
        if self.waiting:
            time.sleep(0.001)
            return
        picks = self._round_picks()
        end = min(len(picks), self.pos + SPOUT_CHUNK)
        version = self.round + 1
        for j in picks[self.pos:end]:
            emit((idx + j * par, version))
        self.emitted_since += end - self.pos
        self.pos = end
        if end == len(picks):
            self.waiting = True
            self.round += 1  # draw the next round now, not after the barrier
            self._round_picks()
            self.round -= 1

    def before_snapshot(self, checkpoint_id: int) -> None:
        """Called by the engine as the task starts its snapshot of ``checkpoint_id``."""
        phase2 = self.offset >= self.mine
        self.cp_log["checkpoints"][str(checkpoint_id)] = {
            "records": self.emitted_since, "phase2": phase2,
            "whole_round": phase2 and self.waiting and self.emitted_since == self.per_round,
            "per_round": self.per_round, "loaded": self.offset}
        self.emitted_since = 0
        _write_json(self.log_path, self.cp_log)

    def snapshot(self):
        if self.waiting:  # the round is in this checkpoint: the next one starts now
            self.waiting = False
            self.round += 1
            self.pos = 0
        return (self.offset, self.round, self.pos)

    def restore(self, snap):
        self.offset, self.round, self.pos = snap
        self.waiting = False


class ValueBolt(Bolt):
    """``kv[key] = value`` with a ``value_bytes`` value per key (and version), sliced out
    of one random buffer. Records the time from each barrier to its next record."""

    outputs = ()

    def __init__(self, value_bytes: int, result_dir: str) -> None:
        self.value_bytes = value_bytes
        self.result_dir = result_dir

    def prepare(self, conf, context):
        self.kv = self.state("kv")
        self.buf = random.Random(42).randbytes(BUFFER_BYTES)
        self.span = BUFFER_BYTES - self.value_bytes
        self.barrier_at: tuple[int, float] | None = None
        self.log_path = Path(self.result_dir) / f"bolt-{context.task_id}.json"
        self.pauses: dict[str, float] = {}
        self.task_id = context.task_id
        self.started = False  # the first record after this (re)build is noted
        if self.log_path.exists():
            self.pauses = json.loads(self.log_path.read_text())

    def execute(self, tup):
        if not self.started:
            self.started = True
            _write_json(Path(self.result_dir) / f"started-{self.task_id}-{os.getpid()}-"
                        f"{time.monotonic_ns()}.json", {"task": self.task_id, "at": time.time()})
        if self.barrier_at is not None:
            cid, t0 = self.barrier_at
            self.pauses[str(cid)] = (time.perf_counter() - t0) * 1000.0
            self.barrier_at = None
            # written here, after the pause, not in the hook: a file write on a disk busy
            # with RocksDB's flushes took up to tens of ms, inside the engine's pause
            _write_json(self.log_path, self.pauses)
        key, version = tup.values
        off = (key * 2_654_435_761 + version * 40_503) % self.span
        self.kv[key] = self.buf[off:off + self.value_bytes]

    def before_snapshot(self, checkpoint_id: int) -> None:
        """Called by the engine on the task thread as the snapshot starts: only notes the
        time (anything slow here would count in the engine's pause)."""
        self.barrier_at = (checkpoint_id, time.perf_counter())


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def build(keys: int, changed: float, value_bytes: int, result_dir: str):
    b = TopologyBuilder("bench-big-state")
    b.set_spout("keys", KeySpout(keys, changed, result_dir), parallelism=2)
    b.set_bolt("kv", ValueBolt(value_bytes, result_dir), parallelism=2) \
        .fields_grouping("keys", ["key"])
    return b.build()


# -- measuring ---------------------------------------------------------------------------------
def disk_bytes(path: Path) -> int:
    """Bytes allocated under ``path``, each inode once (local copies are hard links)."""
    seen: set[int] = set()
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except FileNotFoundError:
                continue
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_blocks * 512
    return total


class RssSampler(threading.Thread):
    """Peak RSS per worker id (the worker's pid and its children), every ``every_s``."""

    def __init__(self, handle: Any, every_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.handle = handle
        self.every_s = every_s
        self.peak: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.stop = threading.Event()

    def sample(self) -> None:
        try:
            workers = self.handle.status()["workers"]
        except Exception:
            return
        for w in workers:
            if not w.get("pid"):
                continue
            try:
                p = psutil.Process(w["pid"])
                rss = p.memory_info().rss + sum(
                    c.memory_info().rss for c in p.children(recursive=True))
            except psutil.Error:
                continue
            self.last[w["id"]] = rss
            self.peak[w["id"]] = max(self.peak.get(w["id"], 0), rss)

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()


def referenced_bytes(backend: FileBackend, cid: int) -> int | None:
    """Bytes of everything checkpoint ``cid`` needs: its task snapshots and the shared
    SST files their ``.refs`` list (what a full checkpoint of the same state uploads)."""
    try:
        handles = [t["handle"] for t in backend.read_metadata(cid)["tasks"].values()
                   if t.get("handle")]
        keys = referenced_files(backend, handles) | set(handles)
        return sum((backend.root / k).stat().st_size for k in keys)
    except (OSError, JStormError):
        return None  # retention deleted it meanwhile


def read_logs(result_dir: Path, prefix: str) -> list[Any]:
    out = []
    for p in sorted(result_dir.glob(f"{prefix}-*.json")):
        with contextlib.suppress(ValueError, OSError):
            out.append(json.loads(p.read_text()))
    return out


def kv_executed(handle: Any) -> dict[str, int]:
    m = handle.metrics("kv")
    return {t: int(v["executed"]) for t, v in m.get("tasks", {}).items()}


class Run:
    """The driver: the cluster handle, the directories and the samplers."""

    def __init__(self, handle: Any, home: Path, args: argparse.Namespace) -> None:
        self.handle = handle
        self.home = home
        self.args = args
        self.results = home / "results"
        self.state_dir = home / "state"
        self.ckpt_dir = home / "ckpt"
        self.rss = RssSampler(handle)
        self.t0 = time.time()
        self.checkpoints: dict[int, dict[str, Any]] = {}
        self.full_bytes: dict[int, int] = {}
        self.backend = FileBackend(handle.status()["state_backend"])

    def poll(self) -> dict[str, Any]:
        st = self.handle.status()
        if st["state"] in ("failed", "killed"):
            errs = st.get("errors") or [{"message": "?"}]
            raise RuntimeError(f"topology {st['state']}: {errs[-1]['message']}")
        for c in st.get("checkpoints", []):
            if c["status"] == "completed" and c["id"] not in self.checkpoints:
                self.checkpoints[c["id"]] = c
                full = referenced_bytes(self.backend, c["id"])
                if full is not None:
                    self.full_bytes[c["id"]] = full
        return st

    def progress(self, what: str, executed: int) -> None:
        el = time.time() - self.t0
        last = self.checkpoints[max(self.checkpoints)] if self.checkpoints else None
        cp = (f"last checkpoint {last['id']}: {last['size_bytes'] / 1e6:.1f} MB written in "
              f"{last['duration_ms']:.0f} ms" if last else "no checkpoint yet")
        rss = ", ".join(f"w{w} {b / 1e6:.0f} MB (peak {self.rss.peak[w] / 1e6:.0f})"
                        for w, b in sorted(self.rss.last.items()))
        print(f"[{el:7.1f} s] {what}: {executed:,} records, "
              f"{executed / max(el, 1e-9):,.0f}/s; RSS {rss}; state dirs "
              f"{disk_bytes(self.state_dir) / 1e9:.2f} GB, backend "
              f"{disk_bytes(self.ckpt_dir) / 1e9:.2f} GB; {cp}; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)

    def wait_loaded(self) -> dict[str, Any]:
        keys = self.args.keys
        last_print = 0.0
        while True:
            self.poll()
            executed = sum(kv_executed(self.handle).values())
            now = time.monotonic()
            if now - last_print >= self.args.progress_s:
                self.progress("load", executed)
                last_print = now
            if executed >= keys:
                t_done = time.time()
                self.progress("load", executed)
                return {"load_s": t_done - self.t0, "records_per_s": keys / (t_done - self.t0)}
            time.sleep(0.5)

    def incremental(self) -> dict[str, Any]:
        """Wait for ``--intervals`` checkpoints holding one whole round each."""
        want = self.args.intervals
        last_print = 0.0
        deadline = time.monotonic() + self.args.phase_timeout_s
        while True:
            self.poll()
            rows = self._whole_round_rows()
            now = time.monotonic()
            if now - last_print >= self.args.progress_s:
                print(f"[{time.time() - self.t0:7.1f} s] incremental: {len(rows)}/{want} "
                      f"checkpoints with a whole round", flush=True)
                last_print = now
            if len(rows) >= want or now > deadline:
                break
            time.sleep(0.5)
        rows = rows[:want]
        if not rows:
            raise RuntimeError("no checkpoint held a whole round of updates")
        inc = [r["size_bytes"] for r in rows]
        full = [r["full_bytes"] for r in rows if r["full_bytes"]]
        dur = [r["duration_ms"] for r in rows]
        pauses = [p for r in rows for p in r["pauses_ms"]]
        engine = [p for r in rows for p in r["engine_pauses_ms"]]
        return {
            "checkpoints": rows, "changed_records": rows[0]["records"],
            "inc_bytes_p50": pct(inc, 0.5), "inc_bytes_max": max(inc),
            "inc_bytes_mean": sum(inc) / len(inc),
            "full_bytes_p50": pct(full, 0.5) if full else None,
            "inc_vs_full_p50": (pct([r["size_bytes"] / r["full_bytes"] for r in rows
                                     if r["full_bytes"]], 0.5) if full else None),
            "duration_ms_p50": pct(dur, 0.5), "duration_ms_p99": pct(dur, 0.99),
            "pause_ms_p50": pct(pauses, 0.5), "pause_ms_p99": pct(pauses, 0.99),
            "pause_ms_max": max(pauses) if pauses else None,
            "engine_pause_ms_p50": pct(engine, 0.5) if engine else None,
            "engine_pause_ms_p99": pct(engine, 0.99) if engine else None,
            "engine_pause_ms_max": max(engine) if engine else None,
        }

    def _whole_round_rows(self) -> list[dict[str, Any]]:
        spouts = read_logs(self.results, "spout")
        bolts = read_logs(self.results, "bolt")
        bolt_tasks = set(kv_executed(self.handle))
        rows = []
        for cid, c in sorted(self.checkpoints.items()):
            entries = [s["checkpoints"].get(str(cid)) for s in spouts]
            if len(entries) < 2 or not all(e and e["whole_round"] for e in entries):
                continue
            pauses = [b[str(cid)] for b in bolts if str(cid) in b]
            rows.append({"id": cid, "size_bytes": c["size_bytes"],
                         "duration_ms": c["duration_ms"], "full_bytes": self.full_bytes.get(cid),
                         "records": sum(e["records"] for e in entries),  # type: ignore[index]
                         "pauses_ms": pauses,
                         "engine_pauses_ms": [ms for t, ms in c.get("task_pause_ms", {}).items()
                                              if t in bolt_tasks]})
        return rows

    def kill_and_time(self, local: bool) -> dict[str, Any]:
        """SIGKILL worker 0; seconds until every bolt task executes again: each one, rebuilt
        by the recovery, notes its first record in a file (wall clock, one machine)."""
        st = self.wait_running_after_checkpoint()
        n_rec0 = len(st["recoveries"])
        tasks = {s["task"] for s in read_logs(self.results, "started")}
        victim = next(w for w in st["workers"] if w["id"] == 0)
        logs_before = self.restore_log_lines()
        t_kill = time.monotonic()
        wall_kill = time.time()
        os.kill(victim["pid"], signal.SIGKILL)
        if not local:  # no local copies left: every SST file comes from the backend
            for w in self.state_dir.glob("worker-*"):
                shutil.rmtree(w / "local", ignore_errors=True)
        deadline = t_kill + self.args.recovery_timeout_s
        while time.monotonic() < deadline:
            again = {s["task"] for s in read_logs(self.results, "started")
                     if s["at"] > wall_kill}
            if again >= tasks:
                break
            time.sleep(0.02)
        else:
            raise TimeoutError(f"the bolt did not execute again within "
                               f"{self.args.recovery_timeout_s} s of the kill")
        resumed_s = time.monotonic() - t_kill
        st = self.handle.status()
        rec = st["recoveries"][-1] if len(st["recoveries"]) > n_rec0 else {}
        lines = self.new_restore_lines(logs_before)
        return {"local_recovery": local, "resumed_s": resumed_s,
                "tm_recovery_ms": rec.get("duration_ms"),
                "restored_checkpoint": rec.get("checkpoint"),
                "full_bytes": self.full_bytes.get(rec.get("checkpoint") or -1),
                "restore_log": lines}

    def wait_checkpoint_after(self, t: float) -> int:
        """The id of the first checkpoint started after wall time ``t`` to complete."""
        deadline = time.monotonic() + self.args.phase_timeout_s
        while time.monotonic() < deadline:
            self.poll()
            done = [cid for cid, c in self.checkpoints.items() if c["started_at"] > t]
            if done:
                return min(done)
            time.sleep(0.5)
        raise TimeoutError("no checkpoint completed after the load")

    def wait_running_after_checkpoint(self) -> dict[str, Any]:
        """Running, and a checkpoint of this generation completed (something to restore)."""
        deadline = time.monotonic() + self.args.recovery_timeout_s
        while time.monotonic() < deadline:
            st = self.poll()
            last = st.get("last_completed_checkpoint") or {}
            if st["state"] == "running" and last.get("generation") == st["generation"]:
                return st
            time.sleep(0.2)
        raise TimeoutError("no checkpoint completed after the recovery")

    def restore_log_lines(self) -> dict[str, list[str]]:
        """The workers' "opened the RocksDB checkpoint" lines, per log file, shortened to
        "task N: X SST file(s) from local copies, Y downloaded (Z bytes)"."""
        out: dict[str, list[str]] = {}
        for p in sorted(self.home.rglob("*.log")):
            with contextlib.suppress(OSError):
                for ln in p.read_text(errors="replace").splitlines():
                    m = RESTORE_LINE.search(ln)
                    if m:
                        out.setdefault(str(p), []).append(f"task {m[1]}: {m[2]}")
        return out

    def new_restore_lines(self, before: dict[str, list[str]]) -> list[str]:
        return [ln for f, lines in self.restore_log_lines().items()
                for ln in lines[len(before.get(f, [])):]]


def run(args: argparse.Namespace) -> dict[str, Any]:
    with bench_home() as home:
        results = home / "results"
        results.mkdir()
        conf = Config(workers=2, guarantee="exactly_once", state_store="rocksdb",
                      incremental_checkpoints=True, state_store_dir=str(home / "state"),
                      state_backend=f"file://{home / 'ckpt'}",
                      checkpoint_interval_ms=args.interval_ms,
                      checkpoint_timeout_ms=max(60_000, 6 * args.interval_ms),
                      checkpoints_retained=2, log_level="INFO", max_restarts=10)
        topo = build(args.keys, args.changed, args.value_bytes, str(results))
        print(f"# {args.keys:,} keys x {args.value_bytes} B, checkpoint every "
              f"{args.interval_ms} ms, load {os.getloadavg()}", flush=True)
        with LocalCluster() as cluster:
            handle = cluster.submit(topo, conf)
            r = Run(handle, home, args)
            r.rss.start()
            out: dict[str, Any] = {"keys": args.keys, "value_bytes": args.value_bytes,
                                   "interval_ms": args.interval_ms,
                                   "load_before": os.getloadavg()}
            out["load"] = r.wait_loaded()
            # the first checkpoint started after the last key was written: the full state
            loaded_cp = r.wait_checkpoint_after(time.time())
            out["load"].update({
                "state_dir_bytes": disk_bytes(r.state_dir),
                "backend_bytes": disk_bytes(r.ckpt_dir),
                "full_checkpoint_bytes": r.full_bytes.get(loaded_cp),
                "checkpoints": [{k: c[k] for k in ("id", "size_bytes", "duration_ms")}
                                for _, c in sorted(r.checkpoints.items())],
                "peak_rss_bytes": dict(r.rss.peak)})
            cps = out["load"]["checkpoints"]
            out["load"]["checkpoint_bytes_p50"] = pct([c["size_bytes"] for c in cps], 0.5)
            out["load"]["checkpoint_ms_p50"] = pct([c["duration_ms"] for c in cps], 0.5)
            out["load"]["checkpoint_ms_max"] = max(c["duration_ms"] for c in cps)
            r.progress("loaded", sum(kv_executed(handle).values()))
            if args.intervals:
                out["incremental"] = r.incremental()
                r.progress("incremental done", sum(kv_executed(handle).values()))
            if args.recovery:
                out["recovery"] = []
                for local in (True, False):
                    rec = r.kill_and_time(local=local)
                    out["recovery"].append(rec)
                    print(f"[{time.time() - r.t0:7.1f} s] recovery (local copies: {local}): "
                          f"{rec['resumed_s']:.1f} s; {rec['restore_log']}", flush=True)
            r.poll()
            out["state_dir_bytes_end"] = disk_bytes(r.state_dir)
            r.rss.stop.set()
            out["peak_rss_bytes"] = dict(r.rss.peak)
            out["load_after"] = os.getloadavg()
        return out


def report(r: dict[str, Any]) -> None:
    ld = r["load"]
    print(f"\n{r['keys']:,} keys x {r['value_bytes']} B, 2 workers, RocksDB + incremental "
          f"checkpoints every {r['interval_ms']} ms; load average before "
          f"{r['load_before'][0]:.1f}, after {r['load_after'][0]:.1f}")
    print(f"load        {ld['records_per_s']:,.0f} records/s ({ld['load_s']:.0f} s); state dirs "
          f"{ld['state_dir_bytes'] / 1e9:.2f} GB, backend {ld['backend_bytes'] / 1e9:.2f} GB; "
          f"full checkpoint {(ld['full_checkpoint_bytes'] or 0) / 1e9:.2f} GB")
    print(f"            checkpoints while loading: {len(ld['checkpoints'])}, bytes written p50 "
          f"{ld['checkpoint_bytes_p50'] / 1e6:.1f} MB, duration p50 "
          f"{ld['checkpoint_ms_p50']:.0f} ms, max {ld['checkpoint_ms_max']:.0f} ms")
    print("peak RSS    " + ", ".join(f"worker {w}: {b / 1e6:.0f} MB"
                                     for w, b in sorted(r["peak_rss_bytes"].items())))
    if "incremental" in r:
        i = r["incremental"]
        full = i["full_bytes_p50"]
        print(f"incremental {len(i['checkpoints'])} checkpoints of {i['changed_records']:,} "
              f"changed keys each: {i['inc_bytes_p50'] / 1e6:.1f} MB p50 (max "
              f"{i['inc_bytes_max'] / 1e6:.1f}) against a full {(full or 0) / 1e6:.0f} MB = "
              f"{100 * (i['inc_vs_full_p50'] or 0):.2f} %; mean {i['inc_bytes_mean'] / 1e6:.1f} MB "
              f"(RocksDB compactions rewrite files)")
        print("            per checkpoint (MB written / ms): " + ", ".join(
            f"{c['size_bytes'] / 1e6:.1f}/{c['duration_ms']:.0f}" for c in i["checkpoints"]))
        print(f"            duration p50 {i['duration_ms_p50']:.0f} ms, p99 "
              f"{i['duration_ms_p99']:.0f} ms; barrier-to-next-record in the bolt p50 "
              f"{i['pause_ms_p50']:.1f} ms, p99 {i['pause_ms_p99']:.1f} ms, max "
              f"{i['pause_ms_max']:.1f} ms")
        if i.get("engine_pause_ms_p50") is not None:
            print(f"            the engine's task-thread pause (TM checkpoint history, bolt "
                  f"tasks) p50 {i['engine_pause_ms_p50']:.1f} ms, p99 "
                  f"{i['engine_pause_ms_p99']:.1f} ms, max {i['engine_pause_ms_max']:.1f} ms")
    for rec in r.get("recovery", []):
        how = "with local recovery" if rec["local_recovery"] else "without (local copies deleted)"
        print(f"recovery    {how}: every bolt task executing again {rec['resumed_s']:.1f} s "
              f"after the SIGKILL (TM recovery {rec['tm_recovery_ms']} ms, checkpoint "
              f"{rec['restored_checkpoint']})")
        for ln in rec["restore_log"]:
            print(f"              {ln}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=20_000_000)
    p.add_argument("--value-bytes", type=int, default=160)
    p.add_argument("--interval-ms", type=int, default=5000, help="checkpoint interval")
    p.add_argument("--changed", type=float, default=0.01, help="share of keys per round")
    p.add_argument("--intervals", type=int, default=10,
                   help="checkpoints with a whole round to measure (0: skip phase 2)")
    p.add_argument("--no-recovery", dest="recovery", action="store_false",
                   help="skip phase 3 (the SIGKILLs)")
    p.add_argument("--progress-s", type=float, default=15.0)
    p.add_argument("--phase-timeout-s", type=float, default=900.0)
    p.add_argument("--recovery-timeout-s", type=float, default=600.0)
    p.add_argument("--json", action="store_true", help="print the BENCH_JSON line")
    args = p.parse_args(argv)
    r = run(args)
    report(r)
    if args.json:
        emit_json(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
