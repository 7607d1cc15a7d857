"""Our runner for unmodified pystorm/streamparse component classes: batched binary frames
instead of one JSON message per tuple.

The host starts it instead of ``python -m streamparse.run module.Class`` (one subprocess
per task, as under Storm): ``python .../pystorm_runner.py module.Class``. It imports the
user's class and runs it the way ``streamparse.run`` does (``cls(serializer="json").run()``:
pystorm's own handshake, ``initialize(conf, context)``, logger set-up, run loop, exception
handling, ``auto_ack``/``auto_anchor``/``auto_fail``, heartbeats, tick tuples ->
``process_tick``), with two changes:

* the component's serializer is a :class:`FrameChannel`: messages are collected and sent
  as one frame (``MAGIC``, a 4-byte big-endian length, then ``marshal`` of a list of
  messages) when the component next waits for input (or at ``FLUSH_AT`` messages, or at
  once for the handshake's pid, a ``sync``, an ``error``, a message from another thread);
  the host sends frames of many tuples (``("T", first_id, source, stream, task, rows)``).
* where the class keeps pystorm's own ``emit``/``ack``/``fail``/``_run``, those are bound
  to versions with the same semantics that skip building a dict per message: an emit is a
  6-tuple ``(values, stream, id, anchors, task, need_task_ids)`` (the fields of the host's
  ``Emit``), a bolt's plain emits in a row on one stream one list ``["E", stream, rows]``,
  a fail ``("f", id)``; a bolt's anchors are not sent (the host does not use them: an
  emit's are ``()``) unless the host asks (``JSTORM_MULTILANG_ANCHORS=1``: a run is then
  ``["E", stream, rows, anchors]``, a row anchored to one tuple id having that id alone,
  not a tuple); a bolt's acks go as one ``("A", ids)`` after the
  frame's other messages (an ack never precedes what its tuple emitted); a frame of
  tuples is processed in one loop (each tuple's ``Tuple`` built without pystorm's
  per-message reading; while it runs, a plain list emitted on the default stream and
  auto-anchored to the current tuple is appended to the run by the loop's own ``emit``),
  whose auto-acks go as one range ``("R", first, stop)`` of the
  ids the host numbered consecutively; a spout's ``next`` may ask for up to ``n``
  ``next_tuple`` calls (stopping at the first that sends nothing).
  An emit with ``need_task_ids`` (not direct) still goes through pystorm's own ``emit``:
  the message is flushed and the runner waits for the task ids (a round trip, as in Storm).

A class that overrides one of them keeps its own, over the same frames. Everything else
(``log``, ``raise_exception``, ``report_metric``, the ``StormHandler`` logger) is pystorm's,
as dict messages in the frames. File descriptors 0 and 1 are moved aside at start-up (stray
``print``\\ s and writes to fd 1 go to stderr, reads of fd 0 see end of file) so nothing
but frames reaches the host.

This file is run as a script and imports only the standard library and pystorm (the host
imports its constants).
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
import time
from collections import deque
from typing import Any

MAGIC = 0xA7
"""The first byte of every frame (a stray text write to the stream is then malformed,
not a huge length)."""

HEADER = 5
MAX_FRAME_ENV = "JSTORM_MULTILANG_MAX_FRAME"
ANCHORS_ENV = "JSTORM_MULTILANG_ANCHORS"
"""``1``: send a bolt's anchors with its emits (the host does not need them: by default
they are left out)."""
FLUSH_AT = 4096
"""Messages collected before a frame goes out even though the component has not waited."""

NEXT_BUDGET_S = 0.01
"""How long one ``next`` may keep calling ``next_tuple``."""

FLUSH_AFTER_S = 0.05
"""A busy component's messages go out at least this often (a thread sends what waits)."""

TUPLES = "T"
ACK = "a"
ACKS = "A"
ACK_RANGE = "R"
FAIL = "f"
EMITS = "E"
_IMMEDIATE = frozenset(("sync", "error", "metrics"))
SYSTEM = "__system"
"""The source of tick tuples and heartbeats (a frame of tuples from it takes pystorm's
own loop, which treats them specially)."""


