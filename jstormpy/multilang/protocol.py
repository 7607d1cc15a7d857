"""Storm's multilang protocol, the host side: one component subprocess and its messages.

Storm documents the protocol (storm.apache.org, "Multi-Lang Protocol"): every message is
one JSON value followed by a line ``end``; the host opens with a handshake
(``{"conf", "context", "pidDir"}``) that the component answers with ``{"pid": N}``. After
that a spout is driven by commands (``next``, ``ack``, ``fail``, ``activate``,
``deactivate``), each answered by ``sync``; a bolt is sent tuples (``id``, ``comp``,
``stream``, ``task``, ``tuple``; heartbeats are tuples on ``__heartbeat`` from task -1,
answered by ``sync``). A component sends ``emit`` (answered with a JSON list of the task
ids the tuple went to unless ``need_task_ids`` is false), ``ack``, ``fail``, ``log``,
``error`` and ``metrics``.

:class:`ShellProcess` owns the subprocess. The task thread itself reads its stdout,
without blocking, whenever it wants messages: everything the subprocess wrote meanwhile
comes in one read, is framed at once and parsed into typed messages (no reader thread to
hand each message over, no GIL passed back and forth per message). Its stdin is written
without blocking too: while it is full the host reads what the subprocess wrote, so
neither side can wait on the other for good. A thread keeps the last lines of stderr.

JSON goes through orjson (about 5x faster to parse and 10x to encode than the standard
library's on these small messages); what orjson refuses and the standard library accepts
(``NaN``, integers over 64 bits, non-string keys) falls back to the standard library, and
so does a value whose orjson encoding holds a ``null`` (orjson writes a float nan or
infinity as ``null``; the standard library keeps them ``NaN`` and ``Infinity``).

Every way the subprocess can break (exit, hang, malformed or oversized message) becomes
a :class:`~jstormpy.api.errors.MultilangError` naming the component and showing that
stderr tail.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

import orjson

from jstormpy.api.errors import MultilangError
from jstormpy.temp_dirs import process_temp_dir, remove_temp_dir

log = logging.getLogger("jstormpy.multilang")

HEARTBEAT_STREAM = "__heartbeat"
TICK_STREAM = "__tick"
SYSTEM_COMPONENT = "__system"
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_LINES = 20
_END_LINES = frozenset((b"end", b"end\r"))


@dataclass(frozen=True)
class Pid:
    """The handshake's answer."""

    pid: int


@dataclass(frozen=True)
class Sync:
    """A spout finished a command, or a bolt answered a heartbeat."""


class Emit(NamedTuple):
    """``emit``: a tuple on ``stream``, to ``task`` if direct; a spout's carries ``msg_id``,
    a bolt's its ``anchors``. (Immutable and typed like the other messages, but a
    NamedTuple: it is the message of every tuple, and a NamedTuple is built in a third of a
    frozen dataclass's time.)"""

    values: list[Any]
    stream: str
    msg_id: Any
    anchors: tuple[Any, ...]
    task: int | None
    need_task_ids: bool


@dataclass(frozen=True)
class Ack:
    """A bolt acked an input tuple."""

    tuple_id: Any


@dataclass(frozen=True)
class Fail:
    """A bolt failed an input tuple."""

    tuple_id: Any


@dataclass(frozen=True)
class LogMessage:
    """``log``: a line for the task's log; ``level`` as Storm numbers it (0 trace … 4 error)."""

    text: str
    level: int


@dataclass(frozen=True)
class ErrorReport:
    """``error``: Storm's ``reportError`` (the component goes on)."""

    text: str


@dataclass(frozen=True)
class Metric:
    """``metrics``: a value for one of the component's metrics."""

    name: str
    params: Any


@dataclass(frozen=True)
class EmitRun:
    """Plain emits in a row (no direct task, no task ids asked for) on one stream: what our
    pystorm runner sends for a bolt's emits of a frame. ``anchors``: each one's anchors (a
    sequence of tuple ids, or one id alone as a str: a row anchored to the tuple being
    processed), or None: the runner sends none unless asked (the host does not use them:
    checkpoints, not Storm's ack trees, make the guarantee)."""

    stream: str
    rows: list[Any]
    anchors: list[Any] | None = None

    def emits(self) -> list[Emit]:
        """The run as the single emits it stands for."""
        if self.anchors is None:
            return [Emit(values, self.stream, None, (), None, False) for values in self.rows]
        return [Emit(values, self.stream, None, (a,) if type(a) is str else tuple(a), None,
                     False)
                for values, a in zip(self.rows, self.anchors, strict=True)]


