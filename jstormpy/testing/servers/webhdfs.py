"""A WebHDFS REST server over a local directory, for tests and CI (no Hadoop needed).

It speaks the NameNode/DataNode protocol of Hadoop's WebHDFS
(https://hadoop.apache.org/docs/stable/hadoop-project-dist/hadoop-hdfs/WebHDFS.html)
closely enough for HdfsCLI (the ``hdfs`` package) and Hadoop's own Java
``WebHdfsFileSystem`` (e.g. Spark reading ``webhdfs://`` URLs):

* ``CREATE``/``APPEND``/``OPEN`` are two-step: the "NameNode" answers ``307`` with a
  ``Location`` on the "DataNode" endpoint (same server, ``datanode=true`` query
  parameter), or ``200 {"Location": ...}`` when the client sends ``noredirect=true``.
* Like real HDFS, a file being written is visible (growing) while its data streams in.
* Errors are ``{"RemoteException": {...}}`` JSON with Hadoop's HTTP status mapping
  (404 FileNotFoundException, 403 IOException & co, 400 IllegalArgumentException).
* Namespace operations (create/mkdirs/rename/delete) are serialised by one lock, as in
  the NameNode, so RENAME is atomic and exclusive.

Usage::

    with WebHdfsServer(tmp_dir) as srv:
        client = hdfs.InsecureClient(srv.url)

or ``jstorm testing webhdfs --port 9870 [--root DIR]`` (a temp dir by default).
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from jstormpy.testing.servers.process import serve_in_foreground
from jstormpy.testing.servers.webhdfs_handler import (  # noqa: F401 - public names stay here too
    BLOCK_SIZE,
    PREFIX,
    Namespace,
    RemoteError,
    RequestHandler,
)

log = logging.getLogger(__name__)


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], namespace: Namespace) -> None:
        self.namespace = namespace
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        self.faults = 0
        self.listing_faults: dict[str, int] = {}
        self.rename_faults: list[tuple[re.Pattern[str], int]] = []
        self.renames_failed: list[str] = []
        super().__init__(addr, RequestHandler)
        self.port = self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a reset, a proxy cut) is normal for a test
        server under fault injection: log it, don't print socketserver's traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.debug("WebHDFS client %s went away: %s", client_address, exc)
            return
        super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def take_fault(self) -> bool:
        with self.conn_lock:
            if self.faults > 0:
                self.faults -= 1
                return True
            return False

    def take_listing_fault(self, hdfs_path: str) -> bool:
        with self.conn_lock:
            left = self.listing_faults.get(hdfs_path.rstrip("/") or "/", 0)
            if left == 0:
                return False
            if left > 0:
                self.listing_faults[hdfs_path.rstrip("/") or "/"] = left - 1
            return True

    def take_rename_fault(self, destination: str) -> bool:
        with self.conn_lock:
            for i, (pattern, left) in enumerate(self.rename_faults):
                if left != 0 and pattern.fullmatch(destination):
                    if left > 0:
                        self.rename_faults[i] = (pattern, left - 1)
                    self.renames_failed.append(destination)
                    return True
            return False

    def drop_connections(self) -> None:
        with self.conn_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class WebHdfsServer:
    """A WebHDFS NameNode+DataNode REST endpoint serving files under ``root_dir``.

    Args:
        root_dir: Local directory holding the HDFS namespace (created if missing).
        host: Interface to bind.
        port: TCP port; 0 picks a free one on the first start. Restarts reuse it.
        owner: User name reported as every file's owner.
    """

    def __init__(self, root_dir: str | os.PathLike[str], host: str = "127.0.0.1",
                 port: int = 0, owner: str | None = None) -> None:
        self.root = Path(root_dir)
        self.host = host
        self.port = port
        self._namespace = Namespace(self.root, owner or getpass.getuser())
        self._httpd: HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` of the NameNode endpoint (what HdfsCLI wants)."""
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server is accepting connections."""
        return self._httpd is not None

    def fail_next(self, count: int) -> None:
        """Answer the next ``count`` requests with HTTP 503 (transient-fault injection)."""
        if self._httpd is None:
            raise RuntimeError("WebHdfsServer is not running")
        with self._httpd.conn_lock:
            self._httpd.faults = count

    def drop_connections(self) -> None:
        """Cut every open client connection now (a network fault in mid-request, e.g.
        during a streamed upload)."""
        if self._httpd is None:
            raise RuntimeError("WebHdfsServer is not running")
        self._httpd.drop_connections()

    def fail_listings(self, hdfs_path: str, count: int) -> None:
        """Answer the next ``count`` LISTSTATUS requests of directory ``hdfs_path`` with
        HTTP 404 FileNotFoundException although it exists (a NameNode failover or a
        gateway that briefly loses a mount does this). ``count=-1``: until a later call
        with ``count=0`` heals it. Every other request is served normally."""
        if self._httpd is None:
            raise RuntimeError("WebHdfsServer is not running")
        with self._httpd.conn_lock:
            self._httpd.listing_faults[hdfs_path.rstrip("/") or "/"] = count

    def fail_renames(self, destination: str, count: int) -> None:
        """Answer the next ``count`` RENAMEs onto a path matching the regular expression
        ``destination`` (whole path) with HTTP 403 IOException, a permanent error: the
        write of an object the backend puts by write-then-rename (a checkpoint's
        ``_metadata``, a ``meta/<name>`` version) fails while every other request is
        served. ``count=-1``: until a later call with ``count=0`` for the same expression.
        The destinations refused so far are in :attr:`renames_failed`."""
        if self._httpd is None:
            raise RuntimeError("WebHdfsServer is not running")
        with self._httpd.conn_lock:
            faults = [f for f in self._httpd.rename_faults if f[0].pattern != destination]
            if count:
                faults.append((re.compile(destination), count))
            self._httpd.rename_faults = faults

    @property
    def renames_failed(self) -> list[str]:
        """Destinations of the RENAMEs :meth:`fail_renames` refused, oldest first."""
        if self._httpd is None:
            return []
        with self._httpd.conn_lock:
            return list(self._httpd.renames_failed)

    def start(self) -> WebHdfsServer:
        """Bind and serve in a background thread (same port again after a stop)."""
        if self._httpd is not None:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                self._httpd = HttpServer((self.host, self.port), self._namespace)
                break
            except OSError:
                if self.port == 0 or time.monotonic() > deadline:
                    raise
                threading.Event().wait(0.05)  # port still held by a closing socket
        self.port = self._httpd.port
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name=f"webhdfs-{self.port}", daemon=True)
        self._thread.start()
        log.info("WebHDFS test server on %s serving %s", self.url, self.root)
        return self

    def stop(self) -> None:
        """Stop serving and drop open connections (the data stays in ``root_dir``)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        httpd.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=10)
        log.info("WebHDFS test server on port %d stopped", self.port)

    def __enter__(self) -> WebHdfsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def build_parser(prog: str = "python -m jstormpy.testing.servers.webhdfs"
                 ) -> argparse.ArgumentParser:
    """The command-line parser of the WebHDFS test server (exposed for docs tests)."""
    parser = argparse.ArgumentParser(prog=prog,
                                     description="WebHDFS REST test server over a directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9870)
    parser.add_argument("--root", default=None,
                        help="local directory holding the files (default: a new temp "
                             "directory, printed at start and kept after exit)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: list[str] | None = None,
         prog: str = "python -m jstormpy.testing.servers.webhdfs") -> int:
    """Serve WebHDFS in the foreground until SIGINT or SIGTERM.

    Args:
        argv: Command-line arguments (``sys.argv[1:]`` when None).
        prog: Program name shown in usage text (``jstorm testing webhdfs`` from the CLI).

    Returns:
        The exit code (0 after a clean stop).
    """
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = args.root if args.root is not None else tempfile.mkdtemp(prefix="jstorm-webhdfs-")
    server = WebHdfsServer(root, host=args.host, port=args.port).start()
    serve_in_foreground(server.stop, f"WebHDFS test server on {server.url} serving {server.root}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