def encode_frame(items: list[Any]) -> bytes:
    """One frame of ``items`` (raises ValueError for a value marshal cannot write)."""
    payload = marshal.dumps(items)
    return bytes((MAGIC,)) + len(payload).to_bytes(4, "big") + payload


class HostWentAway(Exception):
    """The host closed our stdin (pystorm's StormWentAwayError takes its place at run)."""


class FrameChannel:
    """pystorm's serializer interface (``read_message``/``send_message``) over frames."""

    def __init__(self, in_fd: int, out_fd: int, max_frame: int, gone: type[Exception],
                 anchors: bool = False) -> None:
        self.input = os.fdopen(in_fd, "rb", buffering=1 << 16)
        self.anchors = anchors
        """A bolt's emits carry their anchors (runs ``[EMITS, stream, rows, anchors]``);
        else none (runs ``[EMITS, stream, rows]``, an emit's anchors ``()``)."""
        self.out_fd = out_fd
        self.max_frame = max_frame
        self.gone = gone
        self.pending: deque[Any] = deque()
        self.out: list[Any] = []
        """Messages not sent yet; appended to without the lock (the list is never swapped:
        a flush takes the first ones and deletes them, so an append meanwhile stays)."""
        self.acks: list[Any] = []
        """Acked tuple ids not sent yet: sent as one message after the frame's others."""
        self.auto_from = 0
        self.auto_to = 0
        """The batch loop's auto-acked tuple ids not sent yet, ``auto_from`` up to (not
        including) ``auto_to``: sent as one ``(ACK_RANGE, auto_from, auto_to)``. Only the
        task thread moves ``auto_to``, one tuple at a time, after the tuple's emits."""
        self.fast_ack: Any = None
        """The bound fast ``ack`` (the batch loop's auto-ack is then a range)."""
        self.fast_emit: Any = None
        """The bound fast ``emit`` of a bolt (the batch loop then appends its plain
        emits to the run itself)."""
        self.flushed = time.monotonic()
        self.stopped = threading.Event()
        self.sent = 0
        """Messages sent so far (a spout's ``next_tuple`` that sent none was idle)."""
        self.lock = threading.RLock()
        self.main = threading.get_ident()
        self.input_stream = sys.stdin
        self.output_stream = sys.stdout  # pystorm then sends print()s to the log

    # -- pystorm's serializer interface ---------------------------------------------------
    def read_message(self) -> Any:
        pending = self.pending
        self.fill()
        item = pending.popleft()
        if type(item) is tuple:  # a frame's tuples, one dict each for pystorm's read_tuple
            pending.extendleft(reversed(tuple_messages(item)))
            item = pending.popleft()
        return item

    def send_message(self, msg: Any) -> None:
        with self.lock:
            self.out.append(msg)
            self.sent += 1
            if (len(self.out) >= FLUSH_AT or threading.get_ident() != self.main
                    or "pid" in msg or msg.get("command") in _IMMEDIATE):
                self.flush()

    # -- frames ---------------------------------------------------------------------------
    def fill(self) -> None:
        """Wait for input: send what waits to go out, then read frames until one holds a
        message (a frame's tuples stay one item, for the batch loop)."""
        pending = self.pending
        while not pending:
            self.flush()
            pending.extend(self._read_frame())

    def flush(self) -> None:
        """Send what waits. From another thread than the task's (the flusher, a
        component's own thread) the last run of emits, which the task thread may be
        appending to, stays in place: the rows it holds so far go, it keeps the rest."""
        with self.lock:
            acks, out = self.acks, self.out
            k = len(acks)  # before the messages: an ack taken has its emits taken too
            lo, hi = self.auto_from, self.auto_to
            n = len(out)
            if not n and not k and lo == hi:
                return
            items = out[:n]
            if n and type(items[-1]) is list and threading.get_ident() != self.main:
                run = items[-1]
                rows = run[2]
                if len(run) == 4:
                    anchors = run[3]
                    m = min(len(rows), len(anchors))  # (rows are appended before anchors)
                    items[-1] = [EMITS, run[1], rows[:m], anchors[:m]]
                    del anchors[:m]
                else:
                    m = len(rows)
                    items[-1] = [EMITS, run[1], rows[:m]]
                del out[:n - 1]
                del rows[:m]  # the task thread appends at the end only
                n -= 1
            else:
                del out[:n]
            if items and type(items[-1]) is list and not items[-1][2]:
                items.pop()  # an empty run
            if k:
                items.append((ACKS, acks[:k]))
                del acks[:k]
            if lo != hi:
                items.append((ACK_RANGE, lo, hi))
                self.auto_from = hi
            self.flushed = time.monotonic()
            if items:
                self._write(items)

    def start_range(self, first: int) -> None:
        """The batch loop auto-acks from tuple id ``first`` on: a range not contiguous with
        the one so far goes out first (after the emits so far)."""
        if first != self.auto_to:
            with self.lock:
                if self.auto_from != self.auto_to:
                    self.out.append((ACK_RANGE, self.auto_from, self.auto_to))
                self.auto_from = self.auto_to = first

    def start_flusher(self) -> None:
        """Send what waits every ``FLUSH_AFTER_S`` while the component is busy (as pystorm
        sends each message at once: a slow ``process`` still acks, a stuck one has sent
        what it emitted)."""
        threading.Thread(target=self._flusher, name="pystorm-runner-flush",
                         daemon=True).start()

    def stop_flusher(self) -> None:
        self.stopped.set()

    def _flusher(self) -> None:
        while not self.stopped.wait(FLUSH_AFTER_S):
            if ((self.out or self.acks or self.auto_from != self.auto_to)
                    and time.monotonic() - self.flushed >= FLUSH_AFTER_S):
                try:
                    self.flush()
                except Exception:  # noqa: BLE001 (the main thread meets it too)
                    return

    def _write(self, items: list[Any]) -> None:
        try:
            data = encode_frame(items)
        except ValueError:  # a value marshal cannot write: as pystorm's JSON would send it
            data = encode_frame([_as_json(item) for item in items])
        if len(data) > self.max_frame:  # the host's limit is per frame: split it
            if len(items) > 1:
                half = len(items) // 2
                self._write(items[:half])
                self._write(items[half:])
                return
            run = items[0]
            if type(run) is list and len(run[2]) > 1:  # one run of many emits
                half = len(run[2]) // 2
                for piece in (slice(None, half), slice(half, None)):  # rows (and anchors)
                    self._write([[EMITS, run[1], *[part[piece] for part in run[2:]]]])
                return
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.out_fd, view):]
            except BrokenPipeError as exc:
                raise self.gone("the host closed our stdout") from exc

    def _read_frame(self) -> list[Any]:
        head = self.input.read(HEADER)
        if len(head) < HEADER:
            raise self.gone("the host closed our stdin")
        if head[0] != MAGIC:
            raise ValueError(f"not a frame from the host: {head!r}")
        size = int.from_bytes(head[1:], "big")
        payload = self.input.read(size)
        if len(payload) < size:
            raise self.gone("the host closed our stdin mid-frame")
        items = marshal.loads(payload)
        if type(items) is not list:
            raise ValueError(f"a frame from the host holds {type(items).__name__}, not a list")
        return items


