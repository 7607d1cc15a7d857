"""State backends: where checkpoint snapshots and metadata live, selected by URI."""

from __future__ import annotations

from jstormpy.errors import BackendError
from jstormpy.state_backends.base import StateBackend


def open_backend(uri: str, **options: object) -> StateBackend:
    """Open the backend a URI names: memory://, file:///dir, hdfs://host:port/dir,
    hbase://host:port/table. Raises BackendError naming a bad URI."""
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme == "memory":
        from jstormpy.state_backends.memory import MemoryBackend
        return MemoryBackend(uri)
    if scheme == "file":
        from jstormpy.state_backends.file import FileBackend
        return FileBackend(uri)
    if scheme == "hdfs":
        from jstormpy.state_backends.hdfs import HdfsBackend  # type: ignore[import-not-found]
        return HdfsBackend(uri, **options)  # type: ignore[no-any-return]
    if scheme == "hbase":
        from jstormpy.state_backends.hbase import HBaseBackend  # type: ignore[import-not-found]
        return HBaseBackend(uri, **options)  # type: ignore[no-any-return]
    raise BackendError(f"state backend URI {uri!r} is not supported: use memory://, "
                       "file:///dir, hdfs://host:port/dir or hbase://host:port/table")


__all__ = ["StateBackend", "open_backend"]
