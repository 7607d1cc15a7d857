"""Hypothesis fuzzing of what a stranger can feed us: the frame decoder, the data-plane
handshake (server and client side), the snapshot envelope and the code-package reader.

The property everywhere: hostile bytes produce our own error type (FrameError,
AuthenticationError, CorruptSnapshotError, JStormError) or a clean close, never another
exception, never a read beyond the declared limit, never a file outside the package.
The CI budget is fixed (conftest.py); crashing inputs found by longer runs are kept in
``REGRESSIONS`` below and always run.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import os
import struct
import zipfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jstormpy.api.errors import AuthenticationError, CorruptSnapshotError, FrameError, JStormError
from jstormpy.operations.codepkg import PackageStore, load_package_topology
from jstormpy.runtime import frames as fr
from jstormpy.runtime import handshake as hs
from jstormpy.runtime import transport as tp
from jstormpy.state_backends.base import open_blob, seal_blob, seal_stream

FUZZ = settings.get_profile("fuzz")
MAX_FRAME = 4096


class _LimitedReader(io.BytesIO):
    """A reader that fails the test if anyone asks for more than the frame limit at once."""

    def read(self, n: int | None = -1) -> bytes:
        assert n is not None and 0 <= n <= max(MAX_FRAME, fr.MAX_CLOSE_REASON), n
        return super().read(n)


class _Sock:
    def __init__(self) -> None:
        self.sent = b""

    def sendall(self, data: bytes) -> None:
        self.sent += data


def _frames(draw_bytes: list[tuple[int, int, bytes]]) -> bytes:
    return b"".join(tp.HEADER.pack(tp.MAGIC, tp.VERSION, t, g, len(p)) + p
                    for t, g, p in draw_bytes)


frame_like = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2**32 - 1),
                                st.binary(max_size=120)), max_size=4).map(_frames)
hostile = st.one_of(st.binary(max_size=400), frame_like,
                    st.tuples(frame_like, st.binary(max_size=40)).map(lambda t: t[0] + t[1]))


@FUZZ
@given(st.binary(min_size=tp.HEADER.size, max_size=tp.HEADER.size))
def test_decode_header_only_raises_frame_error(header: bytes) -> None:
    try:
        ftype, _gen, length = tp.decode_header(header, MAX_FRAME)
    except FrameError:
        return
    assert ftype in tuple(fr.FrameType)  # CHALLENGE ... CREDIT, never an unknown type
    assert length <= MAX_FRAME


@FUZZ
@given(hostile)
def test_read_frame_stream(data: bytes) -> None:
    reader = _LimitedReader(data)
    for _ in range(8):
        try:
            ftype, _g, payload, length = fr.read_frame(reader, MAX_FRAME, (tp.FrameType.DATA,))
        except (FrameError, fr.PeerClosedError):
            return
        assert ftype == tp.FrameType.DATA and payload is not None and len(payload) == length


def _server(secret: bytes = b"s") -> tp.Transport:
    return tp.Transport(2, secret, lambda *_: None, max_frame_bytes=MAX_FRAME)


@FUZZ
@given(hostile)
@example(tp.HEADER.pack(tp.MAGIC, tp.VERSION, tp.FrameType.RESPONSE, 0, 10**6))
def test_server_handshake_refuses_hostile_input(data: bytes) -> None:
    t = _server()
    try:
        t._server_handshake(_Sock(), _LimitedReader(data), "fuzz")  # type: ignore[arg-type]
    except (FrameError, AuthenticationError, fr.PeerClosedError):
        return
    pytest.fail("a hostile RESPONSE was accepted")


@FUZZ
@given(st.binary(min_size=32, max_size=32), hostile)
def test_client_handshake_refuses_hostile_server(n_s: bytes, rest: bytes) -> None:
    stream = tp.encode_frame(tp.FrameType.CHALLENGE, 0, n_s) + rest

    class Sock(_Sock):
        def makefile(self, mode: str) -> io.BytesIO:
            return _LimitedReader(stream)

    try:
        hs.client_handshake(Sock(), b"s", 2, 0, MAX_FRAME)  # type: ignore[arg-type]
    except (FrameError, AuthenticationError, fr.PeerClosedError):
        return
    pytest.fail("a server without the secret was accepted")


def test_server_handshake_accepts_the_real_client() -> None:
    """Control: the fuzzed function is not refusing everything."""
    t = _server(b"k")
    sock = _Sock()
    n_c = os.urandom(32)

    class Reader(io.BytesIO):
        pass

    # we need n_s before building the response: capture it from the CHALLENGE we get
    class Responder(_Sock):
        def sendall(self, data: bytes) -> None:
            super().sendall(data)
            if len(self.sent) == tp.HEADER.size + 32:
                n_s = self.sent[tp.HEADER.size:]
                mac = hmac.new(b"k", b"jstorm-client" + n_s + struct.pack("!I", 5),
                               hashlib.sha256).digest()
                reader.write(tp.encode_frame(tp.FrameType.RESPONSE, 0,
                                             struct.pack("!I", 5) + n_c + mac))
                reader.seek(0)

    reader = Reader()
    sock = Responder()
    assert t._server_handshake(sock, reader, "ok") == 5  # type: ignore[arg-type]


@FUZZ
@given(st.binary(max_size=300))
def test_snapshot_envelope_refuses_garbage(data: bytes) -> None:
    try:
        assert open_blob(data, "fuzz") is not None
    except CorruptSnapshotError:
        return


@FUZZ
@given(st.binary(min_size=1, max_size=200), st.integers(0, 10**6), st.integers(0, 255))
def test_snapshot_envelope_detects_any_single_corruption(body: bytes, at: int, xor: int) -> None:
    sealed = bytearray(seal_blob(body))
    i = at % len(sealed)
    sealed[i] ^= xor or 1
    with pytest.raises(CorruptSnapshotError):
        open_blob(bytes(sealed), "fuzz")


@FUZZ
@given(st.lists(st.binary(max_size=80), max_size=4), st.integers(0, 10**6),
       st.integers(0, 255))
def test_streamed_snapshot_envelope_detects_any_single_corruption(
        pieces: list[bytes], at: int, xor: int) -> None:
    sealed = bytearray(b"".join(seal_stream(pieces)))
    assert open_blob(bytes(sealed), "fuzz") == b"".join(pieces)
    i = at % len(sealed)
    sealed[i] ^= xor or 1
    with pytest.raises(CorruptSnapshotError):
        open_blob(bytes(sealed), "fuzz")


@FUZZ
@given(st.binary(min_size=1, max_size=200), st.integers(0, 10**6))
def test_streamed_snapshot_envelope_detects_any_truncation(body: bytes, cut: int) -> None:
    sealed = b"".join(seal_stream([body]))
    with pytest.raises(CorruptSnapshotError):
        open_blob(sealed[:cut % len(sealed)], "fuzz")


def _zip(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("topology.py", "topology = None\n")
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()


names = st.text(st.sampled_from("ab./\\:_C.."), min_size=1, max_size=12)
zips = st.lists(st.tuples(names, st.binary(max_size=64)), max_size=4).map(_zip)
mutated = st.tuples(zips, st.lists(st.tuples(st.integers(0, 10**5), st.integers(1, 255)),
                                   max_size=6)).map(
    lambda t: bytes(b ^ dict((i % max(len(t[0]), 1), x) for i, x in t[1]).get(j, 0)
                    for j, b in enumerate(t[0])))


#: Inputs that crashed the reader before it mapped zipfile's errors (zlib.error,
#: NotImplementedError, EOFError, ValueError "negative seek value"), found by this fuzzer.
REGRESSIONS = [
    b"PK\x03\x04" + bytes(22) + b"\x0b\x00\x00\x00topology.py" + bytes(18)
    + b"PK\x01\x02" + bytes(6) + b"\x08" + bytes(15) + b"\x01" + bytes(5) + b"\x01"
    + bytes(15) + b"topology.pyPK\x05\x06" + bytes(8) + b"9\x00\x00\x00;" + bytes(5),
    b"PK\x03\x04" + bytes(22) + b"\x0b\x00\x00\x00topology.py" + bytes(18)
    + b"PK\x01\x02" + bytes(7) + b"\x08" + bytes(21) + b"\x01\x01" + bytes(15)
    + b"topology.pyPK\x05\x06" + bytes(8) + b"9\x00\x00\x00;" + bytes(5),
    b"PK\x01\x02" + bytes(25) + b"\x01" + bytes(16) + b"\x01topology.pyPK\x05\x06"
    + bytes(8) + b"9" + bytes(9),
    b"PK\x01\x02" + bytes(25) + b"\x01" + bytes(17) + b"topology.pyPK\x05\x06"
    + bytes(8) + b"9" + bytes(6) + b"\x01\x00\x00",
]


@pytest.mark.parametrize("data", REGRESSIONS)
def test_code_package_regressions(tmp_path, data: bytes) -> None:
    with contextlib.suppress(JStormError):  # the TM may refuse it or store it
        PackageStore(tmp_path).add(data, "topology.py")
    with pytest.raises(JStormError):  # a worker never crashes on it
        load_package_topology(data, "topology.py", "", "fuzz")


@pytest.mark.filterwarnings("ignore:Duplicate name")
@FUZZ
@given(st.one_of(st.binary(max_size=400), zips, mutated))
def test_code_package_reader_refuses_cleanly(tmp_path_factory, data: bytes) -> None:
    root = tmp_path_factory.mktemp("pkg")
    try:
        PackageStore(root).add(data, "topology.py")
    except JStormError:
        return
    # accepted: unpacking it must stay inside its directory (then the entry fails to load)
    before = set(Path(root.parent).iterdir())
    with pytest.raises(JStormError):
        load_package_topology(data, "topology.py", "", "fuzz")
    assert set(Path(root.parent).iterdir()) == before
