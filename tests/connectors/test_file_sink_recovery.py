"""FileSink against the sink contract's recovery below the id floor (a real directory)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jstormpy import FileSink, read_committed
from jstormpy.connectors.file_parts import WORK_RE
from tests.connectors.contract import TOPOLOGY, check_recovery_below_the_id_floor


class FileSinkHarness:
    """A FileSink directory; staged files listed as the contract's transaction names."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def make_sink(self) -> FileSink:
        return FileSink(self.directory)

    def committed(self) -> list[dict[str, Any]]:
        return list(read_committed(self.directory))

    def staged(self) -> list[str]:
        names = []
        for dirpath, _dirs, files in os.walk(self.directory):
            if Path(dirpath) == self.directory:
                continue  # committed part files
            for name in files:
                m = WORK_RE.match(name)
                if m:
                    names.append(f"jstorm-{TOPOLOGY}-{int(m.group(2))}-{int(m.group(1))}")
        return sorted(names)


def test_recovery_below_the_id_floor_discards_the_uncovered_transaction(
        tmp_path: Path) -> None:
    check_recovery_below_the_id_floor(FileSinkHarness(tmp_path / "out"))
