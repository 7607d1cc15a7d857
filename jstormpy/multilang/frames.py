"""The host's end of the framed protocol our pystorm runner speaks
(:mod:`jstormpy.multilang.pystorm_runner`), and when a command gets the runner.

A multilang command that runs a pystorm/streamparse component class
(``python -m streamparse.run module.Class``, ``streamparse_run module.Class``) is started
as ``python .../pystorm_runner.py module.Class`` instead, unless the component asks for the
plain protocol (``ShellBolt(..., protocol="json")``, or ``"jstormpy.multilang.protocol":
"json"`` in its conf, as a streamparse topology's ``config`` sets it). The messages are the
multilang protocol's (the same typed messages reach ShellBolt and ShellSpout); only their
encoding changes: frames of many messages (``MAGIC``, a 4-byte length, marshal of a list)
instead of a JSON text per message. Every other command keeps Storm's JSON protocol.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from jstormpy.api.errors import ConfigError
from jstormpy.multilang import pystorm_runner as runner
from jstormpy.multilang import zygote
from jstormpy.multilang.protocol import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Ack,
    AckRange,
    Acks,
    Emit,
    EmitRun,
    Fail,
    Message,
    ShellProcess,
    parse_message,
)

PROTOCOLS = ("auto", "json")
PROTOCOL_CONF = "jstormpy.multilang.protocol"
RUNNER = os.path.abspath(runner.__file__)
SPOUT_NEXT_BATCH = 64
"""``next_tuple`` calls a spout's ``next`` asks for over frames."""


