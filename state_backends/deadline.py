"""Deadlines on state-backend calls: a backend that hangs fails the call, not the caller.

A storage server can accept a connection and never answer. Per-request socket timeouts do
not bound a call that retries, and a caller holding a lock (the Topology Master) must
never wait on storage for long. :class:`DeadlineBackend` runs each primitive of the
wrapped backend on a helper thread and waits at most ``timeout_ms`` for it; past that
the caller gets a :class:`~jstormpy.api.errors.BackendTimeoutError` naming the backend, the call and
the deadline. The abandoned call finishes (or fails) on its own thread; while
``max_outstanding`` of them are still stuck, new calls fail at once instead of piling up
more threads on a dead server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from jstormpy.api.errors import BackendTimeoutError
from jstormpy.state_backends.base import StateBackend

T = TypeVar("T")


class DeadlineBackend(StateBackend):
    """Wraps ``inner``: every put/get/list/delete returns or fails within ``timeout_ms``."""

    def __init__(self, inner: StateBackend, timeout_ms: int, max_outstanding: int = 4) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.timeout_s = timeout_ms / 1000.0
        self.max_outstanding = max_outstanding
        self._lock = threading.Lock()
        self._stuck = 0

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._stuck >= self.max_outstanding:
                raise BackendTimeoutError(
                    f"state backend {self.uri}: {self._stuck} earlier call(s) still have no "
                    f"answer after {self.timeout_s * 1000:.0f} ms (state_backend_timeout_ms); "
                    f"not starting {what}")
        done = threading.Event()
        box: dict[str, Any] = {}
        abandoned = [False]

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the caller
                box["error"] = exc
            finally:
                with self._lock:
                    if abandoned[0]:
                        self._stuck -= 1
                done.set()

        threading.Thread(target=run, daemon=True, name=f"backend-call-{what}").start()
        if not done.wait(self.timeout_s):
            with self._lock:
                if not done.is_set():
                    abandoned[0] = True
                    self._stuck += 1
                    raise BackendTimeoutError(
                        f"state backend {self.uri} did not answer {what} within "
                        f"{self.timeout_s * 1000:.0f} ms (state_backend_timeout_ms)")
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]

    def put_object(self, key: str, data: bytes) -> None:
        self._call(f"put {key}", lambda: self.inner.put_object(key, data))

    def put_object_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        self._call(f"put {key}", lambda: self.inner.put_object_stream(key, chunks))

    def create_object(self, key: str, data: bytes) -> None:
        self._call(f"create {key}", lambda: self.inner.create_object(key, data))

    def get_object(self, key: str) -> bytes:
        return self._call(f"get {key}", lambda: self.inner.get_object(key))

    def get_segment(self, key: str, groups: set[int] | None = None) -> bytes:
        return self._call(f"get {key}", lambda: self.inner.get_segment(key, groups))

    def list_objects(self, prefix: str) -> list[str]:
        return self._call(f"list {prefix}", lambda: self.inner.list_objects(prefix))

    def delete_objects(self, prefix: str) -> None:
        self._call(f"delete {prefix}", lambda: self.inner.delete_objects(prefix))

    def close(self) -> None:
        self.inner.close()
