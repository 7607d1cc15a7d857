"""State backends: where checkpoint snapshots and metadata live, selected by URI."""

from __future__ import annotations

from jstormpy.api.errors import BackendError
from jstormpy.state_backends.base import StateBackend


def open_backend(uri: str, **options: object) -> StateBackend:
    """Open the backend a URI names: memory://, file:///dir, hdfs://host:port/dir,
    hbase://host:port/table. Raises BackendError naming a bad URI, ConfigError naming an
    option the backend does not take."""
    check_backend_options(uri, options)
    return _open_backend(uri, **options)


def check_backend_options(uri: str, options: dict[str, object]) -> None:
    """Refuse options the backend of ``uri`` does not take (without connecting)."""
    import inspect

    from jstormpy.api.errors import ConfigError

    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if not options:
        return
    if scheme in ("memory", "file"):
        raise ConfigError(f"state_backend_options {sorted(options)} given, but {scheme}:// "
                          "takes no options")
    if scheme == "hdfs":
        from jstormpy.state_backends.hdfs import HdfsBackend as cls
    elif scheme == "hbase":
        from jstormpy.state_backends.hbase import HBaseBackend as cls  # type: ignore[assignment]
    else:
        return
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "uri"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigError(f"state_backend_options {unknown} are not settings of {scheme}:// "
                          f"(it takes: {', '.join(sorted(accepted))})")


def _open_backend(uri: str, **options: object) -> StateBackend:
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
