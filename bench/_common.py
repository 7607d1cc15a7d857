"""Shared pieces of the benchmark scripts: the word-count topology, a run driver that
polls the Topology Master while the topology runs, and small statistics helpers.

Figures are collected through side-channel JSON files the bench components write into a
result directory (start time of each spout, end time and counts of the last bolt, latency
histograms), so the clock does not depend on the checkpoint interval that ``drained``
waits for. Everything here is bench code: the engine is used as is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cloudpickle

from jstormpy import Bolt, Config, LocalCluster, Spout, TopologyBuilder

# Same corpus as examples/wordcount.py: sentence i is
# " ".join(WORDS[(i * 7 + j * 3) % 30] for j in range(10)), which repeats with period 30.
WORDS = ("the quick brown fox jumps over the lazy dog and the cat sat on the mat while "
         "a storm of tuples flows through bolts and spouts").split()
WORDS_PER_SENTENCE = 10


def sentence(i: int) -> str:
    """Sentence ``i`` of the corpus (identical to examples/wordcount.py's ``corpus``)."""
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(WORDS_PER_SENTENCE))


def corpus(n: int) -> list[str]:
    """The first ``n`` sentences."""
    return [sentence(i) for i in range(n)]


def _write_json(folder: str, name: str, data: dict[str, Any]) -> None:
    path = Path(folder) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


