"""How a task database compresses its files (``COMPRESSION`` in jstormpy/state_store.py;
issue 34): LZ4, and a checkpoint whose files were written with Snappy (RocksDB's default,
the store's before) restores, reads and goes on taking writes and compactions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jstormpy.state_store as ss
from jstormpy.state_backends import open_backend
from tests.unit.rocksdb_options import options_section
from tests.unit.test_rocksdb_files import checkpoint, native_store, restore

N = 40_000


def compressions(store: ss.RocksDBStore) -> set[str]:
    """The compression each live SST file of ``store`` records in its properties block
    (``rocksdb.compression``; the block is stored uncompressed, its keys share prefixes:
    ``rocksdb.comparator`` before it leaves ``...ression`` and the value)."""
    names = set()
    for sst in store.path.glob("*.sst"):
        found = re.findall(rb"ression(LZ4|Snappy|NoCompression|ZSTD|Zlib)", sst.read_bytes())
        assert len(found) == 1, (sst, found)
        names.add(found[0].decode())
    return names


def value(i: int) -> str:
    return f"{i:08d}:" + "payload " * 30  # ~250 bytes that compress, as state values do


def test_the_store_writes_lz4_files(tmp_path: Path) -> None:
    st = ss.RocksDBStore(tmp_path / "db", 128)
    d: Any = st.open("kv", None, None)
    for i in range(N):
        d[i] = value(i)
    st.flush()
    st.families["kv"].flush(True)
    assert options_section(st.path, "CFOptions", "s:kv")["compression"] == "kLZ4Compression"
    assert compressions(st) == {"LZ4"}
    assert all(d[i] == value(i) for i in range(0, N, 97))
    st.close()


def test_a_checkpoint_written_with_snappy_restores_and_compacts(tmp_path: Path,
                                                                monkeypatch: Any) -> None:
    backend = open_backend(f"file://{tmp_path / 'ckpt'}")
    try:
        monkeypatch.setattr(ss, "COMPRESSION", "snappy")  # as before the change
        old = native_store(tmp_path / "old")
        counts = old.open("counts", None, None)
        for i in range(N):
            counts[f"k{i}"] = value(i)
        handle, _ = checkpoint(backend, old, {"counts": counts}, 1)
        assert compressions(old) == {"Snappy"}
        old.close()
        monkeypatch.undo()

        new, states = restore(backend, handle, tmp_path / "new")
        kv: Any = states["counts"]
        assert len(kv) == N and kv["k0"] == value(0) and kv[f"k{N - 1}"] == value(N - 1)
        for i in range(0, N, 3):  # overwrite a third: LZ4 files beside the Snappy ones
            kv[f"k{i}"] = value(-i)
        checkpoint(backend, new, states, 2)
        new.families["counts"].compact_range(None, None)  # both merged into LZ4
        assert compressions(new) == {"LZ4"}
        assert len(kv) == N
        assert all(kv[f"k{i}"] == value(-i if i % 3 == 0 else i) for i in range(0, N, 7))
        assert kv.get("absent") is None
        new.close()
    finally:
        backend.close()
