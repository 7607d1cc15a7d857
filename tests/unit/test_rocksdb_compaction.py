"""The RocksDB store's compaction settings (``store_options`` in jstormpy/state_store.py):
the options a task database really opens with, and what they are for: incremental
checkpoints of 1 % updates that mostly upload only the flushed memtable (issue 25)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

import jstormpy.state_store as ss
from jstormpy.state_store import RocksDBStore
from tests.unit.rocksdb_options import options_section

MAX_P = 128
STORE_TRIGGER = ss.LEVEL0_COMPACTION_TRIGGER  # before a test sets another
BUSY = ("rocksdb.mem-table-flush-pending", "rocksdb.compaction-pending",
        "rocksdb.num-running-flushes", "rocksdb.num-running-compactions")


def cf_options(db_dir: Path, family: str) -> dict[str, str]:
    """The ``[CFOptions "<family>"]`` section of the newest OPTIONS file RocksDB wrote in
    ``db_dir`` (the options the database runs with, as RocksDB itself reports them)."""
    return options_section(db_dir, "CFOptions", family)


def universal_options(opts: dict[str, str]) -> dict[str, str]:
    """``compaction_options_universal={a=1;b=2;}`` of an OPTIONS section, as a dict."""
    inner = opts["compaction_options_universal"].strip("{}")
    return dict(part.split("=", 1) for part in inner.split(";") if part)


def test_task_database_opens_with_the_chosen_compaction(tmp_path: Path) -> None:
    """Universal compaction by default: at most ``LEVEL0_COMPACTION_TRIGGER`` sorted runs
    once RocksDB has caught up (what a lookup probes), the slowdown and stop triggers (which
    count sorted runs under universal) well above it."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("counts", None, None)
    d["a"] = 1
    st.flush()
    opts = cf_options(tmp_path / "task-1", "s:counts")
    assert ss.COMPACTION_STYLE == "universal"
    assert opts["compaction_style"] == "kCompactionStyleUniversal"
    assert int(opts["level0_file_num_compaction_trigger"]) == ss.LEVEL0_COMPACTION_TRIGGER == 12
    assert int(opts["level0_slowdown_writes_trigger"]) == ss.LEVEL0_SLOWDOWN_TRIGGER
    assert int(opts["level0_stop_writes_trigger"]) == ss.LEVEL0_STOP_TRIGGER
    assert (ss.LEVEL0_COMPACTION_TRIGGER < ss.LEVEL0_SLOWDOWN_TRIGGER
            < ss.LEVEL0_STOP_TRIGGER)
    assert int(opts["write_buffer_size"]) == ss.WRITE_BUFFER_BYTES
    st.close()


def test_task_database_compacts_beside_a_long_merge(tmp_path: Path) -> None:
    """Three compaction threads (``BACKGROUND_JOBS`` 4: RocksDB keeps one for flushes), so
    newer sorted runs merge among themselves while a merge of the larger runs holds one
    thread: with RocksDB's default of one compaction thread they piled up behind it and
    every get probed them (issue 34; docs/performance.md, "Flat reads: compaction
    threads")."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("counts", None, None)
    d["a"] = 1
    st.flush()
    assert ss.BACKGROUND_JOBS == 4
    db = options_section(tmp_path / "task-1", "DBOptions", "")
    assert int(db["max_background_jobs"]) == ss.BACKGROUND_JOBS
    st.close()


def test_universal_compaction_bounds_the_disk(tmp_path: Path) -> None:
    """The bound on the disk between merges of all sorted runs: RocksDB merges them all
    once the newer runs add up to ``UNIVERSAL_MAX_SIZE_AMP_PERCENT`` of the oldest (the
    bulk of the state), so the SST files stay within about (1 + that / 100) times it;
    the merges' size ratio (RocksDB's 1 %) and width (2 runs) stay RocksDB's."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    d: Any = st.open("counts", None, None)
    d["a"] = 1
    st.flush()
    u = universal_options(cf_options(tmp_path / "task-1", "s:counts"))
    assert int(u["max_size_amplification_percent"]) == ss.UNIVERSAL_MAX_SIZE_AMP_PERCENT
    assert int(u["size_ratio"]) == 1 and int(u["min_merge_width"]) == 2
    assert u["stop_style"] == "kCompactionStopStyleTotalSize"
    st.close()


