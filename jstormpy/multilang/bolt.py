"""ShellBolt: a Storm multilang bolt run as a subprocess of its task."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from jstormpy.api.batch import Batch
from jstormpy.api.component import (
    Bolt,
    Emitter,
    TopologyContext,
    Tuple,
    bound_emitter,
    declared_streams,
)
from jstormpy.multilang.component import DEFAULTS, MessageSink, ShellSettings, start_process
from jstormpy.multilang.in_flight import InFlight
from jstormpy.multilang.protocol import (
    HEARTBEAT_STREAM,
    SYSTEM_COMPONENT,
    TICK_STREAM,
    Ack,
    AckRange,
    Acks,
    Emit,
    EmitRun,
    Fail,
    Message,
    ShellProcess,
    Sync,
)


class ShellBolt(Bolt):
    """A bolt whose ``execute`` is a Storm multilang component in any language.

    Each task starts ``command`` (in ``cwd``) and speaks Storm's multilang protocol with
    it: input tuples go to its stdin, its ``emit`` messages are emitted by the task (with
    the task ids they went to when it asks for them), ``ack`` ends a tuple, ``fail`` or an
    exit, a hang past ``heartbeat_timeout_s`` or a malformed message over
    ``max_message_bytes`` fails the task (the restart strategy applies), ``log`` goes to
    the task's log, ``error`` to its log at error level, ``metrics`` to
    :attr:`metrics`. ``conf`` adds settings to the handshake's ``conf`` (Storm's component
    config). A pystorm/streamparse class (``python -m streamparse.run module.Class``) runs
    in our pystorm runner, which speaks the same protocol in binary frames of many
    messages; ``protocol="json"`` (or ``"jstormpy.multilang.protocol": "json"`` in
    ``conf``) keeps Storm's JSON protocol for it. Up to ``max_in_flight`` tuples are
    sent before the task waits for acks (a received batch goes out in one write); at
    every barrier it waits until each tuple sent is acked, so whatever a tuple caused is
    emitted before the barrier.

    The subprocess's own memory is not part of a checkpoint: at a rollback the task
    starts a fresh subprocess. Keep state that must survive in managed state.

    Example:
        >>> bolt = ShellBolt(["python3", "split.py"], outputs=("word",))
        >>> bolt.outputs
        ('word',)
    """

    tick_interval_ms = 1000.0
    """Heartbeats (and Storm tick tuples) are sent from ``on_tick``."""

    def __init__(self, command: Sequence[str],
                 outputs: Sequence[str] | Mapping[str, Sequence[str]] = (), *,
                 cwd: str | None = DEFAULTS["cwd"], env: Mapping[str, str] | None = None,
                 conf: Mapping[str, Any] | None = None,
                 heartbeat_timeout_s: float = DEFAULTS["heartbeat_timeout_s"],
                 max_message_bytes: int = DEFAULTS["max_message_bytes"],
                 max_in_flight: int = 4096, tick_tuple_freq_s: float | None = None,
                 heartbeat_interval_s: float = 1.0,
                 protocol: str = DEFAULTS["protocol"]) -> None:
        self.settings = ShellSettings(command, outputs, cwd, env, heartbeat_timeout_s,
                                      max_message_bytes, conf, protocol)
        self.outputs = (tuple(outputs) if not isinstance(outputs, Mapping)  # type: ignore[misc]
                        else {k: tuple(v) for k, v in outputs.items()})
        self.max_in_flight = max(1, int(max_in_flight))
        self.tick_tuple_freq_s = tick_tuple_freq_s
        self.heartbeat_interval_s = heartbeat_interval_s
        if tick_tuple_freq_s:  # on_tick often enough for the tick tuples
            self.tick_interval_ms = min(  # type: ignore[misc]
                self.tick_interval_ms, tick_tuple_freq_s * 1000.0)
        self._proc: ShellProcess | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_proc", "_sink"):
            state.pop(key, None)
        return state

    @property
    def metrics(self) -> dict[str, Any]:
        """The last value of each metric the subprocess reported (``metrics`` messages)."""
        sink = self.__dict__.get("_sink")
        return {} if sink is None else dict(sink.metrics)

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Start the subprocess and do the handshake."""
        self._proc = proc = start_process(self.settings, conf, context)
        self._sink = MessageSink(self, proc)
        self._in_flight = InFlight()  # the numbers of the tuples sent, not answered
        self._component = context.component
        self._field_index = {stream: {f: i for i, f in enumerate(fields)}
                             for stream, fields in declared_streams(self).items()}
        self._next_tuple_id = 0
        self._heartbeat_sent: float | None = None
        now = time.monotonic()
        self._last_heartbeat = now
        self._last_tick = now

    def _send_tuple(self, tuple_id: str, source: str, stream: str, task: int,
                    values: Sequence[Any]) -> None:
        assert self._proc is not None
        try:
            self._proc.send({"id": tuple_id, "comp": source, "stream": stream, "task": task,
                             "tuple": list(values)})
        except TypeError as exc:  # a value JSON has no form for
            raise self._proc.failure(f"a tuple from {source!r} cannot be sent as JSON "
                                     f"({exc}): {list(values)!r}") from exc

    def execute(self, tup: Tuple) -> None:
        """Send the tuple; wait for acks only when ``max_in_flight`` tuples are out."""
        self._next_tuple_id += 1
        tuple_id = str(self._next_tuple_id)
        self._send_tuple(tuple_id, tup.source, tup.stream, tup.task, tup.values)
        self._in_flight.add_range(self._next_tuple_id, self._next_tuple_id + 1)
        self._pump()
        if len(self._in_flight) >= self.max_in_flight:
            self._await_answers(self.max_in_flight - 1)

    def execute_batch(self, batch: Batch) -> None:
        """A channel batch in one write (the batch API: one call per received batch),
        then as :meth:`execute`: wait for acks while over ``max_in_flight``."""
        proc = self._proc
        assert proc is not None
        first = self._next_tuple_id + 1
        try:
            data = proc.encode_tuples(first, batch.source, batch.stream, batch.task,
                                      batch.rows)
        except TypeError as exc:  # a value JSON (or marshal) has no form for
            raise proc.failure(f"a tuple from {batch.source!r} cannot be sent "
                               f"({exc})") from exc
        self._next_tuple_id += len(batch.rows)
        proc.send_encoded(data)
        self._in_flight.add_range(first, self._next_tuple_id + 1)
        self._pump()
        if len(self._in_flight) > self.max_in_flight:
            self._await_answers(self.max_in_flight)

    def before_snapshot(self, checkpoint_id: int) -> None:
        """At a barrier: every tuple sent is acked (its emits go before the barrier)."""
        self._drain()

    def on_inputs_finished(self) -> None:
        """Every input ended: wait for the acks of what was sent."""
        self._drain()

    def on_tick(self, now_ms: float) -> None:
        """Heartbeats (a hung subprocess fails the task) and Storm tick tuples."""
        if self._proc is None:
            return
        self._pump()
        self._keep_time()

    def _keep_time(self) -> float:
        """Send the heartbeat and the tick tuple that are due (an unanswered heartbeat past
        the timeout fails the task); the seconds until the next is due."""
        proc = self._proc
        assert proc is not None
        now = time.monotonic()
        sent = self._heartbeat_sent
        if sent is not None and now - sent > proc.heartbeat_timeout_s:
            proc.broken = (f"it did not answer a heartbeat within "
                           f"{proc.heartbeat_timeout_s:g} s (heartbeat timeout): it hangs")
            raise proc.failure(proc.broken)
        if sent is None and now - self._last_heartbeat >= self.heartbeat_interval_s:
            self._send_tuple(f"hb-{int(now * 1000)}", SYSTEM_COMPONENT, HEARTBEAT_STREAM,
                             -1, [])
            self._heartbeat_sent = self._last_heartbeat = now
        freq = self.tick_tuple_freq_s
        if freq and now - self._last_tick >= freq:
            self._last_tick = now
            self._next_tuple_id += 1
            tuple_id = str(self._next_tuple_id)
            self._send_tuple(tuple_id, SYSTEM_COMPONENT, TICK_STREAM, -1, [freq])
            self._in_flight.add_range(self._next_tuple_id, self._next_tuple_id + 1)
        sent = self._heartbeat_sent
        due = (sent + proc.heartbeat_timeout_s if sent is not None
               else self._last_heartbeat + self.heartbeat_interval_s)
        if freq:
            due = min(due, self._last_tick + freq)
        return max(due - now, 0.001)

    def _drain(self) -> None:
        self._await_answers(0)

    def _await_answers(self, most: int) -> None:
        """Perform messages until at most ``most`` sent tuples are unanswered, sending the
        heartbeats and tick tuples that fall due meanwhile (a bolt may answer its tuples
        only at a tick, as tick-driven batching bolts do). Answering none of them for
        longer than the heartbeat timeout (plus a tick period) fails the task."""
        proc = self._proc
        assert proc is not None
        patience = proc.heartbeat_timeout_s + (self.tick_tuple_freq_s or 0.0)
        last_answer = time.monotonic()
        wait = self._keep_time()
        while len(self._in_flight) > most:
            msg = proc.next_message(wait)
            answered = msg is not None and self._perform(msg)
            if msg is not None:
                answered = self._pump() or answered  # the rest that arrived with it
            if answered:
                last_answer = time.monotonic()
            elif time.monotonic() - last_answer > patience:
                proc.broken = (f"it answered none of its {len(self._in_flight)} outstanding "
                               f"tuples within {patience:g} s (heartbeat timeout"
                               f"{' plus a tick period' if self.tick_tuple_freq_s else ''})"
                               ": it hangs")
                raise proc.failure(proc.broken)
            wait = self._keep_time()

    def _pump(self) -> bool:
        """Perform the messages that have arrived (no waiting); whether one answered a
        tuple. (The common messages, a plain emit and an ack, are performed inline.)"""
        proc = self._proc
        assert proc is not None
        emitter = bound_emitter(self)
        assert emitter is not None, "a ShellBolt runs in a task"
        emit, in_flight, answered = emitter.emit, self._in_flight, False
        msgs = proc.drain()
        while msgs:
            for msg in msgs:
                if type(msg) is EmitRun:
                    self._emit_run(emitter, msg)
                elif type(msg) is AckRange:
                    in_flight.discard_range(msg.first, msg.stop)
                    answered = True
                elif type(msg) is Acks:
                    in_flight.discard_ids(msg.tuple_ids)
                    answered = True
                elif type(msg) is Emit and msg.task is None and not msg.need_task_ids:
                    emit(msg.values, msg.stream)
                elif type(msg) is Ack:
                    in_flight.discard_id(msg.tuple_id)
                    answered = True
                elif self._perform(msg):
                    answered = True
            msgs = proc.drain()
        return answered

    def _emit_run(self, emitter: Emitter, run: EmitRun) -> None:
        """A run of plain emits routed as one batch (``emit_batch``: fields grouping
        partitions it in one pass) when every row has the stream's declared arity, else
        one by one (an emit that does not fit then fails as it would alone)."""
        rows, stream = run.rows, run.stream
        index = self._field_index.get(stream)
        if index is not None and rows and set(map(len, rows)) == {len(index)}:
            emitter.emit_batch(Batch(rows, index, self._component, stream), stream)
            return
        emit = emitter.emit
        for values in rows:
            emit(values, stream)

    def _perform(self, msg: Message) -> bool:
        """Perform one message; True when it ended an input tuple."""
        proc = self._proc
        assert proc is not None
        if isinstance(msg, Emit):
            tasks = self._sink.emit(msg)
            if msg.need_task_ids and msg.task is None:
                proc.send(tasks)
            return False
        if isinstance(msg, Ack):
            self._in_flight.discard_id(msg.tuple_id)
            return True
        if isinstance(msg, EmitRun):  # plain emits: straight to the emitter, as _pump does
            emitter = bound_emitter(self)
            assert emitter is not None, "a ShellBolt runs in a task"
            self._emit_run(emitter, msg)
            return False
        if isinstance(msg, Acks):
            self._in_flight.discard_ids(msg.tuple_ids)
            return True
        if isinstance(msg, AckRange):
            self._in_flight.discard_range(msg.first, msg.stop)
            return True
        if isinstance(msg, Fail):
            reported = self._sink.last_error
            detail = f"; the error it reported:\n{reported}" if reported else ""
            raise proc.failure(f"it failed tuple {msg.tuple_id!r}{detail}")
        if isinstance(msg, Sync):
            self._heartbeat_sent = None
            return False
        if not self._sink.perform(msg):
            proc.broken = f"a bolt may not send {msg!r}"
            raise proc.failure(proc.broken)
        return False

    def cleanup(self) -> None:
        """Stop the subprocess (it exits when its stdin closes)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.close()
