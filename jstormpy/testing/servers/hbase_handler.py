"""The HBase Thrift v1 service of :mod:`jstormpy.testing.servers.hbase`: the ``Hbase`` IDL, the
compact-protocol codec, the in-memory versioned tables and the service handler (HBase's
``ThriftHBaseServiceHandler`` semantics). The server and the CLI are in ``hbase``.
"""

from __future__ import annotations

import itertools
import struct
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocol
from thriftpy2.transport import (
    TBufferedTransportFactory,
    TFramedTransportFactory,
)

Hbase = thriftpy2.load(str(resources.files("happybase") / "Hbase.thrift"),
                       module_name="jstormpy_hbase_thrift")
LATEST = 2**63 - 1


class _CompactProtocol(TCompactProtocol):  # type: ignore[misc]
    """Compact protocol that keeps binary fields as bytes but decodes method names
    (thriftpy2's compact reader returns the name as bytes with decode_response=False)."""

    def read_message_begin(self) -> tuple[str, int, int]:
        name, mtype, seqid = super().read_message_begin()
        return (name.decode() if isinstance(name, bytes) else name), mtype, seqid


class CompactProtocolFactory:
    def __init__(self, decode_response: bool = False) -> None:
        self.decode_response = decode_response

    def get_protocol(self, trans: Any) -> _CompactProtocol:
        return _CompactProtocol(trans, decode_response=self.decode_response)


TRANSPORTS: dict[str, Any] = {"buffered": TBufferedTransportFactory,
                              "framed": TFramedTransportFactory}
PROTOCOLS: dict[str, Any] = {"binary": TBinaryProtocolFactory,
                             "compact": CompactProtocolFactory}

# row -> column ("cf:qual") -> versions [(ts, value)], newest first
Row = dict[bytes, list[tuple[int, bytes]]]


@dataclass
class Table:
    families: dict[bytes, dict[str, Any]]
    enabled: bool = True
    rows: dict[bytes, Row] = field(default_factory=dict)
    created: int = field(default_factory=lambda: int(time.time() * 1000))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _io_error(message: str) -> Exception:
    exc: Exception = Hbase.IOError(message=message)
    return exc


def _family(column: bytes) -> tuple[bytes, bytes | None]:
    """``b"cf:q"`` -> (b"cf", b"q"); ``b"cf"``/``b"cf:"`` -> (b"cf", None) (whole family)."""
    fam, _sep, qual = column.partition(b":")
    return fam, (qual or None)


class _Scanner:
    def __init__(self, results: list[tuple[bytes, dict[bytes, tuple[int, bytes]]]],
                 batch: int | None, sort_columns: bool) -> None:
        self.results = results
        self.batch = batch
        self.sort_columns = sort_columns
        self.pos = 0


