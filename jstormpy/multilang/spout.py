"""ShellSpout: a Storm multilang spout run as a subprocess of its task, exactly-once through
its message ids (:mod:`jstormpy.multilang.acks`)."""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jstormpy.api.component import Spout, TopologyContext
from jstormpy.api.errors import MultilangError, TopologyError
from jstormpy.multilang.acks import AckLedger
from jstormpy.multilang.component import DEFAULTS, MessageSink, ShellSettings, start_process
from jstormpy.multilang.protocol import Ack, Emit, Fail, ShellProcess, Sync

IDLE_SLEEP_S = 0.001
"""After a ``next`` that emitted nothing (Storm's default spout wait strategy: 1 ms)."""

PARK_TIMEOUT_S = 60.0
"""How long a closed task's subprocess waits for the next generation's task to adopt it."""

AT_LEAST_ONCE_HINT = (
    "give every emit a message id (Storm's reliable spouts: emit(tup, tup_id=...)) and "
    "re-emit on fail, or accept at-least-once for this spout with "
    "ShellSpout(..., at_least_once=True)")


@dataclass(frozen=True)
class _Parked:
    """A subprocess kept across a rollback, and the ids its old task had not acked."""

    proc: ShellProcess
    in_flight: list[Any]
    timer: threading.Timer


_parked: dict[tuple[str, str, int], _Parked] = {}
_parked_lock = threading.Lock()


def _park(key: tuple[str, str, int], proc: ShellProcess, in_flight: list[Any]) -> None:
    timer = threading.Timer(PARK_TIMEOUT_S, _unpark_and_close, args=(key, proc))
    timer.daemon = True
    with _parked_lock:
        old = _parked.pop(key, None)
        _parked[key] = _Parked(proc, in_flight, timer)
    if old is not None:
        old.timer.cancel()
        old.proc.close(0.5)
    timer.start()


def _unpark(key: tuple[str, str, int]) -> _Parked | None:
    with _parked_lock:
        parked = _parked.pop(key, None)
    if parked is not None:
        parked.timer.cancel()
    return parked


def _unpark_and_close(key: tuple[str, str, int], proc: ShellProcess) -> None:
    with _parked_lock:
        if key in _parked and _parked[key].proc is proc:
            del _parked[key]
        else:
            return
    proc.close(0.5)


@atexit.register
def _close_parked() -> None:
    with _parked_lock:
        parked = list(_parked.values())
        _parked.clear()
    for p in parked:
        p.timer.cancel()
        p.proc.close(0.5)


