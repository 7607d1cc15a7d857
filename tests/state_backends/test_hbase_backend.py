"""HBaseBackend specifics: chunk rows, manifests, cleanup, options."""

from __future__ import annotations

import threading

import happybase
import pytest

from jstormpy.errors import BackendError, CorruptSnapshotError
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.hbase import HBaseBackend
from jstormpy.testing.hbase import HBaseThriftServer


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
