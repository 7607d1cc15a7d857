"""Faithfulness of the HBase Thrift test server, checked with an independent real client:
happybase's public Connection/Table/Batch API, over every transport/protocol pair."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest
from thriftpy2.transport import TTransportException

from jstormpy.testing.servers.hbase import HBaseThriftServer

COMBOS = [("buffered", "binary"), ("framed", "binary"), ("buffered", "compact"),
          ("framed", "compact")]


@pytest.fixture(params=COMBOS, ids=["-".join(c) for c in COMBOS])
def conn(request: pytest.FixtureRequest) -> Iterator[happybase.Connection]:
    transport, protocol = request.param
    with HBaseThriftServer(transport=transport, protocol=protocol) as server:
        connection = happybase.Connection("127.0.0.1", server.port, timeout=5000,
                                          transport=transport, protocol=protocol)
        yield connection
        connection.close()


@pytest.fixture
def table(conn: happybase.Connection) -> happybase.Table:
    conn.create_table("t", {"cf": {"max_versions": 3}, "x": {}})
    return conn.table("t")


def test_table_admin(conn: happybase.Connection) -> None:
    assert conn.tables() == []
    conn.create_table("a", {"cf": {"max_versions": 1, "in_memory": True}})
    conn.create_table("b", {"cf": {}})
    assert conn.tables() == [b"a", b"b"]
    families = conn.table("a").families()
    assert families[b"cf"]["max_versions"] == 1 and families[b"cf"]["in_memory"] is True
    assert conn.table("a").regions()[0]["start_key"] == b""
    with pytest.raises(Exception, match="already in use"):
        conn.create_table("a", {"cf": {}})
    assert conn.is_table_enabled("a")
    conn.disable_table("a")
    assert not conn.is_table_enabled("a")
    with pytest.raises(Exception, match="TableNotEnabledException"):
        conn.table("a").row(b"r")
    conn.enable_table("a")
    with pytest.raises(Exception, match="TableNotDisabledException"):
        conn.delete_table("a")
    conn.delete_table("a", disable=True)
    conn.compact_table("b")
    conn.compact_table("b", major=True)
    assert conn.tables() == [b"b"]
    with pytest.raises(Exception, match="TableNotFoundException"):
        conn.table("zzz").row(b"r")


def test_put_row_rows_cells_versions(table: happybase.Table) -> None:
    table.put(b"r1", {b"cf:a": b"1", b"cf:b": b"2"}, timestamp=10)
    table.put(b"r1", {b"cf:a": b"3"}, timestamp=20)
    table.put(b"r1", {b"x:q": b"z"})
    assert table.row(b"r1") == {b"cf:a": b"3", b"cf:b": b"2", b"x:q": b"z"}
    assert table.row(b"r1", columns=[b"cf:a"], include_timestamp=True) == {
        b"cf:a": (b"3", 20)}
    assert table.row(b"r1", columns=[b"cf"]) == {b"cf:a": b"3", b"cf:b": b"2"}
    assert table.row(b"r1", timestamp=20) == {b"cf:a": b"1", b"cf:b": b"2"}  # [0, ts)
    assert table.row(b"missing") == {}
    assert table.cells(b"r1", b"cf:a") == [b"3", b"1"]
    assert table.cells(b"r1", b"cf:a", versions=1, include_timestamp=True) == [(b"3", 20)]
    assert table.cells(b"r1", b"cf:a", timestamp=20) == [b"1"]
    for ts in (30, 40, 50):
        table.put(b"r1", {b"cf:a": b"%d" % ts}, timestamp=ts)
    assert len(table.cells(b"r1", b"cf:a", versions=10)) == 3  # max_versions
    table.put(b"r2", {b"cf:a": b"r2"})
    assert table.rows([b"r2", b"missing", b"r1"], columns=[b"cf:a"]) == [
        (b"r2", {b"cf:a": b"r2"}), (b"r1", {b"cf:a": b"50"})]
    with pytest.raises(Exception, match="NoSuchColumnFamilyException"):
        table.put(b"r3", {b"nofam:a": b"1"})


def test_delete(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"1", b"cf:b": b"2", b"x:c": b"3"})
    table.delete(b"r", columns=[b"cf:a"])
    assert table.row(b"r") == {b"cf:b": b"2", b"x:c": b"3"}
    table.delete(b"r", columns=[b"x"])
    assert table.row(b"r") == {b"cf:b": b"2"}
    table.delete(b"r")
    assert table.row(b"r") == {}
    table.put(b"t", {b"cf:a": b"old"}, timestamp=5)
    table.put(b"t", {b"cf:a": b"new"}, timestamp=15)
    table.delete(b"t", timestamp=10)  # deletes versions <= 10
    assert table.cells(b"t", b"cf:a", versions=5) == [b"new"]


def test_scan(table: happybase.Table) -> None:
    for key in [b"a1", b"a2", b"a3", b"b1", b"b2", b"c"]:
        table.put(key, {b"cf:v": key})
    table.put(b"b1", {b"x:only": b"1"})
    assert [k for k, _ in table.scan()] == [b"a1", b"a2", b"a3", b"b1", b"b2", b"c"]
    assert [k for k, _ in table.scan(row_prefix=b"b")] == [b"b1", b"b2"]
    assert [k for k, _ in table.scan(row_start=b"a2", row_stop=b"b2")] == [b"a2", b"a3", b"b1"]
    assert [k for k, _ in table.scan(columns=[b"x"])] == [b"b1"]  # rows without cells skipped
    assert [k for k, _ in table.scan(limit=2)] == [b"a1", b"a2"]
    assert [k for k, _ in table.scan(batch_size=1)] == [b"a1", b"a2", b"a3", b"b1", b"b2", b"c"]
    assert [k for k, _ in table.scan(reverse=True, row_start=b"b2")] == [b"b2", b"b1", b"a3",
                                                                        b"a2", b"a1"]
    rows = dict(table.scan(row_prefix=b"b1", include_timestamp=True))
    assert set(rows[b"b1"]) == {b"cf:v", b"x:only"}
    sorted_row = next(iter(table.scan(row_prefix=b"b1", sorted_columns=True)))[1]
    assert list(sorted_row) == [b"cf:v", b"x:only"]
    partial = list(table.scan(row_prefix=b"b1", scan_batching=1))
    assert [len(cols) for _, cols in partial] == [1, 1]
    with pytest.raises(Exception, match="filter strings are not supported"):
        list(table.scan(filter=b"KeyOnlyFilter()"))


def test_batch_and_counters(table: happybase.Table) -> None:
    with table.batch(batch_size=3) as batch:
        for i in range(10):
            batch.put(b"k%02d" % i, {b"cf:v": b"%d" % i})
        batch.delete(b"k00")
    assert len(list(table.scan())) == 9
    with table.batch(transaction=True) as batch:
        batch.put(b"tx", {b"cf:v": b"1"})
    assert table.row(b"tx") == {b"cf:v": b"1"}
    assert table.counter_get(b"c", b"cf:n") == 0
    assert table.counter_inc(b"c", b"cf:n") == 1
    assert table.counter_inc(b"c", b"cf:n", value=10) == 11
    assert table.counter_dec(b"c", b"cf:n", value=2) == 9
    table.counter_set(b"c", b"cf:n", 100)
    assert table.counter_get(b"c", b"cf:n") == 100
    table.put(b"c", {b"cf:text": b"abc"})
    with pytest.raises(Exception, match="not a long"):
        table.counter_inc(b"c", b"cf:text")


def test_raw_thrift_calls(conn: happybase.Connection, table: happybase.Table) -> None:
    client = conn.client
    table.put(b"r", {b"cf:a": b"1"})
    assert [c.value for c in client.get(b"t", b"r", b"cf:a", {})] == [b"1"]
    sid = client.scannerOpenWithPrefix(b"t", b"r", None, {})
    assert [r.row for r in client.scannerGet(sid)] == [b"r"]
    assert client.scannerGet(sid) == []
    client.scannerClose(sid)
    with pytest.raises(Exception, match="scanner ID is invalid"):
        client.scannerClose(sid)
    client.deleteAllRow(b"t", b"r", {})
    assert client.getRow(b"t", b"r", {}) == []


def test_check_and_put(conn: happybase.Connection, table: happybase.Table) -> None:
    # HBase's checkAndMutate via happybase's raw Thrift client: None expects the cell absent
    # (or empty, as HRegion compares), a value expects that value; the put lands only then
    from Hbase_thrift import Mutation

    client = conn.client

    def put(column: bytes, value: bytes, is_delete: bool = False) -> Mutation:
        return Mutation(isDelete=is_delete, column=column, value=value)

    assert client.checkAndPut(b"t", b"r", b"cf:a", None, put(b"cf:a", b"1"), {}) is True
    assert table.row(b"r") == {b"cf:a": b"1"}
    assert client.checkAndPut(b"t", b"r", b"cf:a", None, put(b"cf:a", b"2"), {}) is False
    assert client.checkAndPut(b"t", b"r", b"cf:a", b"", put(b"cf:a", b"2"), {}) is False
    assert client.checkAndPut(b"t", b"r", b"cf:a", b"9", put(b"cf:a", b"2"), {}) is False
    assert table.row(b"r") == {b"cf:a": b"1"}
    # an expected value that matches: the put may go to another column of the row
    assert client.checkAndPut(b"t", b"r", b"cf:a", b"1", put(b"cf:b", b"x"), {}) is True
    assert client.checkAndPut(b"t", b"r", b"cf:a", b"1", put(b"cf:a", b"3"), {}) is True
    assert table.row(b"r") == {b"cf:a": b"3", b"cf:b": b"x"}
    # the check is of the newest version of that one column, in that one row
    assert client.checkAndPut(b"t", b"other", b"cf:a", b"3", put(b"cf:a", b"4"), {}) is False
    assert client.checkAndPut(b"t", b"r", b"cf:c", None, put(b"cf:c", b"c"), {}) is True
    # an empty cell counts as absent for an empty/None expectation (HRegion.checkAndMutate)
    table.put(b"e", {b"cf:a": b""})
    assert client.checkAndPut(b"t", b"e", b"cf:a", None, put(b"cf:a", b"was empty"), {}) is True
    assert table.row(b"e") == {b"cf:a": b"was empty"}
    # the mutation is applied as a put even if it says delete (HBase builds a Put of it)
    assert client.checkAndPut(b"t", b"d", b"cf:a", None, put(b"cf:a", b"v", True), {}) is True
    assert table.row(b"d") == {b"cf:a": b"v"}
    with pytest.raises(Exception, match="NoSuchColumnFamilyException"):
        client.checkAndPut(b"t", b"r", b"nope:a", None, put(b"cf:a", b"v"), {})
    with pytest.raises(Exception, match="NoSuchColumnFamilyException"):
        client.checkAndPut(b"t", b"n", b"cf:a", None, put(b"nope:a", b"v"), {})
    assert table.row(b"n") == {}
    with pytest.raises(Exception, match="TableNotFoundException"):
        client.checkAndPut(b"zzz", b"r", b"cf:a", None, put(b"cf:a", b"v"), {})


def test_check_and_put_is_atomic_across_connections() -> None:
    from Hbase_thrift import Mutation

    with HBaseThriftServer() as server:
        clients = [happybase.Connection("127.0.0.1", server.port, timeout=5000)
                   for _ in range(8)]
        clients[0].create_table("t", {"cf": {}})
        start = threading.Barrier(len(clients))
        results: dict[int, bool] = {}

        def race(i: int, c: happybase.Connection) -> None:
            start.wait(timeout=10)
            mput = Mutation(isDelete=False, column=b"cf:a", value=b"%d" % i)
            results[i] = c.client.checkAndPut(b"t", b"race", b"cf:a", None, mput, {})

        threads = [threading.Thread(target=race, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        winners = [i for i, ok in results.items() if ok]
        assert len(results) == len(clients) and len(winners) == 1
        assert clients[0].table("t").row(b"race") == {b"cf:a": b"%d" % winners[0]}
        for c in clients:
            c.close()


def test_pool_and_restart_with_data_dir(tmp_path: Path) -> None:
    server = HBaseThriftServer(data_dir=tmp_path / "hb").start()
    try:
        pool = happybase.ConnectionPool(2, host="127.0.0.1", port=server.port)
        with pool.connection() as c:
            c.create_table("p", {"cf": {}})
            c.table("p").put(b"r", {b"cf:a": b"1"})
        server.stop()
        conn = happybase.Connection("127.0.0.1", server.port, autoconnect=False)
        with pytest.raises(TTransportException):
            conn.open()
        server.start()
    finally:
        server.stop()
    again = HBaseThriftServer(data_dir=tmp_path / "hb").start()  # a new process, same dir
    try:
        conn = happybase.Connection("127.0.0.1", again.port)
        assert conn.table("p").row(b"r") == {b"cf:a": b"1"}
        conn.close()
    finally:
        again.stop()