class ShellSpout(Spout):
    """A spout that is a Storm multilang component in any language.

    Each task starts ``command`` and drives it with ``next`` commands; its ``emit``
    messages are emitted by the task. Exactly-once rests on Storm's reliability API: the
    spout gives each tuple a message id and re-emits a tuple when it is sent ``fail``, as
    Storm's reliable spouts do. The task sends ``ack(id)`` only when the checkpoint that
    covers the tuple completes; at a rollback it sends ``fail(id)`` for every tuple emitted
    after the restored checkpoint (the subprocess is kept when its worker survives), and
    drops a re-emitted id that the restored checkpoint already holds.

    A Storm spout never ends. Here a subprocess that exits with status 0 instead of
    answering ``next`` has finished its input (``finish()``): a bounded job drains. A
    reliable spout exits once it has been acked for everything it emitted.

    Args:
        command: the argv to start, like ``["python3", "words.py"]``.
        outputs: the declared fields (or ``{stream: fields}``).
        message_ids: whether the spout gives its emits ids (default True). With False
            (or with an emit without an id at run time) ``guarantee="exactly_once"`` is
            refused unless ``at_least_once`` is set.
        at_least_once: accept that this spout's tuples are not exactly-once (emits
            without ids are emitted as they come, and not replayed).
        cwd, env: the subprocess's working directory and extra environment.
        conf: settings added to the handshake's ``conf`` (Storm's component config).
        heartbeat_timeout_s: how long a command may go unanswered before it counts as hung.
        max_message_bytes: a longer message is a protocol error.
        protocol: ``"auto"`` (default): a pystorm/streamparse class (``python -m
            streamparse.run module.Class``) runs in our pystorm runner, binary frames of
            many messages, ``next`` asking for up to 64 ``next_tuple`` calls; ``"json"``:
            Storm's JSON protocol for it too (also ``"jstormpy.multilang.protocol":
            "json"`` in ``conf``).
    """

    def __init__(self, command: Sequence[str],
                 outputs: Sequence[str] | Mapping[str, Sequence[str]] = (), *,
                 message_ids: bool = True, at_least_once: bool = False,
                 cwd: str | None = DEFAULTS["cwd"], env: Mapping[str, str] | None = None,
                 conf: Mapping[str, Any] | None = None,
                 heartbeat_timeout_s: float = DEFAULTS["heartbeat_timeout_s"],
                 max_message_bytes: int = DEFAULTS["max_message_bytes"],
                 protocol: str = DEFAULTS["protocol"]) -> None:
        self.settings = ShellSettings(command, outputs, cwd, env, heartbeat_timeout_s,
                                      max_message_bytes, conf, protocol)
        self.outputs = (tuple(outputs) if not isinstance(outputs, Mapping)  # type: ignore[misc]
                        else {k: tuple(v) for k, v in outputs.items()})
        self.message_ids = message_ids
        self.at_least_once = at_least_once
        self._ledger = AckLedger()
        self._proc: ShellProcess | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_proc", "_sink"):
            state.pop(key, None)
        return state

    def check_guarantee(self, guarantee: str, name: str) -> None:
        """Submit-time check (every launcher runs it): refuse exactly-once for a spout
        declared without message ids."""
        if guarantee == "exactly_once" and not self.message_ids and not self.at_least_once:
            raise TopologyError(
                f"spout {name!r} (ShellSpout {' '.join(self.settings.command)!r}) is declared "
                "message_ids=False: without message ids a multilang spout cannot be "
                f"exactly-once under guarantee='exactly_once'; {AT_LEAST_ONCE_HINT}")

    @property
    def metrics(self) -> dict[str, Any]:
        """The last value of each metric the subprocess reported (``metrics`` messages)."""
        sink = self.__dict__.get("_sink")
        return {} if sink is None else dict(sink.metrics)

    # -- the checkpoint hooks -------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The ids emitted up to this barrier and not acked yet."""
        return self._ledger.snapshot()

    def restore(self, snap: dict[str, Any]) -> None:
        """The restored checkpoint covers these ids (runs before ``open``)."""
        self._ledger.restore(snap)

    def before_snapshot(self, checkpoint_id: int) -> None:
        """The ids emitted since the last barrier belong to ``checkpoint_id``."""
        self._ledger.barrier(checkpoint_id)

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Ack to the spout every id the completed checkpoint covers."""
        acks = self._ledger.complete(checkpoint_id)
        if self._proc is None:  # it ended its input (exited 0): nothing left to tell it
            return
        for msg_id in acks:
            self._command({"command": "ack", "id": msg_id})

    # -- the life of the task -------------------------------------------------------------
    def open(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Adopt the subprocess a rollback kept in this worker, or start one."""
        self._key = (context.topology, context.component, context.task_id)
        self._guarantee = str(conf.get("guarantee", "exactly_once"))
        # acks wait until no recovery can restore a checkpoint before theirs
        self._ledger.retained = max(1, int(conf.get("checkpoints_retained", 1)))
        self._name = context.component
        parked = _unpark(self._key)
        if parked is not None and parked.proc.alive():
            self._proc = parked.proc
            self._sink = MessageSink(self, parked.proc)
            self._command({"command": "activate"})
            # told at the first next_tuple: a fail makes the spout re-emit, not in open
            self._adopt = self._ledger.adopt(parked.in_flight)
            return
        if parked is not None:
            parked.proc.close(0.5)
        self._proc = proc = start_process(self.settings, conf, context)
        self._sink = MessageSink(self, proc)
        self._command({"command": "activate"})

    def next_tuple(self) -> None:
        """One ``next`` command: its emits, up to its ``sync``."""
        steps = self.__dict__.pop("_adopt", None)
        if steps is not None:  # an adopted subprocess: what the old task owed it
            for msg_id in steps.fails:
                self._command({"command": "fail", "id": msg_id})
        try:
            n = self._proc.next_batch if self._proc is not None else 1
            emitted = self._command({"command": "next"} if n == 1 else
                                    {"command": "next", "n": n})
        except MultilangError:
            proc = self._proc
            if proc is not None and proc.exited_cleanly():
                # end of input (a jstormpy extension: Storm spouts never end): the
                # subprocess exited with status 0 instead of answering `next`
                self._proc = None
                proc.close(0.1)
                self.finish()
                return
            raise
        if emitted == 0:
            time.sleep(IDLE_SLEEP_S)

    def _command(self, payload: dict[str, Any]) -> int:
        """Send a command, perform its messages up to ``sync``; the tuples emitted."""
        proc = self._proc
        assert proc is not None
        proc.send(payload)
        emitted = 0
        ack_now: list[Any] = []
        while True:
            msg = proc.receive()
            if isinstance(msg, Sync):
                break
            if isinstance(msg, Emit):
                if self._accept(msg, ack_now):
                    tasks = self._sink.emit(msg)
                    emitted += 1
                else:
                    tasks = []
                if msg.need_task_ids and msg.task is None:
                    proc.send(tasks)
            elif isinstance(msg, (Ack, Fail)) or not self._sink.perform(msg):
                proc.broken = f"a spout may not send {msg!r}"
                raise proc.failure(proc.broken)
        for msg_id in ack_now:  # at-most-once: nothing to wait for, the spout forgets them
            self._command({"command": "ack", "id": msg_id})
        return emitted

    def _accept(self, msg: Emit, ack_now: list[Any]) -> bool:
        """Whether to emit ``msg`` (its id tracked), or to drop it as covered; ids to ack
        once the command is done go to ``ack_now``."""
        if msg.msg_id is None:
            if self.at_least_once or self._guarantee == "at_most_once":
                return True
            assert self._proc is not None
            raise MultilangError(
                f"spout {self._name!r} (ShellSpout {' '.join(self.settings.command)!r}) "
                f"emitted a tuple without a message id under guarantee={self._guarantee!r}: "
                f"it cannot be replayed after a rollback; {AT_LEAST_ONCE_HINT}")
        if self._guarantee == "at_most_once":  # no checkpoints: nothing to wait for
            ack_now.append(msg.msg_id)
            return True
        # False: the restored checkpoint covers it (dropped; the ledger acks it later)
        return self._ledger.emitted(msg.msg_id)

    def close(self) -> None:
        """Keep the subprocess for the next generation's task of this worker (a rollback
        fails what it emitted after the restored checkpoint); closed if not adopted."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not proc.alive():
            proc.close(0.5)
            return
        try:
            self._command_on(proc, {"command": "deactivate"})
        except MultilangError:
            proc.close(0.5)
            return
        # every id it is owed an answer for: an adoption not yet told (no next_tuple since
        # open) included, or those ids would stay unanswered in the subprocess for good
        steps = self.__dict__.get("_adopt")
        owed = [] if steps is None else list(steps.fails)
        _park(self._key, proc, owed + self._ledger.in_flight())

    def _command_on(self, proc: ShellProcess, payload: dict[str, Any]) -> None:
        self._proc = proc
        try:
            self._command(payload)
        finally:
            self._proc = None