def tuple_messages(batch: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A frame's tuples as the JSON protocol's tuple messages."""
    _, first, source, stream, task, rows = batch
    return [{"id": str(i), "comp": source, "stream": stream, "task": task,
             "tuple": list(values)} for i, values in enumerate(rows, first)]


def _as_json(item: Any) -> Any:
    """``item`` as JSON would carry it (a namedtuple becomes a list, ...); TypeError names
    a value JSON has no form for either."""
    import json

    if type(item) is tuple and len(item) == 6:
        values, stream, msg_id, anchors, task, need = item
        return (json.loads(json.dumps(values)), stream, json.loads(json.dumps(msg_id)),
                anchors, task, need)
    return json.loads(json.dumps(item))


# -- the fast bindings --------------------------------------------------------------------
def bind(comp: Any, channel: FrameChannel) -> None:
    """Bind fast ``emit``/``ack``/``fail``/``_run`` where the class keeps pystorm's own."""
    from pystorm.bolt import Bolt
    from pystorm.component import Tuple
    from pystorm.spout import Spout

    cls = type(comp)
    out = channel.out
    keep = channel.anchors
    if isinstance(comp, Bolt):
        if cls.emit is Bolt.emit:
            def bolt_emit(tup: Any, stream: Any = None, anchors: Any = None,
                          direct_task: Any = None, need_task_ids: bool = False) -> Any:
                if need_task_ids and direct_task is None:  # a round trip: pystorm's own
                    if not keep and anchors is not None:
                        iter(anchors)  # (what is not a list of them fails)
                    return Bolt.emit(comp, tup, stream=stream,
                                     anchors=anchors if keep else (),
                                     direct_task=direct_task, need_task_ids=True)
                anchor: Any = ()  # ids, or one id alone (a str, in a run of emits)
                if not keep:  # not sent: none made (what is not a list of them fails)
                    if anchors is not None:
                        iter(anchors)
                elif anchors is None:
                    if comp.auto_anchor:
                        cur = comp._current_tups
                        if len(cur) == 1 and type(cur[0]) is Tuple and type(cur[0][0]) is str:
                            anchor = cur[0][0]  # the one current tuple's id, as it is
                        else:
                            anchor = tuple([a.id if isinstance(a, Tuple) else a
                                            for a in cur])
                else:
                    anchor = tuple([a.id if isinstance(a, Tuple) else a for a in anchors])
                if type(tup) is list:
                    values = tup
                elif isinstance(tup, (list, tuple)):
                    values = list(tup)
                else:
                    raise TypeError("All Tuples must be either lists or tuples, received "
                                    f"{type(tup)!r} instead.")
                if direct_task is None:  # a plain emit: onto the run of its stream
                    if not stream:
                        stream = "default"
                    last = out[-1] if out else None
                    if type(last) is list and last[1] == stream:
                        last[2].append(values)
                        if keep:
                            last[3].append(anchor)
                    else:
                        out.append([EMITS, stream, [values], [anchor]] if keep
                                   else [EMITS, stream, [values]])
                        if len(out) >= FLUSH_AT:
                            channel.flush()
                    return None
                out.append((values, stream or "default", None,
                            (anchor,) if type(anchor) is str else anchor, direct_task,
                            need_task_ids))
                if len(out) >= FLUSH_AT:
                    channel.flush()
                return [direct_task] if need_task_ids else None
            comp.emit = channel.fast_emit = bolt_emit
        if cls.ack is Bolt.ack:
            acks = channel.acks

            def bolt_ack(tup: Any) -> None:
                acks.append(tup.id if isinstance(tup, Tuple) else tup)
            comp.ack = channel.fast_ack = bolt_ack
        if cls.fail is Bolt.fail:
            def bolt_fail(tup: Any) -> None:
                out.append((FAIL, tup.id if isinstance(tup, Tuple) else tup))
            comp.fail = bolt_fail
        if cls._run is Bolt._run and cls.read_tuple is Bolt.read_tuple:
            comp._run = lambda: _bolt_run(comp, channel, Tuple)
    elif isinstance(comp, Spout):
        if cls.emit is Spout.emit:
            def spout_emit(tup: Any, tup_id: Any = None, stream: Any = None,
                           direct_task: Any = None, need_task_ids: bool = False) -> Any:
                if need_task_ids and direct_task is None:
                    return Spout.emit(comp, tup, tup_id=tup_id, stream=stream,
                                      direct_task=direct_task, need_task_ids=True)
                if not isinstance(tup, (list, tuple)):
                    raise TypeError("All Tuples must be either lists or tuples, received "
                                    f"{type(tup)!r} instead.")
                out.append((tup if type(tup) is list else list(tup),
                                    stream or "default", tup_id, (), direct_task,
                                    need_task_ids))
                channel.sent += 1
                if len(out) >= FLUSH_AT:
                    channel.flush()
                return [direct_task] if need_task_ids else None
            comp.emit = spout_emit
        if cls._run is Spout._run:
            comp._run = lambda: _spout_run(comp, channel)


def _bolt_run(comp: Any, channel: FrameChannel, tuple_cls: Any) -> None:
    """pystorm's ``Bolt._run`` for every tuple of a frame in one loop (what it does per
    tuple: ``_current_tups``, ``process``, the auto-ack); a single message (a heartbeat, a
    tick, a tuple sent alone) goes through pystorm's own."""
    pending = channel.pending
    if not comp._pending_commands:
        channel.fill()  # as pystorm's read_tuple would wait, but a frame stays one batch
    if comp._pending_commands or type(pending[0]) is not tuple or pending[0][2] == SYSTEM:
        from pystorm.bolt import Bolt

        Bolt._run(comp)  # (a tick or heartbeat, one message each, takes pystorm's path)
        return
    batch = pending.popleft()
    _, first, source, stream, task, rows = batch
    val_type = comp._source_tuple_types[source].get(stream)
    process = comp.process
    ack = comp.ack
    auto_ack = comp.auto_ack
    ranged = auto_ack and ack is channel.fast_ack  # the auto-acks as one range
    if ranged:
        channel.start_range(first)
    new = tuple.__new__  # pystorm's Tuple is a namedtuple: no per-field Python work
    # the values' namedtuple too, as val_type(*values) makes it, when the arity fits
    arity = -1 if val_type is None else len(val_type._fields)
    out = channel.out
    general = channel.fast_emit
    keep = channel.anchors
    cur: list[Any] = []
    tid = ""
    run: Any = None  # the run of default-stream emits the batch appends to
    run_rows: list[Any] = []
    run_anchors: list[Any] = []

    def batch_emit(tup: Any, stream: Any = None, anchors: Any = None,
                   direct_task: Any = None, need_task_ids: bool = False) -> Any:
        """The bolt's emit while the batch runs: a plain list emitted on the default
        stream, auto-anchored to the current tuple, is appended to the batch's run at
        once (the id the loop made for the tuple is its anchor); the rest as ever."""
        nonlocal run, run_rows, run_anchors
        if (stream is None and anchors is None and direct_task is None
                and not need_task_ids and type(tup) is list and comp._current_tups is cur
                and comp.auto_anchor):
            if out and out[-1] is run:
                run_rows.append(tup)
                if keep:
                    run_anchors.append(tid)
                return None
            general(tup)
            if out and type(out[-1]) is list and out[-1][1] == "default":
                run = out[-1]
                run_rows = run[2]
                if keep:
                    run_anchors = run[3]
            return None
        return general(tup, stream, anchors, direct_task, need_task_ids)

    fast = general is not None and comp.__dict__.get("emit") is general
    if fast:
        comp.emit = batch_emit
    i = first
    try:
        for values in rows:
            tid = str(i)
            tup = new(tuple_cls, (tid, source, stream, task,
                                  (values if type(values) is tuple else tuple(values))
                                  if val_type is None else new(val_type, values)
                                  if len(values) == arity else val_type(*values)))
            comp._current_tups = cur = [tup]
            process(tup)
            if ranged:
                channel.auto_to = i + 1
            elif auto_ack:
                ack(tup)
            i += 1
    except BaseException:
        rest = rows[i - first + 1:]  # what pystorm had not read yet stays to be read
        if rest:
            pending.appendleft((TUPLES, i + 1, source, stream, task, rest))
        raise
    finally:
        if fast and comp.__dict__.get("emit") is batch_emit:
            comp.emit = general
    comp._current_tups = []


def _spout_run(comp: Any, channel: FrameChannel) -> None:
    """pystorm's ``Spout._run``; a ``next`` with ``n`` calls ``next_tuple`` up to ``n`` times,
    stopping at the first call that sent nothing (Storm would have the spout wait) or once
    ``NEXT_BUDGET_S`` has passed (a slow spout does not hold the task, and its barriers)."""
    cmd = comp.read_command()
    command = cmd["command"]
    if command == "next":
        next_tuple = comp.next_tuple
        until = time.monotonic() + NEXT_BUDGET_S
        for _ in range(max(1, int(cmd.get("n", 1)))):
            before = channel.sent
            next_tuple()
            if channel.sent == before or time.monotonic() > until:
                break
    elif command == "ack":
        comp.ack(cmd["id"])
    elif command == "fail":
        comp.fail(cmd["id"])
    elif command == "activate":
        comp.activate()
    elif command == "deactivate":
        comp.deactivate()
    else:
        comp.logger.error("Received invalid command from Storm: %r", cmd)
    comp.send_message({"command": "sync"})


# -- start-up -----------------------------------------------------------------------------
def load_class(target: str) -> type:
    """``module.Class``, imported as ``streamparse.run`` imports it (the working directory,
    or its ``resources/`` as Storm >= 1.0.3 lays it out, on ``sys.path``)."""
    import importlib

    if "." not in target:
        raise SystemExit(f"pystorm runner: {target!r} is not module.ClassName")
    mod_name, cls_name = target.rsplit(".", 1)
    import_path = os.getcwd()
    resources = os.path.join(import_path, "resources")
    if os.path.isfile(os.path.join(resources, mod_name.replace(".", os.path.sep) + ".py")):
        import_path = resources
    sys.path.append(import_path)
    cls = getattr(importlib.import_module(mod_name), cls_name)
    from pystorm.component import Component

    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise SystemExit(f"pystorm runner: {target} is not a pystorm Bolt or Spout class")
    return cls


def main(argv: list[str]) -> None:
    # our own folder is not the user's: `bolt.py` must be theirs, not ours
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if len(argv) == 1:  # Storm passes everything as one string, as streamparse.run splits it
        argv = argv[0].split()
    args = [a for a in argv if not a.startswith("-")]  # -s/--serializer: frames replace it
    if not args:
        raise SystemExit("usage: pystorm_runner.py module.ClassName")
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    cls = load_class(args[0])
    from pystorm.exceptions import StormWentAwayError

    class HostGone(StormWentAwayError):
        """pystorm's end of input (its run loop exits with status 2), with our reason
        (pystorm's own takes no argument)."""

        def __init__(self, reason: str) -> None:
            Exception.__init__(self, f"Got EOF while reading from Storm: {reason}")

    channel = FrameChannel(in_fd, out_fd, int(os.environ.get(MAX_FRAME_ENV, str(16 << 20))),
                           HostGone, anchors=os.environ.get(ANCHORS_ENV) == "1")
    comp = cls(serializer="json")
    comp.serializer = channel
    bind(comp, channel)
    exit_ = comp._exit

    def flushed_exit(status: int) -> None:
        stop()
        exit_(status)  # pystorm's: sys.exit unless the component runs threads of its own

    def stop() -> None:
        channel.stop_flusher()
        for thread in threading.enumerate():
            if thread.name == "pystorm-runner-flush":
                thread.join(1.0)
        try:
            channel.flush()
        except Exception:  # noqa: BLE001 (the host may be gone: exit anyway)
            pass

    comp._exit = flushed_exit
    channel.start_flusher()
    try:
        comp.run()
    finally:
        stop()


if __name__ == "__main__":
    main(sys.argv[1:])
