"""Components of the rescale tests: a paced file spout over per-key sequence files (the
split contract: files are splits) feeding the keyed running sum."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from jstormpy import Bolt, FileSink, FileSpout, TopologyBuilder
from jstormpy.api.topology import Topology
from jstormpy.connectors.sources import SequenceSpout
from tests.chaos.topologies import RunningSum


class PacedFileSpout(FileSpout):
    """FileSpout reading ``batch`` lines every ``pause_s`` (so a rescale lands mid-file),
    until ``release_file`` (if given) exists: then at full speed, once the test's rescales
    are over (as tests/integration/paced_spout.py)."""

    def __init__(self, paths: str, batch: int = 10, pause_s: float = 0.05,
                 release_file: Path | None = None) -> None:
        super().__init__(paths, field="line", batch=batch)
        self.pause_s = pause_s
        self.release_file = None if release_file is None else str(release_file)

    def next_tuple(self) -> None:
        super().next_tuple()
        if self.pause_s and self.release_file is not None \
                and os.path.exists(self.release_file):
            self.pause_s = 0.0
        if self.pause_s:
            time.sleep(self.pause_s)


class ParseEvent(Bolt):
    """``"key seq"`` -> ``(key, seq, value)`` as SequenceSpout emits them."""

    outputs = ("key", "seq", "value")

    def execute(self, tup: Any) -> None:
        key, seq = tup["line"].split()
        self.emit((key, int(seq), SequenceSpout.value_of(int(seq))))


def write_event_files(directory: Path, files: int, keys_per_file: int,
                      per_key: int) -> int:
    """``files`` files, each with ``keys_per_file`` keys interleaved, seqs in order; keys
    are named k0.. as check_keyed_sums expects. Returns the number of keys."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        keys = [f"k{f * keys_per_file + j}" for j in range(keys_per_file)]
        lines = [f"{k} {s}\n" for s in range(per_key) for k in keys]
        (directory / f"events-{f:02d}.txt").write_text("".join(lines))
    return files * keys_per_file


def file_pipeline(data: Path, out: Path, spout_parallelism: int = 2,
                  sum_parallelism: int = 2, release_file: Path | None = None) -> Topology:
    b = TopologyBuilder("rs-files")
    b.set_spout("lines", PacedFileSpout(str(data / "*.txt"), release_file=release_file),
                parallelism=spout_parallelism)
    b.set_bolt("parse", ParseEvent, parallelism=1).shuffle_grouping("lines")
    b.set_bolt("sum", RunningSum, parallelism=sum_parallelism).fields_grouping("parse", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("sum")
    return b.build()
