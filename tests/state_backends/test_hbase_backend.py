"""HBaseBackend specifics: chunk rows, manifests, cleanup, options."""

from __future__ import annotations

import threading
from typing import Any

import happybase
import pytest

from jstormpy.api.errors import BackendError, CorruptSnapshotError, ObjectExistsError
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.hbase import HBaseBackend
from jstormpy.testing.servers.hbase import HBaseThriftServer


def _backend(server: HBaseThriftServer, **options: object) -> HBaseBackend:
    opts: dict[str, object] = {"retries": 2, "backoff_s": 0.01, "chunk_bytes": 1 << 20}
    opts.update(options)
    backend = open_backend(f"hbase://127.0.0.1:{server.port}/ckpt", **opts)
    assert isinstance(backend, HBaseBackend)
    return backend


def _rows(server: HBaseThriftServer) -> list[bytes]:
    return sorted(server.handler.tables[b"ckpt"].rows)


def test_chunk_rows_and_cleanup(hbase_server: HBaseThriftServer) -> None:
    b = _backend(hbase_server)
    data = bytes(range(256)) * (5 * 4096 + 1)  # ~5 MiB -> 6 chunks
    h = b.put_snapshot(1, 0, data)
    rows = _rows(hbase_server)
    assert len(rows) == 7 and rows[0] == h.encode()
    assert all(r.startswith(h.encode() + b"\x00") for r in rows[1:])
    assert b.list_objects("") == [h]
    assert b.get_snapshot(h) == data
    b.put_snapshot(1, 0, b"small")  # replaces: old chunks deleted
    assert _rows(hbase_server) == [h.encode()]
    b.put_snapshot(1, 0, data)
    b.discard_checkpoint(1)
    assert _rows(hbase_server) == []


def test_table_is_created_with_one_version(hbase_server: HBaseThriftServer) -> None:
    b = _backend(hbase_server, column_family="cp")
    b.put_meta("x", b"1")
    conn = happybase.Connection("127.0.0.1", hbase_server.port)
    assert conn.table("ckpt").families()[b"cp"]["max_versions"] == 1
    conn.close()


def test_orphan_chunks_are_invisible_and_deleted(hbase_server: HBaseThriftServer) -> None:
    b = _backend(hbase_server)
    b.put_meta("init", b"")  # creates the table
    conn = happybase.Connection("127.0.0.1", hbase_server.port)
    conn.table("ckpt").put(b"chk-0000000002/task-00000-g0.snap\x00dead\x0000000000",
                           {b"s:c": b"crashed put", b"s:k": b""})
    assert b.list_objects("chk-") == []
    b.delete_objects("chk-0000000002/")
    assert _rows(hbase_server) == [b"meta/init"]
    conn.close()


def test_missing_chunk_is_corruption(hbase_server: HBaseThriftServer) -> None:
    b = _backend(hbase_server)
    h = b.put_snapshot(3, 0, b"z" * (3 << 20))
    conn = happybase.Connection("127.0.0.1", hbase_server.port)
    chunk = [r for r in _rows(hbase_server) if b"\x00" in r][1]
    conn.table("ckpt").delete(chunk)
    with pytest.raises(CorruptSnapshotError, match="missing 1 of 4 chunks"):
        b.get_snapshot(h)
    conn.close()


def test_readers_never_see_partial_values(hbase_server: HBaseThriftServer) -> None:
    writer, reader = _backend(hbase_server), _backend(hbase_server)
    values = [bytes([i]) * ((2 << 20) + i) for i in range(6)]
    errors: list[BaseException] = []
    done = threading.Event()

    def read_loop() -> None:
        try:
            while not done.is_set():
                got = reader.get_meta("big")
                assert got is None or got in values
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=read_loop)
    thread.start()
    try:
        for value in values:
            writer.put_meta("big", value)
    finally:
        done.set()
        thread.join(timeout=60)
    assert not errors, errors
    assert reader.get_meta("big") == values[-1]


@pytest.mark.parametrize(("transport", "protocol"), [("framed", "compact"),
                                                     ("buffered", "compact")])
def test_transport_and_protocol_options(transport: str, protocol: str) -> None:
    with HBaseThriftServer(transport=transport, protocol=protocol) as server:
        b = _backend(server, transport=transport, protocol=protocol)
        h = b.put_snapshot(1, 0, b"x" * (3 << 20))
        assert b.get_snapshot(h) == b"x" * (3 << 20)
        b.close()


def test_options_validated(hbase_server: HBaseThriftServer) -> None:
    with pytest.raises(BackendError, match="chunk_bytes"):
        HBaseBackend("hbase://127.0.0.1:9090/t", chunk_bytes=4 << 20)
    with pytest.raises(BackendError, match="transport"):
        HBaseBackend("hbase://127.0.0.1:9090/t", transport="http")
    with pytest.raises(BackendError, match="hbase://host:port/table"):
        HBaseBackend("hbase://127.0.0.1:9090/")
    b = _backend(hbase_server, create_table=False)
    with pytest.raises(BackendError, match="does not exist"):
        b.list_objects("")


