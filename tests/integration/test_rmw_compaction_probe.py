"""bench/rmw_compaction_probe.py at a CI size (issue 34): a database built into the last
level takes the job's mix of writes under each candidate's options, and the probe reports
what the compactions did per candidate. Real RocksDB databases in a temporary directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "rmw_compaction_probe.py"


def probe(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--keys", "40000", "--writes", "60000",
                           "--flush-every", "2048", "--dir", str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=300, check=False)


def test_each_candidate_reports_its_compactions(tmp_path: Path) -> None:
    done = probe(tmp_path, "--candidates", "store,trigger4,level")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            found[r["candidate"]] = r
    assert set(found) == {"store", "trigger4", "level"}
    for r in found.values():
        # 29 memtable flushes: past either trigger, so level-0 compactions wrote files
        assert sum(h["compaction_mb"] for h in r["halves"]) > 0, r
        assert r["get_present_us"] > 0 and r["get_absent_us"] > 0
        # what the incremental checkpoints would upload and the disk, per flush: the
        # flushed memtables at least, and the disk at least the database built
        for h in r["halves"]:
            assert 0 < h["upload_p50_mb"] <= h["upload_max_mb"] <= h["upload_sum_mb"]
            assert h["disk_peak_mb"] >= r["live_mb"] * 0.5 > 0
    # each candidate's options reached its database (its OPTIONS file), the store's own
    # under the others
    assert found["trigger4"]["options"]["level0_file_num_compaction_trigger"] == "4"
    assert found["store"]["options"]["level0_file_num_compaction_trigger"] == "12"
    assert found["store"]["options"]["compaction_style"] == "kCompactionStyleUniversal"
    assert found["level"]["options"]["compaction_style"] == "kCompactionStyleLevel"
    assert not list(tmp_path.iterdir())  # the databases are removed


def test_an_unknown_candidate_is_refused_by_name(tmp_path: Path) -> None:
    done = probe(tmp_path, "--candidates", "store,bogus")
    assert done.returncode != 0
    assert "bogus" in done.stderr