def test_task_database_keeps_level0_compactions_small(tmp_path: Path) -> None:
    """With ``Config(rocksdb_compaction_style="level")`` the base level stays small (32 MB,
    8 MB files) so a level-0 compaction, which with
    uniformly random keys rewrites the base level whole, costs the same at any state size:
    with RocksDB's 256 MB / 64 MB it rewrote the whole database up to 256 MB, took longer as
    the state grew, and level-0 files piled up meanwhile, each one more filter probe for
    every read (issue 34; docs/performance.md, "Flat reads: the base level")."""
    st = RocksDBStore(tmp_path / "task-1", MAX_P, compaction_style="level")
    d: Any = st.open("counts", None, None)
    d["a"] = 1
    st.flush()
    opts = cf_options(tmp_path / "task-1", "s:counts")
    assert opts["compaction_style"] == "kCompactionStyleLevel"
    assert int(opts["level0_file_num_compaction_trigger"]) == ss.LEVEL0_COMPACTION_TRIGGER
    assert int(opts["max_bytes_for_level_base"]) == ss.LEVEL1_BYTES == 32 << 20
    assert int(opts["target_file_size_base"]) == ss.TARGET_FILE_BYTES == 8 << 20
    assert opts["level_compaction_dynamic_level_bytes"] == "true"
    st.close()


def test_config_sets_the_compaction_style(tmp_path: Path) -> None:
    """``Config.rocksdb_compaction_style`` is validated and reaches the database (the
    worker passes it to ``open_store``)."""
    from jstormpy import Config
    from jstormpy.api.errors import ConfigError
    from jstormpy.state_store import open_store

    assert Config().rocksdb_compaction_style == "universal"
    bad: Any
    for bad in ("leveled", "Universal", "fifo", None, 1):
        with pytest.raises(ConfigError, match="rocksdb_compaction_style"):
            Config(rocksdb_compaction_style=bad)
    for style, name in (("level", "kCompactionStyleLevel"),
                        ("universal", "kCompactionStyleUniversal")):
        st: Any = open_store("rocksdb", tmp_path / f"task-{style}", MAX_P,
                             compaction_style=Config(rocksdb_compaction_style=style)
                             .rocksdb_compaction_style)
        d: Any = st.open("counts", None, None)
        d["a"] = 1
        st.flush()
        assert cf_options(tmp_path / f"task-{style}", "s:counts")["compaction_style"] == name
        st.close()


def test_config_sets_the_level0_trigger(tmp_path: Path) -> None:
    """``Config.rocksdb_level0_compaction_trigger`` is validated and reaches the database
    (the worker passes it to ``open_store``); slowdown and stop stay above it."""
    from jstormpy import Config
    from jstormpy.api.errors import ConfigError
    from jstormpy.state_store import open_store

    assert Config().rocksdb_level0_compaction_trigger == ss.LEVEL0_COMPACTION_TRIGGER
    bad: Any
    for bad in (1, 65, 4.0, "8", True):
        with pytest.raises(ConfigError, match="rocksdb_level0_compaction_trigger"):
            Config(rocksdb_level0_compaction_trigger=bad)
    for trigger in (2, 20):
        st: Any = open_store("rocksdb", tmp_path / f"task-{trigger}", MAX_P,
                             level0_trigger=trigger)
        d: Any = st.open("counts", None, None)
        d["a"] = 1
        st.flush()
        opts = cf_options(tmp_path / f"task-{trigger}", "s:counts")
        assert int(opts["level0_file_num_compaction_trigger"]) == trigger
        slowdown, stop = (int(opts[f"level0_{w}_writes_trigger"]) for w in ("slowdown", "stop"))
        assert trigger < slowdown < stop and slowdown >= 2 * trigger
        st.close()


