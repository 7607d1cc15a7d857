"""An HBase Thrift (v1) server with in-memory tables, for tests and CI (no HBase needed).

It implements the ``Hbase`` service of the ``Hbase.thrift`` IDL that ships inside the
happybase package (loaded with ``thriftpy2.load``), over buffered or framed transport
and binary or compact protocol — the same options ``happybase.Connection`` offers.
Semantics follow HBase's ``ThriftHBaseServiceHandler``:

* cells are versioned by millisecond timestamp, newest first, trimmed to the column
  family's ``maxVersions``; a put with an existing timestamp replaces that version;
* ``*Ts`` reads/scans use the time range ``[0, timestamp)`` (exclusive);
* a single ``mutateRow`` is atomic (one lock guards all tables);
* rows without matching cells are not returned (``getRows``, scans with columns);
* errors are the IDL's ``IOError`` / ``IllegalArgument`` / ``AlreadyExists`` with
  HBase-like messages (``TableNotFoundException``, ``NoSuchColumnFamilyException``...).

Filter strings are not supported (``IOError``). With ``data_dir`` the tables are saved
to ``data_dir/hbase-tables.pickle`` on ``stop()`` and loaded on ``start()``; a
stop/start of the same instance keeps the tables either way.

Usage: ``with HBaseThriftServer() as srv: happybase.Connection("127.0.0.1", srv.port)``
or ``python -m jstormpy.testing.servers.hbase --port 9090``.
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import socket
import threading
from collections.abc import Collection
from pathlib import Path

from thriftpy2.thrift import TProcessor
from thriftpy2.transport import (
    TSocket,
    TTransportException,
)

from jstormpy.testing.servers.hbase_handler import (  # noqa: F401 - public names stay here too
    LATEST,
    PROTOCOLS,
    TRANSPORTS,
    CompactProtocolFactory,
    Hbase,
    HbaseHandler,
    Table,
)
from jstormpy.testing.servers.process import serve_in_foreground

log = logging.getLogger(__name__)


class HBaseThriftServer:
    """An in-process HBase Thrift v1 endpoint.

    Args:
        host: Interface to bind.
        port: TCP port; 0 picks a free one on the first start. Restarts reuse it.
        data_dir: If set, tables persist there across stop/start (and processes).
        transport: ``"buffered"`` or ``"framed"`` (must match the clients).
        protocol: ``"binary"`` or ``"compact"`` (must match the clients).
        without: IDL methods to leave out: a call of one gets Thrift's ``UNKNOWN_METHOD``
            application error, as from an older gateway whose IDL lacks it.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 data_dir: str | os.PathLike[str] | None = None, transport: str = "buffered",
                 protocol: str = "binary", without: Collection[str] = ()) -> None:
        if transport not in TRANSPORTS or protocol not in PROTOCOLS:
            raise ValueError(f"transport must be one of {sorted(TRANSPORTS)} and protocol one "
                             f"of {sorted(PROTOCOLS)}, not {transport!r}/{protocol!r}")
        self.host = host
        self.port = port
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.transport = transport
        self.protocol = protocol
        self.handler = HbaseHandler(host, lambda: self.port)
        service = Hbase.Hbase
        if without:
            unknown = set(without) - set(service.thrift_services)
            if unknown:
                raise ValueError(f"not methods of the Hbase IDL: {sorted(unknown)}")
            service = type("Hbase", (service,), {"thrift_services": [
                name for name in service.thrift_services if name not in without]})
        self._processor = TProcessor(service, self.handler)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()

    @property
    def running(self) -> bool:
        """Whether the server is accepting connections."""
        return self._sock is not None

    def _store_path(self) -> Path | None:
        return self.data_dir / "hbase-tables.pickle" if self.data_dir else None

    def start(self) -> HBaseThriftServer:
        """Bind and serve in background threads (same port again after a stop)."""
        if self._sock is not None:
            return self
        store = self._store_path()
        if store is not None and store.exists():
            with store.open("rb") as fh:
                self.handler.tables = pickle.load(fh)  # noqa: S301 - our own file
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._thread = threading.Thread(target=self._accept_loop, args=(sock,),
                                        name=f"hbase-thrift-{self.port}", daemon=True)
        self._thread.start()
        log.info("HBase Thrift test server on %s:%d (%s/%s)", self.host, self.port,
                 self.transport, self.protocol)
        return self

    def _accept_loop(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _addr = sock.accept()
            except OSError:
                return  # listening socket closed by stop()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._conn_lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve_conn, args=(conn,), daemon=True).start()

    def _serve_conn(self, conn: socket.socket) -> None:
        tsock = TSocket(sock=conn)
        trans = TRANSPORTS[self.transport]().get_transport(tsock)
        proto = PROTOCOLS[self.protocol](decode_response=False).get_protocol(trans)
        try:
            while True:
                self._processor.process(proto, proto)
        except (TTransportException, OSError, EOFError):
            pass
        except Exception:
            log.exception("HBase Thrift test server: connection failed")
        finally:
            with self._conn_lock:
                self._conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Stop listening and drop open connections (tables are kept, see data_dir)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        with self._conn_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
        store = self._store_path()
        if store is not None:
            store.parent.mkdir(parents=True, exist_ok=True)
            tmp = store.with_suffix(".tmp")
            with self.handler.lock, tmp.open("wb") as fh:
                pickle.dump(self.handler.tables, fh)
            os.replace(tmp, store)
        log.info("HBase Thrift test server on port %d stopped", self.port)

    def __enter__(self) -> HBaseThriftServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def build_parser(prog: str = "python -m jstormpy.testing.servers.hbase") -> argparse.ArgumentParser:
    """The command-line parser of the HBase test server (exposed for docs tests)."""
    parser = argparse.ArgumentParser(prog=prog,
                                     description="HBase Thrift v1 test server (in memory)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9090)
    parser.add_argument("--data-dir", default=None,
                        help="persist tables here on stop (SIGINT or SIGTERM)")
    parser.add_argument("--transport", choices=sorted(TRANSPORTS), default="buffered")
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="binary")
    return parser


def main(argv: list[str] | None = None,
         prog: str = "python -m jstormpy.testing.servers.hbase") -> int:
    """Serve HBase Thrift in the foreground until SIGINT or SIGTERM.

    Args:
        argv: Command-line arguments (``sys.argv[1:]`` when None).
        prog: Program name shown in usage text (``jstorm testing hbase`` from the CLI).

    Returns:
        The exit code (0 after a clean stop; tables are saved to ``--data-dir`` first).
    """
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = HBaseThriftServer(args.host, args.port, args.data_dir, args.transport,
                               args.protocol).start()
    serve_in_foreground(server.stop, f"HBase Thrift test server on {server.host}:{server.port}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
