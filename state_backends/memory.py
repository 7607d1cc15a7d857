"""``memory://`` — snapshots in the process's memory (tests; lost with the process).

Several opens of the same ``memory://name`` within one process share one store.
"""

from __future__ import annotations

import threading

from jstormpy.api.errors import ObjectExistsError, SnapshotNotFoundError
from jstormpy.state_backends.base import StateBackend

_STORES: dict[str, dict[str, bytes]] = {}
_LOCK = threading.Lock()


class MemoryBackend(StateBackend):
    """A dict of key → bytes, shared per URI within the process."""

    def __init__(self, uri: str = "memory://") -> None:
        self.uri = uri
        with _LOCK:
            self._objects = _STORES.setdefault(uri, {})

    def put_object(self, key: str, data: bytes) -> None:
        with _LOCK:
            self._objects[key] = bytes(data)

    def create_object(self, key: str, data: bytes) -> None:
        with _LOCK:
            if key in self._objects:
                raise ObjectExistsError(f"{key!r} exists in {self.uri}")
            self._objects[key] = bytes(data)

    def get_object(self, key: str) -> bytes:
        with _LOCK:
            try:
                return self._objects[key]
            except KeyError:
                raise SnapshotNotFoundError(f"no object {key!r} in {self.uri}") from None

    def list_objects(self, prefix: str) -> list[str]:
        with _LOCK:
            return [k for k in self._objects if k.startswith(prefix)]

    def delete_objects(self, prefix: str) -> None:
        with _LOCK:
            for k in [k for k in self._objects if k.startswith(prefix)]:
                del self._objects[k]