@dataclass(frozen=True)
class Acks:
    """Several acks at once (our pystorm runner sends a frame's acks together, after the
    frame's emits)."""

    tuple_ids: list[Any]


@dataclass(frozen=True)
class AckRange:
    """The tuples ``first`` up to (not including) ``stop`` acked, each one after its emits:
    our pystorm runner's auto-acks of a frame of tuples sent with ids ``first``,
    ``first + 1``, ... (pystorm's tuple ids are those numbers as strings)."""

    first: int
    stop: int

    def tuple_ids(self) -> list[str]:
        """The acked tuple ids as the single acks would carry them."""
        return [str(i) for i in range(self.first, self.stop)]


Message = (Pid | Sync | Emit | Ack | Fail | LogMessage | ErrorReport | Metric | EmitRun | Acks
           | AckRange)

_LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING,
               4: logging.ERROR}


def python_log_level(storm_level: int) -> int:
    """The :mod:`logging` level of a multilang ``log`` message's level."""
    return _LOG_LEVELS.get(storm_level, logging.INFO)


def parse_message(raw: Any) -> Message:
    """A decoded JSON message from a component, as a typed message.

    Raises:
        ValueError: Not a message of the protocol (the text says what is wrong).

    Example:
        >>> parse_message({"command": "emit", "tuple": ["a"], "id": 7})
        Emit(values=['a'], stream='default', msg_id=7, anchors=(), task=None, need_task_ids=True)
    """
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    command = raw.get("command")
    if command == "emit":  # the common messages first
        values = raw.get("tuple")
        if not isinstance(values, list):
            raise ValueError(f"emit without a 'tuple' list: {_short(raw)}")
        task = raw.get("task")
        if task is not None and not isinstance(task, int):
            raise ValueError(f"emit with a non-integer direct 'task': {task!r}")
        stream = raw.get("stream") or "default"
        if not isinstance(stream, str):
            raise ValueError(f"emit with a non-string 'stream': {stream!r}")
        anchors = raw.get("anchors")
        return Emit(values, stream, raw.get("id"), tuple(anchors) if anchors else (), task,
                    bool(raw.get("need_task_ids", True)))
    if command == "ack" or command == "fail":  # noqa: PLR1714 (no set built per call)
        if "id" not in raw:
            raise ValueError(f"{command} without an 'id': {_short(raw)}")
        return Ack(raw["id"]) if command == "ack" else Fail(raw["id"])
    if command == "sync":
        return Sync()
    if command is None and "pid" in raw:
        if not isinstance(raw["pid"], int):
            raise ValueError(f"pid {raw['pid']!r} is not an integer")
        return Pid(raw["pid"])
    if command == "log":
        level = raw.get("level", 2)
        return LogMessage(str(raw.get("msg", "")), level if isinstance(level, int) else 2)
    if command == "error":
        return ErrorReport(str(raw.get("msg", "")))
    if command == "metrics":
        return Metric(str(raw.get("name", "")), raw.get("params"))
    raise ValueError(f"unknown command {command!r}: {_short(raw)}")


