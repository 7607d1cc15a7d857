"""Coverage-guided fuzzing with atheris (libFuzzer) of what a stranger can feed us.

The same targets and properties as the Hypothesis tests beside this file (hostile bytes
give our own error type or a clean close, never another exception, never a read past the
declared limit, never a file outside the package), driven by libFuzzer's coverage
feedback for the long runs reported in docs/security.md. Not collected by pytest.

    pip install atheris        # a wheel exists for CPython 3.11 on Linux x86-64
    python tests/fuzz/atheris_fuzz.py TARGET CORPUS_DIR -max_total_time=300

``TARGET`` is one of :data:`TARGETS`. ``CORPUS_DIR`` is created and seeded with valid
inputs (frames, a real handshake, a sealed snapshot, a package zip) so the fuzzer starts
from the interesting shapes. A failing input is written by libFuzzer as
``crash-<sha1>``; keep it as a regression test in ``test_fuzz_decoders.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

try:
    import atheris
except ImportError:  # the targets still run without it (test_atheris_targets.py)
    atheris = None

_instrumented = (atheris.instrument_imports(include=["jstormpy", "zipfile"])
                 if atheris is not None else contextlib.nullcontext())
with _instrumented:
    import zipfile  # instrumented too: the package reader's parser (imported here first)

    from jstormpy.api.errors import (
        AuthenticationError,
        CorruptSnapshotError,
        FrameError,
        JStormError,
    )
    from jstormpy.operations.codepkg import PackageStore, load_package_topology
    from jstormpy.runtime import frames as fr
    from jstormpy.runtime import handshake as hs
    from jstormpy.state_backends.base import open_blob, seal_blob

MAX_FRAME = 4096
SECRET = b"s"


class LimitedReader(io.BytesIO):
    """Fails if anyone asks for more than the frame limit at once (a length trusted
    before it was checked)."""

    def read(self, n: int | None = -1) -> bytes:
        if n is None or not 0 <= n <= max(MAX_FRAME, fr.MAX_CLOSE_REASON):
            raise AssertionError(f"read({n}) beyond the frame limit")
        return super().read(n)


class Sock:
    def __init__(self, stream: bytes = b"") -> None:
        self.stream = stream
        self.sent = b""

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def makefile(self, mode: str) -> LimitedReader:
        return LimitedReader(self.stream)


def fuzz_header(data: bytes) -> None:
    header = data[:fr.HEADER.size].ljust(fr.HEADER.size, b"\0")
    try:
        ftype, _gen, length = fr.decode_header(header, MAX_FRAME)
    except FrameError:
        return
    assert ftype in tuple(fr.FrameType) and length <= MAX_FRAME


def fuzz_frame_stream(data: bytes) -> None:
    reader = LimitedReader(data)
    for _ in range(8):
        try:
            ftype, _g, payload, length = fr.read_frame(reader, MAX_FRAME, (fr.FrameType.DATA,))
        except (FrameError, fr.PeerClosedError):
            return
        assert ftype == fr.FrameType.DATA and payload is not None and len(payload) == length


def fuzz_server_handshake(data: bytes) -> None:
    try:
        hs.server_handshake(Sock(), LimitedReader(data), SECRET, 0, MAX_FRAME)  # type: ignore[arg-type]
    except (FrameError, AuthenticationError, fr.PeerClosedError):
        return
    raise AssertionError("a client without the secret was accepted")


def fuzz_client_handshake(data: bytes) -> None:
    stream = (fr.encode_frame(fr.FrameType.CHALLENGE, 0, data[:32].ljust(32, b"\0"))
              + data[32:])
    try:
        hs.client_handshake(Sock(stream), SECRET, 2, 0, MAX_FRAME)  # type: ignore[arg-type]
    except (FrameError, AuthenticationError, fr.PeerClosedError):
        return
    raise AssertionError("a server without the secret was accepted")


def fuzz_envelope(data: bytes) -> None:
    try:
        open_blob(data, "fuzz")
    except CorruptSnapshotError:
        return


def fuzz_envelope_corruption(data: bytes) -> None:
    if len(data) < 3:
        return
    at, xor, body = struct.unpack_from("!HB", data)[0], data[2] or 1, data[3:] or b"x"
    sealed = bytearray(seal_blob(body))
    sealed[at % len(sealed)] ^= xor
    try:
        open_blob(bytes(sealed), "fuzz")
    except CorruptSnapshotError:
        return
    raise AssertionError("a corrupted snapshot was opened")


def fuzz_code_package(data: bytes) -> None:
    root = Path(tempfile.mkdtemp(prefix="jstorm-fuzz-"))
    path, modules = list(sys.path), set(sys.modules)
    try:
        store, unpack = root / "store", root / "unpack"
        try:
            PackageStore(store).add(data, "topology.py")
        except JStormError:
            return
        before = sorted(p.relative_to(root) for p in root.rglob("*"))
        try:
            load_package_topology(data, "topology.py", "", "fuzz", unpack_dir=unpack)
        except JStormError:
            pass
        for p in root.rglob("*"):  # everything unpacked stays under unpack/
            rel = p.relative_to(root)
            assert rel in before or rel.parts[0] == "unpack", f"{rel} written outside"
            assert not p.is_symlink(), f"{rel} is a symlink"
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            del sys.modules[name]
        shutil.rmtree(root, ignore_errors=True)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "header": fuzz_header, "frame_stream": fuzz_frame_stream,
    "server_handshake": fuzz_server_handshake, "client_handshake": fuzz_client_handshake,
    "envelope": fuzz_envelope, "envelope_corruption": fuzz_envelope_corruption,
    "code_package": fuzz_code_package,
}


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in entries.items():
            zf.writestr(name, body)
    return buf.getvalue()


def seeds(target: str) -> list[bytes]:
    """Valid inputs of the target's shape, for libFuzzer to mutate."""
    data = fr.encode_frame(fr.FrameType.DATA, 1, struct.pack("!QQ", 7, 1) + b"\x80\x05N.")
    close = fr.encode_frame(fr.FrameType.CLOSE, 0, b"bye")
    response = fr.encode_frame(fr.FrameType.RESPONSE, 0, struct.pack("!I", 5) + bytes(64))
    accept = fr.encode_frame(fr.FrameType.ACCEPT, 0, bytes(32))
    return {
        "header": [data[:fr.HEADER.size], close[:fr.HEADER.size]],
        "frame_stream": [data + data, data + close],
        "server_handshake": [response, close],
        "client_handshake": [bytes(32) + accept, bytes(32) + close],
        "envelope": [seal_blob(b"state"), seal_blob(b"")],
        "envelope_corruption": [b"\0\x05\x01state"],
        "code_package": [_zip({"topology.py": b"topology = None\n"}),
                         _zip({"topology.py": b"x = 1\n", "pkg/mod.py": b"y = 2\n"})],
    }[target]


def main() -> None:
    if atheris is None:
        sys.exit("atheris is not installed: pip install atheris (docs/security.md)")
    if len(sys.argv) < 3 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} CORPUS_DIR [libFuzzer flags]")
    target, corpus = sys.argv[1], Path(sys.argv[2])
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in seeds(target):
        (corpus / f"seed-{hashlib.sha1(seed).hexdigest()}").write_bytes(seed)
    os.environ.pop("JSTORM_RUN_DIR", None)  # unpack only where the target says
    atheris.Setup([sys.argv[0], *sys.argv[2:]], TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
