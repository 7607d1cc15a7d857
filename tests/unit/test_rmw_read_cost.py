"""``bench/rmw_read_cost.py``'s ``--key-filter``: RocksDB alone as the store runs with its
key filter on. Reads of keys never written must skip RocksDB, and only they: the probe's
figures for that configuration are only worth what this holds."""

from __future__ import annotations

import json

import pytest

from bench import rmw_read_cost

pytest.importorskip("rocksdict")


def run(capsys: pytest.CaptureFixture[str], tmp_path, *extra: str) -> dict:
    assert rmw_read_cost.main(["--keys", "20000", "--present-share", "0.5", "--stats",
                               "--flush-every", "5000", "--json", "--dir", str(tmp_path),
                               *extra]) == 0
    return json.loads(capsys.readouterr().out)


def gets(r: dict) -> float:
    return sum(t["gets"] for t in r["tenths"])


def test_with_the_key_filter_only_the_reads_of_written_keys_reach_rocksdb(capsys, tmp_path):
    plain = run(capsys, tmp_path)
    filtered = run(capsys, tmp_path, "--key-filter")
    ops = plain["ops"]
    assert filtered["ops"] == ops == 40_000
    # without it every operation whose key is not in the write cache reads RocksDB: the new
    # keys (half the operations) among them
    assert gets(plain) > 0.5 * ops
    # with it, the new keys' reads are gone: what is left are re-reads of written keys
    # that the write cache did not hold (at most the other half)
    assert 0 < gets(filtered) <= 0.5 * ops
    assert gets(plain) - gets(filtered) >= 0.45 * ops