def check_protocol(protocol: str) -> str:
    """``protocol`` if it is one of :data:`PROTOCOLS`, else a ConfigError."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"multilang protocol must be one of {', '.join(PROTOCOLS)}, not "
                          f"{protocol!r} ('json' keeps Storm's JSON protocol for a pystorm "
                          "class too)")
    return protocol


def runner_command(command: Sequence[str]) -> list[str] | None:
    """The runner's argv for a command that runs a pystorm class through streamparse, or
    None (any other command keeps the JSON protocol).

    Example:
        >>> runner_command(["python3", "-m", "streamparse.run", "bolts.Split"])[2:]
        ['bolts.Split']
        >>> runner_command(["node", "split.js"]) is None
        True
    """
    argv = list(command)
    if len(argv) >= 4 and argv[1:3] == ["-m", "streamparse.run"]:
        python, rest = argv[0], argv[3:]
    elif len(argv) >= 2 and os.path.basename(argv[0]) == "streamparse_run":
        python, rest = sys.executable, argv[1:]
    else:
        return None
    if len(rest) == 1:  # Storm passes "module.Class -s json" as one argument
        rest = rest[0].split()
    if not rest or rest[0].startswith("-"):
        return None
    return [python, RUNNER, *rest]


class FrameProcess(ShellProcess):
    """A :class:`ShellProcess` whose subprocess is our pystorm runner: frames, not JSON."""

    next_batch = SPOUT_NEXT_BATCH

    def __init__(self, command: Sequence[str], component: str, task_id: int, *,
                 cwd: str | None = None, env: Mapping[str, str] | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 heartbeat_timeout_s: float = 30.0, anchors: bool = False) -> None:
        """``anchors``: the runner sends a bolt's anchors with its emits (as pystorm's
        loop does). ShellBolt does not use them, so it does not ask: a run of emits then
        carries its rows alone, and an emit no anchors (for a tool that reads the
        messages, a parity check against pystorm's own loop)."""
        env = {**(env or {}), runner.MAX_FRAME_ENV: str(max_message_bytes),
               runner.ANCHORS_ENV: "1" if anchors else "0"}
        super().__init__(command, component, task_id, cwd=cwd, env=env,
                         max_message_bytes=max_message_bytes,
                         heartbeat_timeout_s=heartbeat_timeout_s)
        self._need = 0  # the bytes the frame being read needs (0: its header not read)
        self._have = 0

    def _spawn(self, cwd: str | None, env: dict[str, str]) -> Any:
        """Our runner forked by the runner zygote (:mod:`jstormpy.multilang.zygote`), else
        (another command, no zygote) started cold."""
        forked = (zygote.start_runner(self.command, cwd, env)
                  if self.command[1:2] == [RUNNER] else None)
        return forked or super()._spawn(cwd, env)

    def send(self, payload: Any) -> None:
        """Write one message to the component (one frame)."""
        try:
            data = runner.encode_frame([payload])
        except ValueError as exc:
            raise TypeError(f"marshal cannot write it ({exc})") from exc
        self.send_encoded(data)

    def encode_tuples(self, first_id: int, source: str, stream: str, task: int,
                      rows: Sequence[Sequence[Any]]) -> bytes:
        """Tuple messages for ``rows`` as one frame (ids ``first_id``, ``first_id + 1``...).

        Raises:
            TypeError: A row has a value marshal has no form for.
        """
        try:
            return runner.encode_frame([(runner.TUPLES, first_id, source, stream, task,
                                         rows if type(rows) is list else list(rows))])
        except ValueError:
            try:
                return runner.encode_frame([(runner.TUPLES, first_id, source, stream, task,
                                             [list(r) for r in rows])])
            except ValueError as exc:
                raise TypeError(f"marshal cannot write it ({exc})") from exc

    def _frame(self, chunk: bytes) -> None:
        """Cut what arrived into frames, their messages parsed onto ``_arrived``; the first
        broken frame ends the stream."""
        arrived = self._arrived
        if self._broken_in(arrived):
            return
        parts = self._parts
        parts.append(chunk)
        self._have += len(chunk)
        if self._have < max(self._need, runner.HEADER):
            return
        buf = b"".join(parts) if len(parts) > 1 else parts[0]
        parts.clear()
        pos, end = 0, len(buf)
        while end - pos >= runner.HEADER:
            if buf[pos] != runner.MAGIC:
                self._broke(f"it sent a malformed frame (no frame header): "
                            f"{bytes(buf[pos:pos + 200])!r}")
                return
            size = int.from_bytes(buf[pos + 1:pos + runner.HEADER], "big")
            if size > self.max_message_bytes:
                self._broke(f"it sent a frame of {size} bytes, over "
                            f"{self.max_message_bytes} bytes (max_message_bytes)")
                return
            stop = pos + runner.HEADER + size
            if stop > end:
                break
            if not self._messages(memoryview(buf)[pos + runner.HEADER:stop]):
                return
            pos = stop
        rest = buf[pos:] if pos else buf
        self._have = len(rest)
        self._need = (runner.HEADER + int.from_bytes(rest[1:runner.HEADER], "big")
                      if len(rest) >= runner.HEADER else 0)
        if rest:
            parts.append(rest)

    def _messages(self, payload: memoryview) -> bool:
        """A frame's messages onto ``_arrived``; False (and the reason) if it is broken."""
        arrived = self._arrived
        try:
            items = marshal.loads(payload)
        except (ValueError, EOFError, TypeError) as exc:
            self._broke(f"it sent a malformed frame ({exc})")
            return False
        if type(items) is not list:
            self._broke(f"it sent a malformed frame (a {type(items).__name__}, "
                                   "not a list of messages)")
            return False
        append, make, ack = arrived.append, Emit._make, runner.ACK
        for item in items:
            # the common message, an emit as the runner sends it (stream named, anchors a
            # tuple), is made at once; anything else is checked field by field
            if (type(item) is tuple and len(item) == 6 and type(item[0]) is list
                    and type(item[1]) is str and type(item[3]) is tuple
                    and (item[4] is None or type(item[4]) is int)
                    and type(item[5]) is bool):
                append(make(item))
                continue
            if type(item) is tuple and len(item) == 2 and item[0] == ack:
                append(Ack(item[1]))
                continue
            try:
                append(_message(item))
            except (ValueError, TypeError) as exc:
                self._broke(f"it sent a malformed message ({exc}): {item!r:.200}")
                return False
        return True


def _message(item: Any) -> Message:
    """One message of a frame as the typed message (as the JSON protocol's would parse)."""
    if type(item) is list and len(item) in (3, 4) and item[0] == runner.EMITS:
        stream, rows = item[1], item[2]
        anchors = item[3] if len(item) == 4 else None  # (sent only when asked for)
        if type(stream) is not str:
            raise ValueError(f"emits with a non-string stream: {stream!r:.100}")
        if type(rows) is not list:
            raise ValueError("emits without a list of values")
        if anchors is not None and (type(anchors) is not list or len(rows) != len(anchors)):
            raise ValueError("emits without a list of values and one of anchors as long")
        if rows and set(map(type, rows)) != {list}:  # (map: no Python frame per row)
            raise ValueError("emits with values that are not lists")
        return EmitRun(stream, rows, anchors)
    if type(item) is tuple and len(item) == 3 and item[0] == runner.ACK_RANGE:
        _, first, stop = item
        if type(first) is not int or type(stop) is not int or not first <= stop:
            raise ValueError(f"an ack range that is not two ascending integers: {item!r:.100}")
        return AckRange(first, stop)
    if type(item) is tuple and len(item) == 2 and item[0] == runner.ACKS:
        if type(item[1]) is not list:
            raise ValueError(f"acks without a list of ids: {item[1]!r:.100}")
        return Acks(item[1])
    if type(item) is tuple:
        if len(item) == 6:
            values, stream, msg_id, anchors, task, need = item
            if type(values) is not list and type(values) is not tuple:
                raise ValueError(f"emit without a values list: {values!r:.100}")
            if stream is not None and type(stream) is not str:
                raise ValueError(f"emit with a non-string stream: {stream!r:.100}")
            if task is not None and type(task) is not int:
                raise ValueError(f"emit with a non-integer direct task: {task!r:.100}")
            return Emit(list(values), stream or "default", msg_id,
                        tuple(anchors) if anchors else (), task, bool(need))
        if len(item) == 2:
            if item[0] == runner.ACK:
                return Ack(item[1])
            if item[0] == runner.FAIL:
                return Fail(item[1])
        raise ValueError("an unknown message")
    return parse_message(item)
