"""The windowed, stateful job the cluster tests run, and its exactly-once check."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from jstormpy import FileSink, SequenceSpout, TopologyBuilder, read_committed
from jstormpy.api.topology import Topology
from tests.chaos.topologies import RunningSum
from tests.golden.components import WINDOW, SeqWindowCount


def windowed(out: Path, keys: int, per_key: int, rate: float | None) -> Topology:
    """events -> running sum per key -> Parquet; events -> tumbling count per key -> Parquet."""
    b = TopologyBuilder("cluster-windowed")
    b.set_spout("events", SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out / "sums"), format="parquet"),
               parallelism=1).fields_grouping("sum", ["key"])
    b.set_bolt("windows", SeqWindowCount, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("wout", FileSink(str(out / "windows"), format="parquet"),
               parallelism=1).global_grouping("windows")
    return b.build()


def topology_file(path: Path, out: Path, hdfs_url: str, keys: int, per_key: int,
                  rate: float | None, **config: object) -> Path:
    """A file ``jstorm run`` takes: the job, its config (checkpoints on the storage host,
    plus ``config``)."""
    extra = "".join(f", {k}={v!r}" for k, v in config.items())
    path.write_text(
        "from pathlib import Path\n"
        "from jstormpy import Config\n"
        "from tests.cluster.topologies import windowed\n"
        f"topology = windowed(Path({str(out)!r}), {keys}, {per_key}, {rate!r})\n"
        f"config = Config(workers=2, checkpoint_interval_ms=500{extra},\n"
        f"                state_backend={hdfs_url + '/jstorm/' + path.stem!r})\n")
    return path


def check_windowed(out: Path, keys: int, per_key: int) -> str:
    """'' when every key's running sums and windows are complete, once and in order, and
    the state equals a recomputation; else the problems."""
    problems: list[str] = []
    sums: dict[str, list[dict]] = defaultdict(list)
    for r in read_committed(out / "sums"):
        sums[r["key"]].append(r)
    total = 0
    for i in range(keys):
        key, expected_sum = f"k{i}", 0
        seqs = [r["seq"] for r in sums[key]]
        if seqs != list(range(per_key)):
            problems.append(f"{key}: sequence is not 0..{per_key - 1} once in order "
                            f"({len(seqs)} records)")
            continue
        for r in sums[key]:
            expected_sum += SequenceSpout.value_of(r["seq"])
            if r["sum"] != expected_sum or r["count"] != r["seq"] + 1:
                problems.append(f"{key}: state at seq {r['seq']} is ({r['sum']}, "
                                f"{r['count']}), recomputed ({expected_sum}, {r['seq'] + 1})")
                break
        total += len(seqs)
    windows: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in read_committed(out / "windows"):
        windows[r["key"]].append((r["window_start"], r["result"]))
    for i in range(keys):
        want = [(start, WINDOW) for start in range(0, per_key, WINDOW)]
        if windows[f"k{i}"] != want:
            problems.append(f"k{i}: windows {windows[f'k{i}'][:5]}... != every window once "
                            f"with {WINDOW} events")
    return "\n".join(problems[:10])