def sorted_runs(cf: Any) -> int:
    """Sorted runs of ``cf``: each level-0 file, and each non-empty level below."""
    rows = [r.split() for r in (cf.property_value("rocksdb.levelstats") or "").splitlines()[2:]]
    files = {int(r[0]): int(r[1]) for r in rows if len(r) >= 2 and r[0].isdigit()}
    return files.get(0, 0) + sum(1 for level, n in files.items() if level > 0 and n)


def owes_compaction(cf: Any, trigger: int) -> bool:
    """Whether RocksDB still has a compaction to run in ``cf``. Under leveled compaction,
    ``rocksdb.compaction-pending``. Under universal that property is 1 as soon as the
    sorted runs reach ``trigger`` (RocksDB's ``NeedsCompaction``: a score of runs /
    trigger >= 1), but its picker merges runs without regard to their sizes only when
    there are *more* than ``trigger`` (``num_sr_not_compacted > max_num_runs``); at
    exactly ``trigger`` runs whose sizes neither the size ratio nor the size
    amplification bound calls for merging, it picks nothing ("skipping compaction for file
    num" in RocksDB's LOG) and the property stays 1 until the next flush. That is its
    resting state, not a compaction owed: it owes one while runs exceed the trigger."""
    if ss.COMPACTION_STYLE == "universal":
        return sorted_runs(cf) > trigger
    return bool(cf.property_int_value("rocksdb.compaction-pending"))


def settle(cf: Any, trigger: int, timeout_s: float = 30.0) -> None:
    """Wait until no flush or compaction is pending or running in ``cf``."""
    deadline = time.monotonic() + timeout_s
    while (any(cf.property_int_value(p) for p in BUSY if p != "rocksdb.compaction-pending")
           or owes_compaction(cf, trigger)):
        assert time.monotonic() < deadline, "RocksDB still compacting"
        time.sleep(0.01)