def test_increments_are_stored_a_row_per_key_group(hbase_server: HBaseThriftServer) -> None:
    """A delta segment of an incremental checkpoint: one row per key group; a restore of
    some key groups reads only their rows; the whole object round-trips byte for byte;
    a lost key-group row is named; retention deletes the rows with the segment."""
    from jstormpy.keygroups import key_group
    from jstormpy.state_backends.changelog import (
        build_delta,
        decode_segment,
        restore_key_groups,
        segment_key,
    )

    b = _backend(hbase_server)
    deleted = object()
    changes = {"counts": {f"k{i}": i for i in range(500)} | {"k7": deleted}}
    header = {"checkpoint_id": 2, "task_id": 1, "generation": 1, "max_parallelism": 128,
              "groups": [0, 128]}
    data = build_delta(changes, deleted, header)
    key = segment_key(1, 2, 1, "delta")
    b.put_object(key, data)
    groups = sorted({key_group(k, 128) for k in changes["counts"]})
    rows = _rows(hbase_server)
    group_rows = [r for r in rows if r.startswith(key.encode() + b"\x00")]
    assert len(group_rows) == len(groups) and rows.count(key.encode()) == 1
    assert all(r.rsplit(b"\x00", 1)[1] == b"g%05d" % g
               for r, g in zip(sorted(group_rows), groups, strict=True))
    assert b.list_objects("inc/") == [key]
    assert b.get_object(key) == data
    wanted = set(groups[:3])
    part = b.get_segment(key, wanted)
    assert len(part) < len(data) / 10
    _head, sections = decode_segment(part, key)
    assert [g for g, _p in sections] == groups[:3]
    chain = [{"key": key, "cid": 2, "kind": "delta", "groups": [0, 128]}]
    got = restore_key_groups(b, chain, wanted, 128)["counts"]
    assert got == {k: v for k, v in changes["counts"].items()
                   if v is not deleted and key_group(k, 128) in wanted}
    conn = happybase.Connection("127.0.0.1", hbase_server.port)
    conn.table("ckpt").delete(sorted(group_rows)[1])
    conn.close()
    with pytest.raises(CorruptSnapshotError, match=rf"key group\(s\) \[{groups[1]}\]"):
        b.get_object(key)
    b.delete_objects(key)
    assert _rows(hbase_server) == []


def test_a_created_object_is_one_manifest_cell_and_losers_leave_no_chunks(
        hbase_server: HBaseThriftServer) -> None:
    # issue 27: create_object commits with one checkAndPut of the manifest cell
    b = _backend(hbase_server, chunk_bytes=64 * 1024)
    b.create_object("meta/small", b"commit point")
    row = hbase_server.handler.tables[b"ckpt"].rows[b"meta/small"]
    assert sorted(row) == [b"s:m"]  # the value travels in the manifest cell
    assert row[b"s:m"][0][1].endswith(b"\x00commit point")
    assert b.get_object("meta/small") == b"commit point"
    big = bytes(range(256)) * 1024  # 256 KiB -> 4 chunk rows
    b.create_object("meta/big", big)
    rows = _rows(hbase_server)
    with pytest.raises(ObjectExistsError, match=r"'meta/big' exists in hbase://127\.0\.0\.1"):
        b.create_object("meta/big", big[::-1])
    assert _rows(hbase_server) == rows  # the loser's chunk rows are deleted again
    assert b.get_object("meta/big") == big
    b.put_object("meta/small", b"replaced by a put")  # an ordinary put still replaces it
    assert b.get_object("meta/small") == b"replaced by a put"
    b.close()


def test_a_retried_create_whose_answer_was_lost_is_the_win(
        hbase_server: HBaseThriftServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # the gateway applies the put, then the connection drops before the answer: the backend
    # retries on a fresh connection, checkAndPut says no, and the manifest found is its own
    b = _backend(hbase_server)
    real = hbase_server.handler.checkAndPut
    calls: list[bool] = []

    def lose_first_answer(*args: Any) -> bool:
        won: bool = real(*args)
        calls.append(won)
        if len(calls) == 1:
            raise ConnectionResetError("answer lost (test)")  # the server drops the socket
        return won

    monkeypatch.setattr(hbase_server.handler, "checkAndPut", lose_first_answer)
    b.create_object("chk-0000000001/_metadata", b"mine")
    assert calls == [True, False]
    assert b.get_object("chk-0000000001/_metadata") == b"mine"
    with pytest.raises(ObjectExistsError):  # a second creator still loses
        b.create_object("chk-0000000001/_metadata", b"other")
    b.close()


def test_a_gateway_without_check_and_put_fails_the_create_clearly() -> None:
    with HBaseThriftServer(without=["checkAndPut"]) as server:
        b = _backend(server)
        b.put_object("meta/plain", b"ok")  # everything else works
        with pytest.raises(BackendError, match="has no checkAndPut") as info:
            b.create_metadata(1, {"tasks": {}})
        assert not isinstance(info.value, ObjectExistsError)
        assert b.list_completed() == []  # nothing written by check-then-write instead
        b.close()
