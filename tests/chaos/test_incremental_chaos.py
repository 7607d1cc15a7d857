"""Exactly-once with incremental checkpoints under real SIGKILLs, including a kill while
a task writes its compaction base and a kill of the Topology Master in the middle of
deleting unreferenced segments (retention racing compaction)."""

from __future__ import annotations

from pathlib import Path

import pytest
from topologies import check_keyed_sums, check_word_counts, linear, wordcount, write_corpus

from jstormpy import Config
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.changelog import SEGMENT_PREFIX, load_task_snapshot
from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

pytestmark = pytest.mark.slow

KEYS, PER_KEY = 20, 2500

SCENARIOS = [
    ("linear", ChaosSchedule.random(seed=31, kills=2, workers=3)),
    # compaction every other checkpoint: checkpoint 3 writes a new base; die right after it
    ("linear", ChaosSchedule(32, (Kill("point", point="after_segment", checkpoint=3),))),
    # the TM dies half-way through deleting the segments checkpoint 3 (a new base) made
    # unreferenced
    ("linear", ChaosSchedule(33, (Kill("point", point="master_during_segment_gc",
                                       checkpoint=3),))),
    ("wordcount", ChaosSchedule.random(seed=34, kills=3, workers=3, master=True,
                                       points=True)),
]


def _config(tmp_path: Path) -> Config:
    return Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=200,
                  worker_timeout_ms=5000, incremental_checkpoints=True,
                  incremental_compaction_every=1, checkpoints_retained=1,
                  state_backend=f"file://{tmp_path}/ckpt")


def _check_retained_checkpoints_restore(uri: str) -> None:
    """Every retained checkpoint's chains are complete, and no segment is left that no
    retained checkpoint references (beyond those of checkpoints newer than it)."""
    backend = open_backend(uri)
    done = backend.list_completed()
    assert done, "no checkpoint completed"
    referenced: set[str] = set()
    for cid in done:
        for entry in backend.read_metadata(cid)["tasks"].values():
            if entry["handle"]:
                snap = load_task_snapshot(backend, entry["handle"])  # raises if a link is gone
                referenced |= {s["key"] for s in (snap.get("incremental") or {}).get("chain", ())}
    assert referenced, "no incremental chain in the retained checkpoints"
    leftovers = [k for k in backend.list_objects(SEGMENT_PREFIX) if k not in referenced
                 and int(k.rsplit("/", 1)[1][4:14]) <= done[-1]]
    assert not leftovers, f"unreferenced segments survived retention: {leftovers}"


@pytest.mark.parametrize("kind,schedule", SCENARIOS,
                         ids=[f"{k}-seed{s.seed}" for k, s in SCENARIOS])
def test_incremental_exactly_once_under_sigkill(tmp_path: Path, kind: str,
                                                schedule: ChaosSchedule) -> None:
    out = tmp_path / "out"
    if kind == "wordcount":
        expected = write_corpus(tmp_path / "corpus")
        topo = wordcount(out, tmp_path / "corpus")
    else:
        topo = linear(out, KEYS, PER_KEY)
    config = _config(tmp_path)
    status, kills, _ = run_with_chaos(topo, config, schedule, timeout=120,
                                      home=str(tmp_path / "home"))
    assert status["state"] == "drained", (status, kills)
    fired = [k for k in kills if k.startswith(("SIGKILL", "fault point fired"))]
    assert fired, f"no kill happened: {kills}"
    if kind == "wordcount":
        problems = check_word_counts(out, expected)
    else:
        problems = check_keyed_sums(out, KEYS, PER_KEY)
    assert not problems, f"{schedule.describe()}\nkills: {kills}\n{problems}"
    _check_retained_checkpoints_restore(config.state_backend)
