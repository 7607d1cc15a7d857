"""bench/big_state_bench.py at a CI size (issue 25's figures are its 20M-key run, in
docs/performance.md): the keyed job on RocksDB with incremental checkpoints loads its
keys, a checkpoint after a round of 1 % of the keys writes a small share of the full
one, and of the two SIGKILLs the first restores from local copies and the second
(local copies deleted) downloads every SST file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

KEYS = 20_000
VALUE_BYTES = 160


def test_big_state_bench_runs_small() -> None:
    script = Path(__file__).resolve().parents[2] / "bench" / "big_state_bench.py"
    done = subprocess.run([sys.executable, str(script), "--keys", str(KEYS), "--intervals", "2",
                           "--interval-ms", "1000", "--recovery-timeout-s", "120",
                           "--phase-timeout-s", "120", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON "))
    r = json.loads(line[len("BENCH_JSON "):])
    load = r["load"]
    # the values are incompressible: the state and a full checkpoint hold every byte
    assert load["state_dir_bytes"] >= KEYS * VALUE_BYTES
    assert load["full_checkpoint_bytes"] >= KEYS * VALUE_BYTES
    assert load["records_per_s"] > 0
    assert len(r["peak_rss_bytes"]) == 2 and all(b > 0 for b in r["peak_rss_bytes"].values())
    inc = r["incremental"]
    assert inc["changed_records"] == KEYS // 100
    assert inc["inc_vs_full_p50"] < 0.25, inc
    with_local, without = r["recovery"]
    assert with_local["local_recovery"] and not without["local_recovery"]
    assert with_local["restore_log"] and without["restore_log"]
    assert all("0 downloaded" in ln for ln in with_local["restore_log"]), with_local
    assert all(" 0 SST file(s) from local copies" in ln for ln in without["restore_log"]), without
    assert all(rec["resumed_s"] > 0 for rec in r["recovery"])