def incremental_bytes(tmp_path: Path, intervals: int) -> tuple[int, list[int]]:
    """A 20 MB task database, then ``intervals`` checkpoint intervals each rewriting 1 %
    of the keys at random; every checkpoint the engine's way (native checkpoint, upload
    of the SST files the backend does not hold, task snapshot). The memtable is scaled
    down with the database (64 KB for 100 000 keys; 16 MB for a task's 10M keys at 20M
    keys on 2 tasks), and so are the write cache (400 entries: an interval flushes 2-3
    memtables, as there), level 1 (3 MB) and the compactions' files (768 KB), so the
    database has the levels of a big one. RocksDB's
    compactions finish before each checkpoint (an interval long enough for them), so
    the bytes do not depend on the machine's load. Returns the full checkpoint's bytes
    and each incremental one's."""
    from jstormpy.runtime.snapshots import capture, release, serialise, upload_native
    from jstormpy.state_backends import open_backend

    keys, value_bytes = 100_000, 180
    rng = random.Random(3)
    blob = rng.randbytes(1 << 20)

    def value(i: int, version: int) -> bytes:  # incompressible, new per version
        at = (i * 7919 + version * 104729) % (len(blob) - value_bytes)
        return blob[at:at + value_bytes]

    st = RocksDBStore(tmp_path / "task-1", MAX_P)
    st.native_checkpoints = True
    st.key_groups = range(0, MAX_P)
    backend = open_backend(f"file://{tmp_path}/ckpt")
    d: Any = st.open("kv", None, None)
    written = []
    for cid in range(1, intervals + 2):
        for _ in range(keys // 100 if cid > 1 else 0):
            i = rng.randrange(keys)
            d[i] = value(i, cid)
        if cid == 1:
            for i in range(keys):
                d[i] = value(i, 0)
        st.flush()
        settle(d.cf, ss.LEVEL0_COMPACTION_TRIGGER)
        view = capture({"states": {"kv": d}})
        try:
            _, sst_bytes = upload_native(view, backend, task_id=1, checkpoint_id=cid,
                                         generation=1, attempt="t")
            written.append(sst_bytes + len(serialise(view)))
        finally:
            release(view)
    st.close()
    return written[0], written[1:]


@pytest.mark.parametrize("style, trigger", [
    ("level", STORE_TRIGGER), ("level", 4), ("universal", STORE_TRIGGER), ("universal", 4)])
def test_one_percent_updates_checkpoint_under_5_percent(tmp_path: Path, monkeypatch: Any,
                                                        style: str, trigger: int) -> None:
    """Leveled, with the store's level-0 trigger the p50 incremental checkpoint is < 5 % of
    a full one; with RocksDB's default (4) it is not: most checkpoints then carry the output
    of a level-0 compaction, which rewrites level 1 whole (uniformly random keys).
    Universal (the store's default) with the store's trigger: < 5 % as well, most
    checkpoints carry only the flushed memtable, and no checkpoint uploads more than a full
    one (a merge of all sorted runs uploads the whole database). Universal with 4: RocksDB
    settles (its ``compaction-pending`` stays 1 at exactly 4 runs: ``owes_compaction``),
    within the same bound; its p50 is 3-12 % (at 4 runs each flush is merged into the
    newest run, which grows and is uploaded again each interval), so the store keeps 12.
    Universal's merges depend on the timing of the background flushes and compactions, so
    its bytes vary from run to run; the bounds hold in all (p50 1.6 % with 12)."""
    monkeypatch.setattr(ss, "COMPACTION_STYLE", style)
    monkeypatch.setattr(ss, "WRITE_BUFFER_BYTES", 64 << 10)
    monkeypatch.setattr(ss, "WRITE_CACHE_ENTRIES", 400)
    monkeypatch.setattr(ss, "LEVEL1_BYTES", 3 << 20)
    monkeypatch.setattr(ss, "TARGET_FILE_BYTES", 768 << 10)
    monkeypatch.setattr(ss, "LEVEL0_COMPACTION_TRIGGER", trigger)
    full, inc = incremental_bytes(tmp_path, 16)
    p50 = sorted(inc)[len(inc) // 2] / full
    shares = (full, [round(b / full, 3) for b in inc])
    if style == "universal":
        assert max(inc) / full < 1.1, shares
        if trigger == STORE_TRIGGER:
            assert p50 < 0.05, shares
    elif trigger == STORE_TRIGGER:
        assert p50 < 0.05, shares
        # compactions still run (they bound the disk) and are paid for now and then
        assert max(inc) / full > 0.1 and sum(inc) / len(inc) / full < 0.12
    else:
        assert p50 > 0.05, shares


@pytest.mark.parametrize("first, second", [("level", "universal"), ("universal", "level")])
def test_a_database_opens_under_the_other_style(tmp_path: Path, monkeypatch: Any,
                                                first: str, second: str) -> None:
    """A task database written under one compaction style (a native checkpoint taken
    before ``Config.rocksdb_compaction_style`` changed) opens under the other with every
    entry, and takes writes and compactions there."""
    monkeypatch.setattr(ss, "WRITE_BUFFER_BYTES", 64 << 10)
    monkeypatch.setattr(ss, "LEVEL1_BYTES", 1 << 20)
    monkeypatch.setattr(ss, "TARGET_FILE_BYTES", 256 << 10)
    rd = ss.rocksdict_module()
    rng = random.Random(1)
    db = rd.Rdict(str(tmp_path), options=ss.store_options(rd, compaction_style=first))
    for i in range(30_000):
        db[rng.randrange(100_000).to_bytes(4, "big")] = b"v" * 100 + i.to_bytes(4, "big")
    db.flush(True)
    want = dict(db.items())
    assert sorted_runs(db) > 1  # files in more than one run or level
    db.close()
    # as RocksDBStore.open_restored opens a restored checkpoint: each column family's
    # options given (without them rocksdict takes the newest OPTIONS file's)
    opts = ss.store_options(rd, compaction_style=second)
    db = rd.Rdict(str(tmp_path), options=opts, column_families={
        n: ss.store_options(rd, compaction_style=second)
        for n in rd.Rdict.list_cf(str(tmp_path))})
    assert dict(db.items()) == want
    for _ in range(30_000):
        db[rng.randrange(100_000).to_bytes(4, "big")] = b"w" * 100
    db.flush(True)
    assert len(dict(db.items())) >= len(want)
    db.close()
    assert cf_options(tmp_path, "default")["compaction_style"] == (
        "kCompactionStyleUniversal" if second == "universal" else "kCompactionStyleLevel")