# -- components --------------------------------------------------------------------------------
class BenchSentences(Spout):
    """Emits ``n_sentences`` (split over the spout's tasks) of the corpus, 100 per call.

    ``rate`` (sentences/s for the whole component) rate-limits it; ``stamp`` adds the
    wall-clock emit time as a second field; ``n_sentences=0`` means unbounded.
    The offset is the replayable position (snapshot/restore), so it works exactly-once.
    """

    def __init__(self, n_sentences: int, result_dir: str, rate: float | None = None,
                 stamp: bool = False, chunk: int = 100) -> None:
        self.n_sentences = n_sentences
        self.result_dir = result_dir
        self.rate = rate
        self.stamp = stamp
        self.chunk = chunk
        self.offset = 0
        self.outputs = ("sentence", "ts") if stamp else ("sentence",)

    def open(self, conf, context):
        par = context.parallelism
        idx = context.task_index
        self.task_id = context.task_id
        # this task emits sentences idx, idx+par, ...; the corpus has period 30
        self.cycle = [sentence(idx + k * par) for k in range(30)]
        self.total = -(-(self.n_sentences - idx) // par) if self.n_sentences else 0
        self.task_rate = self.rate / par if self.rate else None
        self.t0: float | None = None
        self.offset0 = self.offset
        self.started = False

    def next_tuple(self):
        now = time.perf_counter()
        if not self.started:
            self.started = True
            self.t0 = now
            _write_json(self.result_dir, f"spout-{self.task_id}-{os.getpid()}.json",
                        {"start": time.time(), "offset": self.offset})
        n = self.chunk
        if self.total:
            n = min(n, self.total - self.offset)
        if self.task_rate is not None:
            due = self.offset0 + int((now - self.t0) * self.task_rate)  # type: ignore[operator]
            n = min(n, due - self.offset)
        if n <= 0:
            if self.total and self.offset >= self.total:
                self.finish()
            return
        cycle = self.cycle
        emit = self.emit
        off = self.offset
        if self.stamp:
            ts = time.time()
            for k in range(off, off + n):
                emit((cycle[k % 30], ts))
        else:
            for k in range(off, off + n):
                emit((cycle[k % 30],))
        self.offset = off + n
        if self.total and self.offset >= self.total:
            self.finish()

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class BenchSplit(Bolt):
    """Sentence → words (carries the stamp along in latency mode)."""

    def __init__(self, stamp: bool = False) -> None:
        self.stamp = stamp
        self.outputs = ("word", "ts") if stamp else ("word",)

    def execute(self, tup):
        values = tup.values
        emit = self.emit
        if self.stamp:
            ts = values[1]
            for word in values[0].split():
                emit((word, ts))
        else:
            for word in values[0].split():
                emit((word,))


class BenchCount(Bolt):
    """Word count in managed state; emits (word, count) only when its inputs end.

    In latency mode it also records now − stamp per tuple into a 0.1 ms histogram and
    writes it to the result directory at the end.
    """

    outputs = ("word", "count")

    def __init__(self, result_dir: str, stamp: bool = False) -> None:
        self.result_dir = result_dir
        self.stamp = stamp

    def prepare(self, conf, context):
        self.counts = self.state("counts")
        self.task_id = context.task_id
        self.hist: dict[int, int] = {}
        if self.stamp:
            self.execute = self._execute_stamped  # type: ignore[method-assign]

    def execute(self, tup):
        word = tup.values[0]
        counts = self.counts
        counts[word] = counts.get(word, 0) + 1

    def _execute_stamped(self, tup):
        word, ts = tup.values
        counts = self.counts
        counts[word] = counts.get(word, 0) + 1
        b = int((time.time() - ts) * 10_000)  # 0.1 ms buckets
        hist = self.hist
        hist[b] = hist.get(b, 0) + 1

    def on_inputs_finished(self):
        if self.stamp:
            _write_json(self.result_dir, f"latency-{self.task_id}-{os.getpid()}.json",
                        {"hist": {str(k): v for k, v in self.hist.items()}})
        for word, n in self.counts.items():
            self.emit((word, n))


class BenchReport(Bolt):
    """The sink: sums the final counts and records the end time."""

    outputs = ()

    def __init__(self, result_dir: str) -> None:
        self.result_dir = result_dir

    def prepare(self, conf, context):
        self.words = 0
        self.distinct = 0

    def execute(self, tup):
        self.words += tup.values[1]
        self.distinct += 1

    def on_inputs_finished(self):
        _write_json(self.result_dir, f"report-{os.getpid()}-{time.monotonic_ns()}.json",
                    {"end": time.time(), "words": self.words, "distinct": self.distinct})


# pickle the bench components by value, whatever the module is called where they are used
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def build_wordcount(name: str, result_dir: str, n_sentences: int, rate: float | None = None,  # noqa: PLR0917
                    stamp: bool = False, spouts: int = 2, splits: int = 2, counts: int = 2):
    """sentences (2) → split (2, shuffle) → count (2, fields) → report (1, global)."""
    b = TopologyBuilder(name)
    b.set_spout("sentences", BenchSentences(n_sentences, result_dir, rate, stamp),
                parallelism=spouts)
    b.set_bolt("split", BenchSplit(stamp), parallelism=splits).shuffle_grouping("sentences")
    b.set_bolt("count", BenchCount(result_dir, stamp), parallelism=counts) \
        .fields_grouping("split", ["word"])
    b.set_bolt("report", BenchReport(result_dir), parallelism=1).global_grouping("count")
    return b.build()


# -- running -----------------------------------------------------------------------------------
@contextlib.contextmanager
def bench_home():
    """A temporary JSTORM_HOME (runs, checkpoints, registry), removed afterwards."""
    old = os.environ.get("JSTORM_HOME")
    home = tempfile.mkdtemp(prefix="jstorm-bench-")
    os.environ["JSTORM_HOME"] = home
    try:
        yield Path(home)
    finally:
        if old is None:
            os.environ.pop("JSTORM_HOME", None)
        else:
            os.environ["JSTORM_HOME"] = old
        shutil.rmtree(home, ignore_errors=True)


def read_results(result_dir: str, prefix: str) -> list[dict[str, Any]]:
    """Every side-channel JSON file named ``prefix-*.json``."""
    return [json.loads(p.read_text()) for p in sorted(Path(result_dir).glob(f"{prefix}-*.json"))]


class Poller:
    """Polls status() and metrics() while a topology runs, keeping what the figures need."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.checkpoints: dict[int, dict[str, Any]] = {}
        self.rss: dict[int, int] = {}
        self.executed: dict[str, int] = {}
        self.peak_rate: dict[str, float] = {}
        self.rate_samples: dict[str, list[float]] = {}
        self.status: dict[str, Any] = {}
        self.metrics: dict[str, Any] = {}

    def poll(self) -> dict[str, Any]:
        st = self.handle.status()
        self.status = st
        for c in st.get("checkpoints", []):
            self.checkpoints[(c["generation"], c["id"])] = c  # type: ignore[index]
        for w in st.get("workers", []):
            if w.get("rss_bytes"):
                self.rss[w["id"]] = max(self.rss.get(w["id"], 0), int(w["rss_bytes"]))
        try:
            m = self.handle.metrics()
        except Exception:
            return st
        self.metrics = m
        for comp, agg in m.get("components", {}).items():
            self.executed[comp] = max(self.executed.get(comp, 0), int(agg["executed"]))
            rate = float(agg["execute_rate"])
            self.peak_rate[comp] = max(self.peak_rate.get(comp, 0.0), rate)
            self.rate_samples.setdefault(comp, []).append(rate)
        return st

    def steady_rates(self) -> dict[str, float]:
        """Median of the non-zero execute_rate samples per component (steady state)."""
        out = {}
        for comp, xs in self.rate_samples.items():
            nz = [x for x in xs if x > 0]
            if nz:
                out[comp] = statistics.median(nz)
        return out

    def completed_checkpoints(self) -> list[dict[str, Any]]:
        return [c for _, c in sorted(self.checkpoints.items()) if c["status"] == "completed"]


def run_until_drained(handle: Any, timeout_s: float, poll_s: float = 0.2) -> Poller:
    """Poll until the topology is drained (or raise TimeoutError / RuntimeError)."""
    poller = Poller(handle)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            st = poller.poll()
        except Exception:
            st = {"state": "unreachable"}
        state = st.get("state")
        if state == "drained":
            return poller
        if state in ("failed", "killed"):
            errs = st.get("errors") or [{"message": "?"}]
            raise RuntimeError(f"topology {state}: {errs[-1]['message']}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"not drained within {timeout_s} s (state {state})")
        time.sleep(poll_s)


def run_wordcount(n_sentences: int, guarantee: str, checkpoint_interval_ms: int = 1000,  # noqa: PLR0917
                  rate: float | None = None, stamp: bool = False, timeout_s: float = 180.0,
                  workers: int = 2, **config: Any) -> dict[str, Any]:
    """Run the word count to the end; returns its figures."""
    with bench_home() as home:
        result_dir = str(home / "results")
        os.makedirs(result_dir)
        name = f"bench-wc-{guarantee}{'-lat' if stamp else ''}"
        topo = build_wordcount(name, result_dir, n_sentences, rate, stamp)
        conf = Config(workers=workers, guarantee=guarantee,
                      checkpoint_interval_ms=checkpoint_interval_ms, log_level="WARNING",
                      **config)
        t_submit = time.time()
        with LocalCluster() as cluster:
            handle = cluster.submit(topo, conf)
            poller = run_until_drained(handle, timeout_s)
            t_drained = time.time()
            with contextlib.suppress(Exception):
                poller.poll()
        starts = [r["start"] for r in read_results(result_dir, "spout")]
        reports = read_results(result_dir, "report")
        if not starts or not reports:
            raise RuntimeError("the bench components wrote no start/report files")
        t0 = min(starts)
        end = reports[-1]["end"]
        words = reports[-1]["words"]
        expected = n_sentences * WORDS_PER_SENTENCE
        elapsed = end - t0
        executed = dict(poller.executed)
        executed["split"] = max(executed.get("split", 0), n_sentences)
        executed["count"] = max(executed.get("count", 0), words)
        executed.pop("sentences", None)
        out: dict[str, Any] = {
            "guarantee": guarantee, "sentences": n_sentences, "words": words,
            "words_ok": words == expected, "elapsed_s": elapsed,
            "words_per_s": words / elapsed if elapsed > 0 else 0.0,
            "drain_s": t_drained - t0, "submit_to_first_tuple_s": t0 - t_submit,
            "checkpoint_interval_ms": checkpoint_interval_ms,
            # heartbeats stop at drain, so the last one can miss the tail: take the larger
            # of the polled executed count and the count the topology must have executed
            "executed": executed,
            "per_hop_tuples_per_s": {c: n / elapsed for c, n in executed.items()},
            "steady_execute_rate": poller.steady_rates(),
            "peak_execute_rate": dict(poller.peak_rate),
            "worker_rss_bytes": dict(poller.rss),
            "checkpoints": poller.completed_checkpoints(),
            "recoveries": poller.status.get("recoveries", []),
        }
        if stamp:
            hist: dict[int, int] = {}
            for r in read_results(result_dir, "latency"):
                for k, v in r["hist"].items():
                    hist[int(k)] = hist.get(int(k), 0) + v
            out["latency_ms"] = hist_percentiles(hist, 0.1)
        return out


# -- statistics --------------------------------------------------------------------------------
def hist_percentiles(hist: dict[int, int], unit_ms: float) -> dict[str, float | int | None]:
    """p50/p90/p99/max (ms) of a {bucket: count} histogram with ``unit_ms`` buckets."""
    total = sum(hist.values())
    res: dict[str, float | int | None] = {"samples": total}
    if not total:
        return {**res, "p50": None, "p90": None, "p99": None, "max": None}
    keys = sorted(hist)
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        rank = q * total
        acc = 0
        for k in keys:
            acc += hist[k]
            if acc >= rank:
                res[name] = round((k + 1) * unit_ms, 2)  # bucket upper bound
                break
    res["max"] = round((keys[-1] + 1) * unit_ms, 2)
    return res


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..1)."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def physical_floor(n_sentences: int) -> dict[str, float]:
    """A plain single-process Python loop over the same corpus (split + dict count)."""
    lines = corpus(n_sentences)
    t0 = time.perf_counter()
    counts: dict[str, int] = {}
    for line in lines:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    dt = time.perf_counter() - t0
    words = sum(counts.values())
    return {"words": words, "elapsed_s": dt, "words_per_s": words / dt}


def emit_json(data: dict[str, Any]) -> None:
    """Print the JSON result line run.py collects (prefixed so it can be found)."""
    print("BENCH_JSON " + json.dumps(data, default=str), flush=True)


def fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def mb(n: int | None) -> str:
    return "-" if not n else f"{n / 1e6:.0f} MB"


def process_rss_mb() -> float:
    """This process's resident set, in MB (from /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def disk_bytes(path: Path) -> int:
    """Bytes of the files below ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_per_store(script: str, stores: list[str], *args: str) -> dict[str, Any] | None:
    """Run ``script --child STORE ARGS`` in a fresh process per store (so each store's RSS
    is its own) and return each child's last stdout line, parsed as JSON, by store; None
    (after printing the child's stderr) if one failed."""
    import subprocess

    results: dict[str, Any] = {}
    for kind in stores:
        done = subprocess.run([sys.executable, os.path.abspath(script), "--child", kind,
                               *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return None
        results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"# {kind}: {results[kind]}", file=sys.stderr, flush=True)
    return results
