"""The job the standby-TM tests run: running sums per key, each output record stamped with
the pid of the worker that produced it (so a test can tell the old leader's output from
the new one's), into a JSON-lines FileSink."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from jstormpy import Bolt, FileSink, SequenceSpout, TopologyBuilder
from jstormpy.api.topology import Topology
from jstormpy.connectors.file_parts import PART_RE
from tests.chaos.topologies import RunningSum
from tests.integration.paced_spout import ReleasableSequenceSpout

NAME = "ha-sums"


class StampPid(Bolt):
    """Adds the producing worker's pid to every record."""

    outputs = ("key", "seq", "value", "sum", "count", "pid")

    def execute(self, tup):
        self.emit((*tup.values, os.getpid()))


def sums(out: Path, keys: int, per_key: int, rate: float | None,
         release_file: str | None = None) -> Topology:
    """events -> running sum per key -> pid stamp -> JSON lines. With ``release_file``,
    the events come at ``rate`` until the test releases them
    (tests/integration/paced_spout.py)."""
    b = TopologyBuilder(NAME)
    spout = SequenceSpout(keys=keys, per_key=per_key, rate_per_s=rate) if release_file is None \
        else ReleasableSequenceSpout(release_file, keys=keys, per_key=per_key, rate_per_s=rate)
    b.set_spout("events", spout, parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("stamp", StampPid, parallelism=2).fields_grouping("sum", ["key"])
    b.set_bolt("out", FileSink(str(out), format="jsonl"), parallelism=1) \
        .fields_grouping("stamp", ["key"])
    return b.build()


def topology_file(path: Path, out: Path, state_backend: str, keys: int, per_key: int,
                  rate: float | None, release_file: Path | None = None) -> Path:
    """A file ``jstorm run`` takes (the repository on sys.path: tests import from it)."""
    repo = Path(__file__).resolve().parents[2]
    path.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "from pathlib import Path\n"
        "from jstormpy import Config\n"
        "from tests.ha.topologies import sums\n"
        f"topology = sums(Path({str(out)!r}), {keys}, {per_key}, {rate!r}, "
        f"{None if release_file is None else str(release_file)!r})\n"
        "config = Config(workers=2, checkpoint_interval_ms=300, worker_timeout_ms=3000,\n"
        f"                state_backend={state_backend!r})\n")
    return path


def committed_parts(out: Path) -> dict[str, int]:
    """Committed part files of ``out``: name -> checkpoint id."""
    if not out.is_dir():
        return {}
    parts = {}
    for name in os.listdir(out):
        m = PART_RE.match(name)
        if m:
            parts[name] = int(m.group(1))
    return parts


def check_sums(records: list[dict], keys: int, per_key: int) -> str:
    """'' when every key's running sums are complete, once, in order and equal to a
    recomputation; else the problems."""
    by_key: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_key[r["key"]].append(r)
    problems = []
    for i in range(keys):
        key = f"k{i}"
        seqs = sorted(r["seq"] for r in by_key[key])
        if seqs != list(range(per_key)):
            dup = len(seqs) - len(set(seqs))
            problems.append(f"{key}: {len(seqs)} records ({dup} duplicates), expected "
                            f"0..{per_key - 1} once")
            continue
        total = 0
        for r in sorted(by_key[key], key=lambda r: r["seq"]):
            total += SequenceSpout.value_of(r["seq"])
            if r["sum"] != total or r["count"] != r["seq"] + 1:
                problems.append(f"{key}: state at seq {r['seq']} is ({r['sum']}, {r['count']})"
                                f", recomputed ({total}, {r['seq'] + 1})")
                break
    return "\n".join(problems[:10])
