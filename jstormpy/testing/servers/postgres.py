"""A real PostgreSQL server for tests and examples: ``initdb`` + ``pg_ctl`` in a temp dir.

Debian's ``postgresql`` package (``scripts/setup.sh`` installs it). The server listens on
127.0.0.1 on a free port, trusts local connections, and has ``max_prepared_transactions``
set (two-phase commit needs it). PostgreSQL refuses to run as root, so as root the server
runs as the unprivileged user ``nobody`` (via ``runuser``).

Example:
    >>> with PostgresServer() as pg:  # doctest: +SKIP
    ...     dsn = pg.create_database("t1")
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from jstormpy.api.errors import JStormError

__all__ = ["PostgresServer", "find_pg_bindir"]

_RUN_AS = "nobody"


def find_pg_bindir() -> str | None:
    """The directory holding ``initdb``/``pg_ctl`` (newest Debian version), or ``None``."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(os.path.realpath(initdb)) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A throw-away PostgreSQL cluster; ``start()``/``stop()`` may be repeated (same data).

    Args:
        max_prepared_transactions: Server setting (0 disables PREPARE TRANSACTION).
    """

    def __init__(self, max_prepared_transactions: int = 64) -> None:
        bindir = find_pg_bindir()
        if bindir is None:
            raise JStormError("PostgreSQL server binaries not found: install Debian's "
                              "'postgresql' package (scripts/setup.sh does)")
        self.bindir = bindir
        self.max_prepared = max_prepared_transactions
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="jstorm-pg-"))
        self.datadir = self.root / "data"
        self.logfile = self.root / "server.log"
        self._as_root = os.geteuid() == 0
        self._initdb()

    def _cmd(self, *args: str) -> list[str]:
        return (["runuser", "-u", _RUN_AS, "--", *args] if self._as_root else list(args))

    def _initdb(self) -> None:
        if self._as_root:
            os.chmod(self.root, 0o755)
            shutil.chown(self.root, _RUN_AS)
        subprocess.run(self._cmd(f"{self.bindir}/initdb", "-D", str(self.datadir), "-U",
                                 "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"),
                       check=True, capture_output=True, timeout=120)
        with open(self.datadir / "postgresql.conf", "a", encoding="utf-8") as fh:
            fh.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                     f"unix_socket_directories = ''\n"
                     f"max_prepared_transactions = {self.max_prepared}\n"
                     "max_connections = 100\nfsync = off\nsynchronous_commit = off\n"
                     "full_page_writes = off\nshared_buffers = 32MB\n")

    @property
    def dsn(self) -> str:
        """DSN of the ``postgres`` database."""
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        """DSN of ``database`` on this server."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and wait until it accepts connections."""
        subprocess.run(self._cmd(f"{self.bindir}/pg_ctl", "-D", str(self.datadir), "-l",
                                 str(self.logfile), "-w", "-t", str(int(timeout)), "start"),
                       check=True, capture_output=True, timeout=timeout + 10)
        deadline = time.monotonic() + timeout
        while not self.accepting():
            if time.monotonic() > deadline:
                raise JStormError(f"PostgreSQL on port {self.port} did not start: "
                                  f"see {self.logfile}")
            time.sleep(0.05)

    def accepting(self) -> bool:
        """Whether a connection is accepted now."""
        import psycopg

        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``mode``: smart, fast or immediate)."""
        subprocess.run(self._cmd(f"{self.bindir}/pg_ctl", "-D", str(self.datadir), "-m", mode,
                                 "-w", "stop"), check=False, capture_output=True, timeout=60)

    def create_database(self, name: str) -> str:
        """Create database ``name``; its DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn_for(name)

    def close(self) -> None:
        """Stop the server and delete its files."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
