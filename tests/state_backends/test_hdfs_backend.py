"""HdfsBackend specifics: temp files, versioned meta keys, retries, options."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import hdfs
import pytest

from jstormpy.api.errors import BackendError
from jstormpy.state_backends import open_backend
from jstormpy.state_backends.hdfs import HdfsBackend
from jstormpy.testing.servers.webhdfs import WebHdfsServer


def _backend(server: WebHdfsServer, **options: object) -> HdfsBackend:
    opts: dict[str, object] = {"retries": 3, "backoff_s": 0.01, "timeout_s": 5}
    opts.update(options)
    backend = open_backend(f"hdfs://127.0.0.1:{server.port}/ckpt", **opts)
    assert isinstance(backend, HdfsBackend)
    return backend


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_layout_and_no_leftovers(webhdfs_server: WebHdfsServer) -> None:
    b = _backend(webhdfs_server)
    b.put_snapshot(1, 0, b"a")
    b.put_snapshot(1, 0, b"b")  # re-put: atomic replace via rename OVERWRITE
    b.create_metadata(1, {})
    for i in range(4):
        b.put_meta("gen", b"%d" % i)
    assert _files(webhdfs_server.root / "ckpt") == [
        "chk-0000000001/_metadata", "chk-0000000001/task-00000-g0.snap",
        "meta/gen/v-00000000000000000004"]


def test_temp_files_are_invisible(webhdfs_server: WebHdfsServer) -> None:
    b = _backend(webhdfs_server)
    client = hdfs.InsecureClient(webhdfs_server.url)
    client.write("/ckpt/chk-0000000001/.tmp-half-written", data=b"partial")
    client.write("/ckpt/meta/gen/.tmp-half-written", data=b"partial")
    assert b.list_objects("") == []
    assert b.get_meta("gen") is None
    b.delete_objects("chk-")
    assert b.list_objects("chk-") == []


def test_readers_never_see_partial_values(webhdfs_server: WebHdfsServer) -> None:
    writer = _backend(webhdfs_server)
    reader = _backend(webhdfs_server)
    values = [bytes([i]) * (1024 * 1024 + i) for i in range(6)]
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read_loop() -> None:
        try:
            while not done.is_set():
                got = reader.get_meta("big")
                if got is not None:
                    assert got in values
                    seen.append(values.index(got))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=read_loop)
    thread.start()
    try:
        for value in values:
            writer.put_meta("big", value)
    finally:
        done.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert not errors, errors
    assert seen == sorted(seen)  # never an older value after a newer one
    assert reader.get_meta("big") == values[-1]


def test_concurrent_meta_writers_each_get_a_version(webhdfs_server: WebHdfsServer) -> None:
    backends = [_backend(webhdfs_server) for _ in range(3)]
    barrier = threading.Barrier(3)

    def write(i: int) -> None:
        barrier.wait(timeout=30)
        for n in range(5):
            backends[i].put_meta("race", b"%d-%d" % (i, n))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    final = backends[0].get_meta("race")
    # the highest version belongs to a writer that wrote nothing after it: its last value
    assert final in {b"%d-4" % i for i in range(3)}
    versions = os.listdir(webhdfs_server.root / "ckpt" / "meta" / "race")
    assert [v for v in versions if v.startswith(".tmp-")] == []
    assert backends[0].list_objects("meta/") == ["meta/race"]


def test_transient_5xx_is_retried(webhdfs_server: WebHdfsServer) -> None:
    b = _backend(webhdfs_server, retries=3)
    webhdfs_server.fail_next(2)
    h = b.put_snapshot(1, 0, b"survived")
    webhdfs_server.fail_next(3)
    assert b.get_snapshot(h) == b"survived"


def test_persistent_5xx_raises_backend_error(webhdfs_server: WebHdfsServer) -> None:
    b = _backend(webhdfs_server, retries=2)
    webhdfs_server.fail_next(100)
    with pytest.raises(BackendError, match=r"hdfs://127\.0\.0\.1:\d+/ckpt unreachable.*"
                                           r"after 3 attempts"):
        b.list_completed()


def test_non_transient_errors_are_not_retried(webhdfs_server: WebHdfsServer) -> None:
    client = hdfs.InsecureClient(webhdfs_server.url)
    client.write("/ckpt/chk-0000000001", data=b"a file where a directory belongs")
    b = _backend(webhdfs_server)
    with pytest.raises(BackendError, match="ParentNotDirectory|put"):
        b.put_snapshot(1, 0, b"x")


def test_bad_uris_and_options() -> None:
    with pytest.raises(BackendError, match="hdfs://host:port"):
        HdfsBackend("hdfs://nohostport/dir")
    with pytest.raises(BackendError, match="bad object key"):
        HdfsBackend("hdfs://127.0.0.1:1/x").put_object("../escape", b"")
    try:
        import requests_kerberos  # noqa: F401
    except ImportError:
        with pytest.raises(BackendError, match=r"hdfs\[kerberos\]"):
            HdfsBackend("hdfs://127.0.0.1:1/x", kerberos=True)


def test_a_stream_broken_off_by_the_server_is_written_again_from_its_start(
        webhdfs_server: WebHdfsServer) -> None:
    """A task's full dump is one streamed request: a connection lost part-way is retried
    with the stream started over (never a partial object); a one-shot stream, which
    cannot start over, fails instead of storing less than it was given."""
    b = _backend(webhdfs_server)
    pieces = [os.urandom(256 * 1024) for _ in range(6)]
    passes: list[int] = []

    class Dump:
        def __iter__(self) -> Iterator[bytes]:
            passes.append(0)
            for i, piece in enumerate(pieces):
                if len(passes) == 1 and i == 3:
                    webhdfs_server.drop_connections()  # the first pass is cut off
                yield piece

    h = b.put_snapshot(1, 0, Dump())
    assert len(passes) >= 2
    assert b.get_snapshot(h) == b"".join(pieces)
    assert [f for f in _files(webhdfs_server.root / "ckpt") if ".tmp-" in f] == []

    def one_shot() -> Iterator[bytes]:
        for i, piece in enumerate(pieces):
            if i == 3:
                webhdfs_server.drop_connections()
            yield piece

    with pytest.raises(BackendError, match="cannot be written again"):
        b.put_snapshot(2, 0, one_shot())
    assert b.list_objects("chk-0000000002/") == []
    assert [f for f in _files(webhdfs_server.root / "ckpt") if ".tmp-" in f] == []
