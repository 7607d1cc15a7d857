"""bench/rmw_store_bench.py at a CI size (issue 34): the share of reads that find their key,
which docs/performance.md ("Why the read-modify-write rate falls") shows to be what the
per-tenth rate follows. With the job's key sequence (every key twice, from two
permutations) it grows by tenths from about 5 % to 95 %; with ``--present-share 0.5`` it
stays at one half while the state grows. Real RocksDB databases in a temporary directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

KEYS = 20_000


def bench(tmp_path: Path, *extra: str) -> dict[str, Any]:
    script = Path(__file__).resolve().parents[2] / "bench" / "rmw_store_bench.py"
    done = subprocess.run([sys.executable, str(script), "--keys", str(KEYS), "--json",
                           "--chunk", "500", "--barrier-records", "4000", "--probe-tenths",
                           "--dir", str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON "))
    return json.loads(line[len("BENCH_JSON "):])


def test_the_jobs_key_sequence_finds_a_growing_share_of_keys(tmp_path: Path) -> None:
    r = bench(tmp_path)
    shares = r["present_tenths"]
    assert len(shares) == 10
    for tenth, share in enumerate(shares):
        assert abs(share - (tenth + 0.5) / 10) < 0.03, shares
    probes = r["probe_tenths"]
    assert len(probes) == 10 and all(p["present"] > 0 and p["absent"] > 0 for p in probes)


def test_a_fixed_present_share_holds_while_the_state_grows(tmp_path: Path) -> None:
    r = bench(tmp_path, "--present-share", "0.5")
    shares = r["present_tenths"]
    assert len(shares) == 10
    assert all(0.45 < share < 0.55 for share in shares), shares
