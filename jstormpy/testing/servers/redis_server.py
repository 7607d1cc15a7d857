"""A real Redis server for tests and examples (Debian's ``redis-server``), in a temp dir.

Listens on 127.0.0.1 on a free port with the append-only file on and ``appendfsync always``,
so what a sink stages is durable across a server restart (``stop()`` then ``start()``).

Example:
    >>> with RedisServer() as server:  # doctest: +SKIP
    ...     url = server.url
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jstormpy.api.errors import JStormError
from jstormpy.testing.servers.process import ServerProcess

__all__ = ["RedisServer", "append_json", "find_redis_server", "read_json_stream"]


def find_redis_server() -> str | None:
    """Path of ``redis-server`` or ``None``."""
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer(ServerProcess):
    """A throw-away Redis server; ``start()``/``stop()`` may be repeated (same data)."""

    def __init__(self) -> None:
        binary = find_redis_server()
        if binary is None:
            raise JStormError("redis-server not found: install Debian's 'redis-server' "
                              "package (scripts/setup.sh does)")
        self.binary = binary
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="jstorm-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it answers PING."""
        import redis

        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.root), "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--daemonize", "no", "--logfile", str(self.root / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
        while True:
            try:
                if client.ping():
                    break
            except redis.RedisError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise JStormError(f"redis-server on port {self.port} did not start: see "
                                  f"{self.root / 'redis.log'}")
            time.sleep(0.02)
        client.close()


def append_json(url: str, entries: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """XADD each ``(stream, fields)`` with JSON values (the encoding ``RedisStreamSink``
    writes and ``RedisStreamSpout`` reads by default), pipelined, with one client."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        pipe = client.pipeline(transaction=False)
        for stream, fields in entries:
            pipe.xadd(stream, {f: json.dumps(v) for f, v in fields.items()})
        pipe.execute()
    finally:
        client.close()


def read_json_stream(url: str, stream: str) -> list[dict[str, Any]]:
    """Every entry of ``stream`` with its JSON values decoded, read with a fresh client (what
    a reader sees of a ``RedisStreamSink``'s committed output)."""
    import redis

    with redis.Redis.from_url(url, decode_responses=True) as client:
        return [{k: json.loads(v) for k, v in kv.items()} for _, kv in client.xrange(stream)]