class HbaseHandler:
    """Implements the ``Hbase`` service over in-memory tables."""

    def __init__(self, host: str, port_ref: Any) -> None:
        self.tables: dict[bytes, Table] = {}
        self.lock = threading.RLock()
        self.scanners: dict[int, _Scanner] = {}
        self.scanner_ids = itertools.count(1)
        self.host = host
        self._port_ref = port_ref

    # -- helpers ------------------------------------------------------------------------
    def _table(self, name: bytes, need_enabled: bool = True) -> Table:
        table = self.tables.get(name)
        if table is None:
            raise _io_error(f"org.apache.hadoop.hbase.TableNotFoundException: "
                            f"{name.decode(errors='replace')}")
        if need_enabled and not table.enabled:
            raise _io_error(f"org.apache.hadoop.hbase.TableNotEnabledException: "
                            f"{name.decode(errors='replace')} is disabled.")
        return table

    def _check_family(self, table: Table, name: bytes, column: bytes) -> None:
        fam, _ = _family(column)
        if fam not in table.families:
            raise _io_error(
                f"org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException: Column "
                f"family {fam.decode(errors='replace')} does not exist in region "
                f"{name.decode(errors='replace')}")

    @staticmethod
    def _wants(columns: list[bytes] | None, column: bytes) -> bool:
        if not columns:
            return True
        fam = column.split(b":", 1)[0]
        for want in columns:
            wfam, wqual = _family(want)
            if wfam == fam and (wqual is None or column == want):
                return True
        return False

    def _select(self, row: Row, columns: list[bytes] | None, max_ts: int = LATEST,
                versions: int = 1) -> dict[bytes, list[tuple[int, bytes]]]:
        out = {}
        for col, cells in row.items():
            if not self._wants(columns, col):
                continue
            picked = [c for c in cells if c[0] < max_ts or max_ts == LATEST][:versions]
            if picked:
                out[col] = picked
        return out

    @staticmethod
    def _row_result(key: bytes, cols: dict[bytes, tuple[int, bytes]],
                    sort_columns: bool = False) -> Any:
        if sort_columns:
            return Hbase.TRowResult(row=key, sortedColumns=[
                Hbase.TColumn(columnName=c, cell=Hbase.TCell(value=v, timestamp=ts))
                for c, (ts, v) in sorted(cols.items())])
        return Hbase.TRowResult(row=key, columns={
            c: Hbase.TCell(value=v, timestamp=ts) for c, (ts, v) in cols.items()})

    def _latest(self, table: Table, key: bytes, columns: list[bytes] | None,
                max_ts: int = LATEST) -> dict[bytes, tuple[int, bytes]]:
        row = table.rows.get(key)
        if row is None:
            return {}
        return {c: v[0] for c, v in self._select(row, columns, max_ts).items()}

    def _put(self, table: Table, key: bytes, column: bytes, value: bytes, ts: int) -> None:
        fam, qual = _family(column)
        col = fam + b":" + (qual or b"")
        cells = table.rows.setdefault(key, {}).setdefault(col, [])
        cells[:] = [c for c in cells if c[0] != ts]
        cells.append((ts, value))
        cells.sort(key=lambda c: c[0], reverse=True)
        del cells[int(table.families[fam].get("maxVersions") or 1):]

    def _delete(self, table: Table, key: bytes, column: bytes | None, ts: int) -> None:
        row = table.rows.get(key)
        if row is None:
            return
        for col in list(row):
            if column is not None:
                fam, qual = _family(column)
                if col.split(b":", 1)[0] != fam or (qual is not None and col != column):
                    continue
            row[col] = [c for c in row[col] if c[0] > ts]
            if not row[col]:
                del row[col]
        if not row:
            del table.rows[key]

    def _mutate(self, name: bytes, key: bytes, mutations: list[Any], ts: int | None) -> None:
        table = self._table(name)
        for m in mutations:
            self._check_family(table, name, m.column)
        put_ts = ts if ts is not None else _now_ms()
        for m in mutations:
            if m.isDelete:
                self._delete(table, key, m.column, ts if ts is not None else LATEST)
            else:
                self._put(table, key, m.column, m.value if m.value is not None else b"",
                          put_ts)

    # -- tables -------------------------------------------------------------------------
    def enableTable(self, tableName: bytes) -> None:
        with self.lock:
            self._table(tableName, need_enabled=False).enabled = True

    def disableTable(self, tableName: bytes) -> None:
        with self.lock:
            self._table(tableName, need_enabled=False).enabled = False

    def isTableEnabled(self, tableName: bytes) -> bool:
        with self.lock:
            return self._table(tableName, need_enabled=False).enabled

    def compact(self, tableNameOrRegionName: bytes) -> None:
        with self.lock:
            self._table(tableNameOrRegionName, need_enabled=False)

    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self.compact(tableNameOrRegionName)

    def getTableNames(self) -> list[bytes]:
        with self.lock:
            return sorted(self.tables)

    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        with self.lock:
            table = self._table(tableName, need_enabled=False)
            return {fam + b":": Hbase.ColumnDescriptor(**{**opts, "name": fam + b":"})
                    for fam, opts in table.families.items()}

    def getTableRegions(self, tableName: bytes) -> list[Any]:
        with self.lock:
            table = self._table(tableName, need_enabled=False)
            return [Hbase.TRegionInfo(
                startKey=b"", endKey=b"", id=table.created,
                name=tableName + b",," + str(table.created).encode() + b".", version=1,
                serverName=self.host.encode(), port=self._port_ref())]

    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        with self.lock:
            if not tableName or not all(ch.isalnum() or ch in "_-."
                                        for ch in tableName.decode(errors="replace")):
                raise Hbase.IllegalArgument(message=f"Illegal table name {tableName!r}")
            if tableName in self.tables:
                raise Hbase.AlreadyExists(message="table name already in use")
            if not columnFamilies:
                raise Hbase.IllegalArgument(message="Table should have at least one "
                                                    "column family.")
            families = {}
            for cd in columnFamilies:
                fam = cd.name.rstrip(b":")
                if not fam:
                    raise Hbase.IllegalArgument(message="Family name can not be empty")
                families[fam] = {
                    "maxVersions": cd.maxVersions, "compression": cd.compression,
                    "inMemory": cd.inMemory, "bloomFilterType": cd.bloomFilterType,
                    "bloomFilterVectorSize": cd.bloomFilterVectorSize,
                    "bloomFilterNbHashes": cd.bloomFilterNbHashes,
                    "blockCacheEnabled": cd.blockCacheEnabled, "timeToLive": cd.timeToLive}
            self.tables[tableName] = Table(families)

    def deleteTable(self, tableName: bytes) -> None:
        with self.lock:
            table = self._table(tableName, need_enabled=False)
            if table.enabled:
                raise _io_error(f"org.apache.hadoop.hbase.TableNotDisabledException: "
                                f"{tableName.decode(errors='replace')}")
            del self.tables[tableName]

    # -- reads --------------------------------------------------------------------------
    def get(self, tableName: bytes, row: bytes, column: bytes,
            attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getVer(tableName, row, column, 1, attributes)

    def getVer(self, tableName: bytes, row: bytes, column: bytes, numVersions: int,
               attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getVerTs(tableName, row, column, LATEST, numVersions, attributes)

    def getVerTs(self, tableName: bytes, row: bytes, column: bytes, timestamp: int,  # noqa: PLR0917 - IDL signature
                 numVersions: int, attributes: dict[bytes, bytes]) -> list[Any]:
        with self.lock:
            table = self._table(tableName)
            self._check_family(table, tableName, column)
            data = table.rows.get(row) or {}
            cells = self._select(data, [column], timestamp, max(1, numVersions))
            out: list[Any] = []
            for _col, versions in sorted(cells.items()):
                out.extend(Hbase.TCell(value=v, timestamp=ts) for ts, v in versions)
            return out

    def getRow(self, tableName: bytes, row: bytes, attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowWithColumnsTs(tableName, row, None, LATEST, attributes)

    def getRowWithColumns(self, tableName: bytes, row: bytes, columns: list[bytes] | None,
                          attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowWithColumnsTs(tableName, row, columns, LATEST, attributes)

    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int,
                 attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowWithColumnsTs(tableName, row, None, timestamp, attributes)

    def getRowWithColumnsTs(self, tableName: bytes, row: bytes, columns: list[bytes] | None,
                            timestamp: int, attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, [row], columns, timestamp, attributes)

    def getRows(self, tableName: bytes, rows: list[bytes],
                attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, None, LATEST, attributes)

    def getRowsWithColumns(self, tableName: bytes, rows: list[bytes],
                           columns: list[bytes] | None,
                           attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, columns, LATEST, attributes)

    def getRowsTs(self, tableName: bytes, rows: list[bytes], timestamp: int,
                  attributes: dict[bytes, bytes]) -> list[Any]:
        return self.getRowsWithColumnsTs(tableName, rows, None, timestamp, attributes)

    def getRowsWithColumnsTs(self, tableName: bytes, rows: list[bytes],
                             columns: list[bytes] | None, timestamp: int,
                             attributes: dict[bytes, bytes]) -> list[Any]:
        with self.lock:
            table = self._table(tableName)
            for col in columns or []:
                self._check_family(table, tableName, col)
            out = []
            for key in rows or []:
                cols = self._latest(table, key, columns, timestamp)
                if cols:
                    out.append(self._row_result(key, cols))
            return out

    def getRowOrBefore(self, tableName: bytes, row: bytes, family: bytes) -> list[Any]:
        with self.lock:
            table = self._table(tableName)
            keys = sorted(k for k in table.rows if k <= row)
            for key in reversed(keys):
                cols = self._latest(table, key, [family])
                if cols:
                    return [Hbase.TCell(value=v, timestamp=ts)
                            for _c, (ts, v) in sorted(cols.items())]
            return []

    def getRegionInfo(self, row: bytes) -> Any:
        with self.lock:
            name = row.split(b",", 1)[0]
            return self.getTableRegions(name)[0]

    # -- writes -------------------------------------------------------------------------
    def mutateRow(self, tableName: bytes, row: bytes, mutations: list[Any],
                  attributes: dict[bytes, bytes]) -> None:
        with self.lock:
            self._mutate(tableName, row, mutations, None)

    def mutateRowTs(self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int,
                    attributes: dict[bytes, bytes]) -> None:
        with self.lock:
            self._mutate(tableName, row, mutations, timestamp)

    def mutateRows(self, tableName: bytes, rowBatches: list[Any],
                   attributes: dict[bytes, bytes]) -> None:
        with self.lock:
            for batch in rowBatches:
                self._mutate(tableName, batch.row, batch.mutations, None)

    def mutateRowsTs(self, tableName: bytes, rowBatches: list[Any], timestamp: int,
                     attributes: dict[bytes, bytes]) -> None:
        with self.lock:
            for batch in rowBatches:
                self._mutate(tableName, batch.row, batch.mutations, timestamp)

    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        with self.lock:
            table = self._table(tableName)
            self._check_family(table, tableName, column)
            cur = self._latest(table, row, [column]).get(column)
            old = 0
            if cur is not None:
                if len(cur[1]) != 8:
                    raise _io_error("org.apache.hadoop.hbase.DoNotRetryIOException: "
                                    "Field is not a long, it's 8 bytes wide")
                old = struct.unpack(">q", cur[1])[0]
            new: int = old + value
            self._put(table, row, column, struct.pack(">q", new), _now_ms())
            return new

    def increment(self, increment: Any) -> None:
        self.atomicIncrement(increment.table, increment.row, increment.column,
                             increment.ammount)

    def incrementRows(self, increments: list[Any]) -> None:
        with self.lock:
            for inc in increments:
                self.increment(inc)

    def append(self, append: Any) -> list[Any]:
        with self.lock:
            table = self._table(append.table)
            out = []
            ts = _now_ms()
            for col, val in zip(append.columns, append.values, strict=True):
                self._check_family(table, append.table, col)
                cur = self._latest(table, append.row, [col]).get(col)
                new = (cur[1] if cur else b"") + val
                self._put(table, append.row, col, new, ts)
                out.append(Hbase.TCell(value=new, timestamp=ts))
            return out

    def checkAndPut(self, tableName: bytes, row: bytes, column: bytes, value: bytes | None,  # noqa: PLR0917 - IDL signature
                    mput: Any, attributes: dict[bytes, bytes]) -> bool:
        """HBase's ``checkAndMutate(row, family).qualifier(q)``: ``value`` None means
        ``ifNotExists()`` and a value ``ifEquals(value)``; HRegion treats an absent or
        empty expected value alike, so either matches a missing cell or an empty one.
        ``mput`` is always applied as a put (its ``isDelete`` is ignored, as HBase
        builds a ``Put`` from it), at the current time, only when the check matches."""
        with self.lock:
            table = self._table(tableName)
            self._check_family(table, tableName, column)
            self._check_family(table, tableName, mput.column)
            cur = self._latest(table, row, [column]).get(column)
            if not value:
                matches = cur is None or cur[1] == b""
            else:
                matches = cur is not None and cur[1] == value
            if matches:
                self._put(table, row, mput.column,
                          mput.value if mput.value is not None else b"", _now_ms())
            return matches

    def deleteAll(self, tableName: bytes, row: bytes, column: bytes,
                  attributes: dict[bytes, bytes]) -> None:
        self.deleteAllTs(tableName, row, column, LATEST, attributes)

    def deleteAllTs(self, tableName: bytes, row: bytes, column: bytes, timestamp: int,
                    attributes: dict[bytes, bytes]) -> None:
        with self.lock:
            table = self._table(tableName)
            self._check_family(table, tableName, column)
            self._delete(table, row, column, timestamp)

    def deleteAllRow(self, tableName: bytes, row: bytes,
                     attributes: dict[bytes, bytes]) -> None:
        self.deleteAllRowTs(tableName, row, LATEST, attributes)

    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int,
                       attributes: dict[bytes, bytes]) -> None:
        with self.lock:
            self._delete(self._table(tableName), row, None, timestamp)

    # -- scanners -----------------------------------------------------------------------
    def _open(self, tableName: bytes, start: bytes | None, stop: bytes | None,
              columns: list[bytes] | None, timestamp: int | None, *, prefix: bytes | None = None,
              filter_string: bytes | None = None, batch: int | None = None,
              sort_columns: bool = False, reverse: bool = False) -> int:
        if filter_string:
            raise _io_error("filter strings are not supported by the jstormpy HBase test "
                            f"server: {filter_string!r}")
        with self.lock:
            table = self._table(tableName)
            for col in columns or []:
                self._check_family(table, tableName, col)
            keys = sorted(table.rows, reverse=reverse)
            results = []
            for key in keys:
                if prefix is not None and not key.startswith(prefix):
                    continue
                if reverse:
                    if start and key > start:
                        continue
                    if stop and key <= stop:
                        break
                else:
                    if start and key < start:
                        continue
                    if stop and key >= stop:
                        break
                cols = self._latest(table, key, columns, timestamp or LATEST)
                if cols:
                    results.append((key, cols))
            scanner_id = next(self.scanner_ids)
            self.scanners[scanner_id] = _Scanner(results, batch if batch and batch > 0
                                                 else None, bool(sort_columns))
            return scanner_id

    def scannerOpenWithScan(self, tableName: bytes, scan: Any,
                            attributes: dict[bytes, bytes]) -> int:
        return self._open(tableName, scan.startRow, scan.stopRow, scan.columns,
                          scan.timestamp, filter_string=scan.filterString,
                          batch=scan.batchSize, sort_columns=bool(scan.sortColumns),
                          reverse=bool(scan.reversed))

    def scannerOpen(self, tableName: bytes, startRow: bytes, columns: list[bytes] | None,
                    attributes: dict[bytes, bytes]) -> int:
        return self._open(tableName, startRow, None, columns, None)

    def scannerOpenWithStop(self, tableName: bytes, startRow: bytes, stopRow: bytes,
                            columns: list[bytes] | None,
                            attributes: dict[bytes, bytes]) -> int:
        return self._open(tableName, startRow, stopRow, columns, None)

    def scannerOpenWithPrefix(self, tableName: bytes, startAndPrefix: bytes,
                              columns: list[bytes] | None,
                              attributes: dict[bytes, bytes]) -> int:
        return self._open(tableName, startAndPrefix, None, columns, None,
                          prefix=startAndPrefix)

    def scannerOpenTs(self, tableName: bytes, startRow: bytes, columns: list[bytes] | None,
                      timestamp: int, attributes: dict[bytes, bytes]) -> int:
        return self._open(tableName, startRow, None, columns, timestamp)

    def scannerOpenWithStopTs(self, tableName: bytes, startRow: bytes, stopRow: bytes,  # noqa: PLR0917 - IDL signature
                              columns: list[bytes] | None, timestamp: int,
                              attributes: dict[bytes, bytes]) -> int:
        return self._open(tableName, startRow, stopRow, columns, timestamp)

    def _scanner(self, scanner_id: int) -> _Scanner:
        scanner = self.scanners.get(scanner_id)
        if scanner is None:
            raise Hbase.IllegalArgument(message="scanner ID is invalid")
        return scanner

    def scannerGet(self, id: int) -> list[Any]:  # noqa: A002 - IDL argument name
        return self.scannerGetList(id, 1)

    def scannerGetList(self, id: int, nbRows: int) -> list[Any]:  # noqa: A002
        with self.lock:
            scanner = self._scanner(id)
            out: list[Any] = []
            while len(out) < max(1, nbRows) and scanner.pos < len(scanner.results):
                key, cols = scanner.results[scanner.pos]
                scanner.pos += 1
                if scanner.batch:
                    items = sorted(cols.items())
                    for i in range(0, len(items), scanner.batch):
                        out.append(self._row_result(key, dict(items[i:i + scanner.batch]),
                                                    scanner.sort_columns))
                else:
                    out.append(self._row_result(key, cols, scanner.sort_columns))
            return out

    def scannerClose(self, id: int) -> None:  # noqa: A002
        with self.lock:
            self._scanner(id)
            del self.scanners[id]