def _short(raw: Any, limit: int = 200) -> str:
    text = repr(raw)
    return text if len(text) <= limit else text[:limit] + "..."


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON (orjson; the standard library for what orjson refuses).

    Raises:
        TypeError: JSON has no form for ``value``.
    """
    try:
        out = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a big int, a non-string key, ...
        return json.dumps(value, separators=(",", ":")).encode()
    if b"null" in out:
        # orjson writes a float nan or infinity as null, which would reach the component
        # as None: the standard library writes NaN and Infinity, as Storm's Python
        # components (simplejson) write and read them
        return json.dumps(value, separators=(",", ":")).encode()
    return out


def loads(text: bytes) -> Any:
    """One JSON value (orjson; the standard library for what orjson refuses, like the
    ``NaN`` simplejson writes for a float nan).

    Raises:
        ValueError: Not JSON.
    """
    try:
        return orjson.loads(text)
    except ValueError:  # orjson.JSONDecodeError
        return json.loads(text)


def encode_message(payload: Any) -> bytes:
    """One message on the wire: JSON, a newline, ``end``, a newline."""
    return dumps(payload) + b"\nend\n"


def encode_tuples(first_id: int, source: str, stream: str, task: int,
                  rows: Sequence[Sequence[Any]]) -> bytes:
    """Tuple messages for ``rows`` (ids ``first_id``, ``first_id + 1``, ... as strings, as
    Storm's are), ready for one write: the fields they share are encoded once.

    Raises:
        TypeError: A row has a value JSON has no form for.

    Example:
        >>> encode_tuples(7, "split", "default", 3, [("a",)])
        b'{"id":"7","comp":"split","stream":"default","task":3,"tuple":["a"]}\\nend\\n'
    """
    shared = b'","comp":%b,"stream":%b,"task":%d,"tuple":' % (dumps(source), dumps(stream),
                                                              task)
    return b"".join([b'{"id":"%d%b%b}\nend\n' % (i, shared, dumps(values))
                     for i, values in enumerate(rows, first_id)])


@dataclass(frozen=True)
class _Broken:
    """What the reader thread hands over instead of a message: why the stream ended."""

    reason: str


class ShellProcess:
    """One multilang component subprocess and the host's end of its pipes.

    Args:
        command: the argv to start (``["python3", "split.py"]``).
        component: the component's name (every error names it).
        task_id: the task it serves.
        cwd: its working directory (default: the worker's).
        env: extra environment variables.
        max_message_bytes: a longer message from it is a protocol error.
        heartbeat_timeout_s: how long it may take to answer (a command, a tuple's ack, a
            heartbeat) before it counts as hung.
    """

    def __init__(self, command: Sequence[str], component: str, task_id: int, *,
                 cwd: str | None = None, env: Mapping[str, str] | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 heartbeat_timeout_s: float = 30.0) -> None:
        self.command = list(command)
        self.component = component
        self.task_id = task_id
        self.max_message_bytes = max_message_bytes
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._arrived: deque[Message | _Broken] = deque()  # parsed, not taken yet
        self._parts: list[bytes] = []  # the lines read of the message being read
        self._size = 0
        self._rest = b""  # an unfinished line
        self.broken: str | None = None
        self.pid_dir = process_temp_dir("jstorm-multilang-")  # swept if this worker is killed
        try:
            self.proc = self._spawn(cwd, {**os.environ, **(env or {})})
        except OSError as exc:
            remove_temp_dir(self.pid_dir)
            raise MultilangError(f"component {component!r} (task {task_id}): cannot start "
                                 f"{self.command!r}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self._out = self.proc.stdout.fileno()  # read and written without blocking: the
        self._in = self.stdin.fileno()  # task thread reads its stdout when it wants messages
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._readable = select.poll()  # poll, not select: a worker's fds may pass 1024
        self._readable.register(self._out, select.POLLIN)
        self._either = select.poll()
        self._either.register(self._out, select.POLLIN)
        self._either.register(self._in, select.POLLOUT)
        self._stderr_reader = threading.Thread(
            target=self._read_stderr, args=(self.proc.stderr,), daemon=True,
            name=f"multilang-err-{task_id}")
        self._stderr_reader.start()

    def _spawn(self, cwd: str | None, env: dict[str, str]) -> Any:
        """Start the subprocess (a ``subprocess.Popen``, or an object with its ``pid``,
        ``stdin``/``stdout``/``stderr``, ``poll``, ``wait`` and ``kill``)."""
        return subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=env,
                                start_new_session=True)

    next_batch = 1
    """``next_tuple`` calls a spout's ``next`` command asks for (Storm's protocol: one)."""

    # -- the reader threads ------------------------------------------------------------------
    READ_CHUNK = 1 << 16

    def _broke(self, reason: str) -> None:
        """The stream broke (a subclass's framing found why): the next receive raises."""
        self._arrived.append(_Broken(reason))

    def _take(self, timeout_s: float | None) -> bool:
        """Frame and parse all its stdout holds, waiting up to ``timeout_s`` (None: not at
        all) for some to arrive; False if nothing had (the end of the stream counts)."""
        if self._broken_in(self._arrived):
            return True
        if timeout_s is not None and not self._readable.poll(timeout_s * 1000.0):
            return False
        data: list[bytes] = []
        end: _Broken | None = None
        while True:
            try:
                chunk = os.read(self._out, self.READ_CHUNK)
            except BlockingIOError:
                break
            except OSError as exc:
                end = _Broken(f"reading its stdout failed: {exc}")
                break
            if not chunk:
                end = _Broken("its stdout closed (the process exited)")
                break
            data.append(chunk)
            if len(chunk) < self.READ_CHUNK:
                break
        if data:
            self._frame(b"".join(data))
        if end is not None and not self._broken_in(self._arrived):
            self._arrived.append(end)
        return bool(data) or end is not None

    @staticmethod
    def _broken_in(arrived: deque[Message | _Broken]) -> bool:
        return bool(arrived) and isinstance(arrived[-1], _Broken)

    def _frame(self, chunk: bytes) -> None:
        """Cut ``chunk`` (what follows the data framed so far) into messages, parsed onto
        ``_arrived``; the first broken one ends the stream."""
        arrived = self._arrived
        if self._broken_in(arrived):
            return
        limit = self.max_message_bytes
        parts, size = self._parts, self._size
        lines = (self._rest + chunk).split(b"\n") if self._rest else chunk.split(b"\n")
        self._rest = rest = lines.pop()
        for line in lines:
            if line in _END_LINES:
                text = parts[0].strip() if len(parts) == 1 else b"\n".join(parts).strip()
                parts.clear()
                size = 0
                if not text:  # blank messages between messages are tolerated
                    continue
                msg = self._decode(text)
                arrived.append(msg)
                if isinstance(msg, _Broken):
                    return
                continue
            size += len(line) + 1
            if size > limit:
                break
            parts.append(line)
        self._size = size
        if size + len(rest) > limit:
            arrived.append(_Broken(f"it sent a message over {limit} bytes (max_message_bytes)"))

    def _decode(self, text: bytes) -> Message | _Broken:
        try:
            return parse_message(loads(text))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            return _Broken(f"it sent a malformed message ({exc}): {text[:200]!r}")

    def _read_stderr(self, err: IO[bytes]) -> None:
        try:
            for raw in iter(err.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                self.stderr_tail.append(line)
                log.debug("%s[%s] stderr: %s", self.component, self.task_id, line)
        except (OSError, ValueError):
            pass

    # -- the task thread's side ------------------------------------------------------------
    def handshake(self, conf: Mapping[str, Any], context: Mapping[str, Any]) -> int:
        """Send ``conf``/``context``/``pidDir``; the component's pid from its answer."""
        self.send({"conf": dict(conf), "context": dict(context), "pidDir": self.pid_dir})
        msg = self.receive()
        if not isinstance(msg, Pid):
            raise self.failure(f"it answered the handshake with {msg!r}, not a pid")
        return msg.pid

    def send(self, payload: Any) -> None:
        """Write one message to the component's stdin."""
        self.send_encoded(encode_message(payload))

    def encode_tuples(self, first_id: int, source: str, stream: str, task: int,
                      rows: Sequence[Sequence[Any]]) -> bytes:
        """Tuple messages for ``rows``, ready for :meth:`send_encoded` (see
        :func:`encode_tuples`)."""
        return encode_tuples(first_id, source, stream, task, rows)

    def send_encoded(self, data: bytes) -> None:
        """Write already encoded messages (:func:`encode_message`) in one write."""
        if self.broken is not None:
            raise self.failure(self.broken)
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view):]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # BrokenPipeError: it exited
                self.broken = f"writing to it failed ({exc}): it has exited"
                raise self.failure(self.broken) from exc
            # its stdin is full: read what it wrote meanwhile (it may wait for that) until
            # it takes more, up to the heartbeat timeout
            ready = dict(self._either.poll(self.heartbeat_timeout_s * 1000.0))
            if ready.get(self._out):
                self._take(None)
                if self._broken_in(self._arrived):  # its stdout ended or broke
                    self.broken = self._arrived[-1].reason  # type: ignore[union-attr]
                    raise self.failure(self.broken)
            elif not ready:
                self.broken = (f"it did not read its input within "
                               f"{self.heartbeat_timeout_s:g} s (heartbeat timeout): it hangs")
                raise self.failure(self.broken)

    def receive(self, timeout_s: float | None = None) -> Message:
        """The next message, waiting up to ``timeout_s`` (default: the heartbeat timeout).

        Raises:
            MultilangError: It exited, hung past the timeout, or broke the protocol.
        """
        wait = self.heartbeat_timeout_s if timeout_s is None else timeout_s
        msg = self.next_message(wait)
        if msg is None:
            self.broken = f"it did not answer within {wait:g} s (heartbeat timeout): it hangs"
            raise self.failure(self.broken)
        return msg

    def next_message(self, timeout_s: float) -> Message | None:
        """The next message, or None if none arrives within ``timeout_s`` (not an error:
        for a caller that keeps time itself, like a bolt sending ticks while it waits).

        Raises:
            MultilangError: It exited or broke the protocol.
        """
        if self.broken is not None:
            raise self.failure(self.broken)
        arrived = self._arrived
        if not arrived:
            deadline = time.monotonic() + timeout_s
            while not arrived:  # a chunk may end before a message does
                left = deadline - time.monotonic()
                if left <= 0 or not self._take(left):
                    return None
        msg = arrived.popleft()
        if isinstance(msg, _Broken):
            self.broken = msg.reason
            raise self.failure(msg.reason)
        return msg

    def poll(self) -> Message | None:
        """The next message if one has arrived, else None (a broken stream raises)."""
        if not self._arrived:
            while self._take(None):
                if self._arrived:
                    break
            else:
                return None
        return self.receive(0)

    def drain(self) -> list[Message]:
        """Every message that has arrived, reading what its stdout holds without waiting
        (one call instead of a :meth:`poll` per message); a broken stream raises once the
        messages before the break have been taken."""
        if self.broken is not None:
            raise self.failure(self.broken)
        self._take(None)
        arrived = self._arrived
        if not arrived:
            return []
        broken: _Broken | None = None
        last = arrived[-1]
        if isinstance(last, _Broken):
            broken = last
            arrived.pop()
        msgs: list[Message] = list(arrived)  # type: ignore[arg-type]
        arrived.clear()
        if broken is not None:
            if not msgs:
                self.broken = broken.reason
                raise self.failure(broken.reason)
            arrived.append(broken)
        return msgs

    def exited_cleanly(self, wait_s: float = 2.0) -> bool:
        """Its stdout closed and the process exited with status 0 (waits up to ``wait_s``
        for the exit once the stream has ended)."""
        if self.broken is None:
            return False
        try:
            return self.proc.wait(wait_s) == 0
        except subprocess.TimeoutExpired:
            return False

    def alive(self) -> bool:
        """The subprocess runs and its stream is intact."""
        return self.broken is None and self.proc.poll() is None

    def failure(self, reason: str) -> MultilangError:
        """The error that fails the task: component, command, reason and stderr tail."""
        code = self.proc.poll()
        if code is None and self.broken is not None and self.broken.startswith(
                ("its stdout", "writing to it failed")):
            try:  # the stream ended: the exit is under way
                code = self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
        if code is None and self.broken is not None:
            self.close(0.1)  # a hung or misbehaving process is not left running
            code = self.proc.poll()
        if code is not None:  # it exited: its last stderr lines may still be in the pipe,
            self._stderr_reader.join(1.0)  # which the reader reads to its end
        status = "" if code is None else f" (exit code {code})"
        tail = "\n".join(self.stderr_tail) or "(nothing)"
        return MultilangError(
            f"multilang component {self.component!r} (task {self.task_id}, "
            f"command {' '.join(self.command)!r}, pid {self.proc.pid}){status}: {reason}\n"
            f"last lines of its stderr:\n{tail}")

    def close(self, grace_s: float = 2.0) -> None:
        """Close its stdin (a multilang component exits on EOF), then kill it if needed."""
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        remove_temp_dir(self.pid_dir)


def storm_context(component: str, task_id: int, component_tasks: Mapping[str, Sequence[int]],
                  source_fields: Mapping[str, Mapping[str, Sequence[str]]]
                  ) -> dict[str, Any]:
    """The handshake's ``context`` as Storm sends it (``task->component``, ``taskid``,
    ``componentid``, ``source->stream->fields``)."""
    return {
        "task->component": {str(t): name for name, ts in component_tasks.items() for t in ts},
        "taskid": task_id,
        "componentid": component,
        "source->stream->fields": {src: {s: list(f) for s, f in streams.items()}
                                   for src, streams in source_fields.items()},
    }
