"""Exactly-once with the RocksDB state store (docs/state-stores.md) under real SIGKILLs of
workers and of the Topology Master, at random moments and at protocol fault points: per
key no loss, duplicate or reordering, and the keyed state (running sums, word counts)
equal to a recomputation. Every restore rebuilds the task databases from the checkpoint.
With incremental checkpoints (shared SST files) also under a SIGKILL during the SST upload
and of the TM during retention: every retained checkpoint still restores, and no SST file
of a completed checkpoint is left unreferenced (a killed upload's orphans included)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from topologies import check_keyed_sums, check_word_counts, linear, wordcount, write_corpus

from jstormpy import Config
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.changelog import load_task_snapshot
from jstormpy.state_backends.shared_files import SHARED_PREFIX, shared_file_checkpoint
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 20, 2500

# the store's default checkpoint (incremental: its native SST files) and, with
# incremental_checkpoints=False, the full dump of every entry read off the task thread
SCENARIOS = [
    ("linear", ChaosSchedule.random(seed=61, kills=2, workers=3), None),
    # die right after a task wrote the snapshot read from its native RocksDB checkpoint
    ("linear", ChaosSchedule(62, (Kill("point", point="after_snapshot", checkpoint=3,
                                       worker=1),)), False),
    ("wordcount", ChaosSchedule.random(seed=63, kills=3, workers=3, master=True,
                                       points=True), None),
    ("linear", ChaosSchedule.random(seed=67, kills=2, workers=3), False),
]


@pytest.mark.parametrize("kind,schedule,incremental", SCENARIOS,
                         ids=[f"{k}-seed{s.seed}-{'default' if i is None else 'full'}"
                              for k, s, i in SCENARIOS])
def test_rocksdb_store_exactly_once_under_sigkill(tmp_path: Path, kind: str,
                                                  schedule: ChaosSchedule,
                                                  incremental: bool | None) -> None:
    out = tmp_path / "out"
    if kind == "wordcount":
        expected = write_corpus(tmp_path / "corpus")
        topo = wordcount(out, tmp_path / "corpus")
    else:
        topo = linear(out, KEYS, PER_KEY)
    stores = tmp_path / "stores"
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000, state_store="rocksdb", state_store_dir=str(stores),
                    state_backend=f"file://{tmp_path}/ckpt",
                    incremental_checkpoints=incremental)
    status, kills, _ = run_with_chaos(topo, config, schedule, timeout=150,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained", (status, kills)
    fired = [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))]
    assert fired, f"no kill happened: {kills}"
    assert list(stores.glob("worker-*/task-*/CURRENT")), "no task opened a RocksDB"
    if kind == "wordcount":
        problems = check_word_counts(out, expected)
    else:
        problems = check_keyed_sums(out, KEYS, PER_KEY)
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"


# incremental native checkpoints: shared SST files, uploaded once, kept while referenced
INCREMENTAL = [
    # a worker dies after uploading the first new SST file of checkpoint 3, before the
    # rest and before its snapshot: those files are orphans, retention must delete them
    ("linear", ChaosSchedule(64, (Kill("point", point="during_sst_upload", checkpoint=3),))),
    # the TM dies half-way through deleting SST files no retained checkpoint references
    # (armed at three checkpoints: it fires only where a compaction left files to delete;
    # the job compacts level 0 at 2 files, not the store's 12, so compactions come often)
    ("linear", ChaosSchedule(65, tuple(Kill("point", point="master_during_segment_gc",
                                            checkpoint=c) for c in (5, 6, 9)))),
    ("wordcount", ChaosSchedule.random(seed=66, kills=3, workers=3, master=True,
                                       points=True)),
]


def check_shared_sst_files(uri: str) -> int:
    """Every retained checkpoint restores (no SST file it references was deleted), and no
    SST file is left that none of them references (beyond those of checkpoints newer than
    the newest completed one). Returns how many SST files the retained ones reference."""
    backend = open_backend(uri)
    done = backend.list_completed()
    assert done, "no checkpoint completed"
    referenced: set[str] = set()
    for cid in done:
        for entry in backend.read_metadata(cid)["tasks"].values():
            if not entry["handle"]:
                continue
            raw = pickle.loads(backend.get_snapshot(entry["handle"]))
            referenced |= {key for _n, key, _s in (raw.get("rocksdb") or {}).get("sst", ())}
            load_task_snapshot(backend, entry["handle"])  # raises if an SST file is gone
    leftovers = [k for k in backend.list_objects(SHARED_PREFIX) if k not in referenced
                 and (shared_file_checkpoint(k) or 0) <= done[-1]]
    assert not leftovers, f"unreferenced SST files survived retention: {leftovers}"
    return len(referenced)


@pytest.mark.parametrize("kind,schedule", INCREMENTAL,
                         ids=[f"{k}-seed{s.seed}" for k, s in INCREMENTAL])
def test_rocksdb_incremental_exactly_once_under_sigkill(tmp_path: Path, kind: str,
                                                        schedule: ChaosSchedule) -> None:
    out = tmp_path / "out"
    if kind == "wordcount":
        expected = write_corpus(tmp_path / "corpus")
        topo = wordcount(out, tmp_path / "corpus")
    else:
        topo = linear(out, KEYS, PER_KEY)
    config = Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                    worker_timeout_ms=5000, state_store="rocksdb",
                    state_store_dir=str(tmp_path / "stores"), incremental_checkpoints=True,
                    checkpoints_retained=1, state_backend=f"file://{tmp_path}/ckpt",
                    rocksdb_level0_compaction_trigger=2)  # SST files retention deletes
    status, kills, _ = run_with_chaos(topo, config, schedule, timeout=150,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained", (status, kills)
    fired = [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))]
    assert fired, f"no kill happened: {kills}"
    if kind == "wordcount":
        problems = check_word_counts(out, expected)
    else:
        problems = check_keyed_sums(out, KEYS, PER_KEY)
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"
    assert check_shared_sst_files(config.state_backend) > 0, "no SST file was shared"
