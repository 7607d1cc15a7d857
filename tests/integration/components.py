"""Components of the integration-test topologies.

They live in an importable module (``tests.integration.components``) so that worker
processes import them by reference, like a user's package would be.
"""

from __future__ import annotations

import os
from typing import Any

from jstormpy import Bolt, CustomStreamGrouping, Spout


class NumberSpout(Spout):
    """Emits ``(seq, key, src_task, src_worker)`` for its share of ``range(n)``.

    Task ``i`` of ``p`` emits ``seq = i, i+p, ...``; ``key = f"k{seq % keys}"``. The read
    position is the replayable offset; ``finish()`` once everything is emitted. With
    ``direct_to=COMPONENT`` every tuple goes by ``emit_direct`` to
    ``tasks(COMPONENT)[seq % parallelism]``. ``pause_s`` slows it down (per call).
    """

    outputs = ("seq", "key", "src_task", "src_worker")

    def __init__(self, n: int = 60, keys: int = 7, per_call: int = 5, *,
                 direct_to: str | None = None, pause_s: float = 0.0) -> None:
        self.n = n
        self.keys = keys
        self.per_call = per_call
        self.direct_to = direct_to
        self.pause_s = pause_s
        self.offset = 0

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.mine = list(range(context.task_index, self.n, context.parallelism))
        self.task = context.task_id
        self.worker = context.worker_id
        self.targets = list(context.component_tasks[self.direct_to]) if self.direct_to else []

    def next_tuple(self) -> None:
        if self.pause_s:
            import time

            time.sleep(self.pause_s)  # pacing of the source, not a wait for a condition
        if self.offset >= len(self.mine) or self.emit_next_call():
            self.finish()

    def emit_next_call(self) -> bool:
        """Emit the next ``per_call`` numbers (those left); whether all are emitted now."""
        end = min(self.offset + self.per_call, len(self.mine))
        for seq in self.mine[self.offset:end]:
            values = (seq, f"k{seq % self.keys}", self.task, self.worker)
            if self.direct_to:
                self.emit_direct(self.targets[seq % len(self.targets)], values)
            else:
                self.emit(values)
        self.offset = end
        return self.offset >= len(self.mine)

    def snapshot(self) -> int:
        return self.offset

    def restore(self, snap: int) -> None:
        self.offset = snap


class Recorder(Bolt):
    """Records who received what: ``(task, worker, source, stream, fields, values)``."""

    outputs = ("task", "worker", "source", "stream", "fields", "values")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.task = context.task_id
        self.worker = context.worker_id

    def execute(self, tup: Any) -> None:
        self.emit((self.task, self.worker, tup.source, tup.stream, list(tup.fields),
                   list(tup.values)))


class EvenOddGrouping(CustomStreamGrouping):
    """Even ``seq`` → the two lowest tasks (both), odd ``seq`` → the highest task."""

    def prepare(self, source: str, stream: str, target_tasks: list[int]) -> None:
        self.targets = sorted(target_tasks)

    def choose_tasks(self, task_id: int, values: tuple[Any, ...]) -> list[int]:
        if values[0] % 2 == 0:
            return self.targets[:2]
        return [self.targets[-1]]


class StreamSplitter(Bolt):
    """Even seq on ``default`` as (seq, key); odd seq on ``odd`` as (seq, half, tag)."""

    outputs = {"default": ("seq", "key"), "odd": ("seq", "half", "tag")}

    def execute(self, tup: Any) -> None:
        seq = tup["seq"]
        if seq % 2 == 0:
            self.emit((seq, tup["key"]))
        else:
            self.emit((seq, seq // 2, "odd"), stream="odd")


class Split(Bolt):
    """Sentence → words."""

    outputs = ("word",)

    def execute(self, tup: Any) -> None:
        for word in tup["sentence"].split():
            self.emit((word,))


class PassThrough(Bolt):
    """Emits ``(seq, key)`` of every input."""

    outputs = ("seq", "key")

    def execute(self, tup: Any) -> None:
        self.emit((tup["seq"], tup["key"]))


class FailOn(Bolt):
    """Passes ``(seq, key)`` through but raises on ``seq == bad``.

    With ``marker`` (a file path) it raises only the first time: the marker file records
    that it already did, which survives the rollback (and any restart) that follows.
    """

    outputs = ("seq", "key")

    def __init__(self, bad: int, marker: str | None = None) -> None:
        self.bad = bad
        self.marker = marker

    def execute(self, tup: Any) -> None:
        seq = tup["seq"]
        if seq == self.bad:
            if self.marker is None:
                raise ValueError(f"poisoned tuple seq={seq}")
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass  # already failed once: process it normally now
            else:
                os.close(fd)
                raise ValueError(f"poisoned tuple seq={seq} (first time)")
        self.emit((seq, tup["key"]))


class NonReplayableSpout(Spout):
    """No snapshot()/restore(): it cannot rewind, so exactly-once must refuse it."""

    outputs = ("n",)

    def next_tuple(self) -> None:
        self.emit((1,))


class StallOnce(Bolt):
    """Passes ``(seq, key)`` through, but the first time it sees ``seq == at`` it hangs
    (polling, up to ``max_s``) until the file ``release`` exists: a stalled channel.

    ``marker`` (a file) records that it already stalled, across rollbacks and restarts.
    """

    outputs = ("seq", "key")

    def __init__(self, at: int, marker: str, release: str, max_s: float = 60.0) -> None:
        self.at = at
        self.marker = marker
        self.release = release
        self.max_s = max_s

    def execute(self, tup: Any) -> None:
        import time

        seq = tup["seq"]
        if seq == self.at:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                deadline = time.monotonic() + self.max_s
                while not os.path.exists(self.release) and time.monotonic() < deadline:
                    time.sleep(0.05)  # polls the release file (the condition), bounded
        self.emit((seq, tup["key"]))


class ShortSquare(Bolt):
    """A user mistake (issue 28): declares two fields and emits one value."""

    outputs = ("n", "sq")

    def execute(self, tup: Any) -> None:
        self.emit((tup["seq"],))


class LockedCount(Bolt):
    """A user mistake (issue 28): a lock created in ``__init__`` (it cannot travel)."""

    outputs = ("seq", "key")

    def __init__(self) -> None:
        import threading

        self.guard = threading.Lock()

    def execute(self, tup: Any) -> None:
        self.emit((tup["seq"], tup["key"]))


class LockInState(Bolt):
    """A user mistake (issue 28): a lock stored in managed state (cannot be checkpointed)."""

    outputs = ("seq", "key")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.seen = self.state("seen")

    def execute(self, tup: Any) -> None:
        import threading

        self.seen[tup["key"]] = {"count": 1, "lock": threading.Lock()}
        self.emit((tup["seq"], tup["key"]))


class HeldSnapshots(Bolt):
    """Passes ``(key, seq, value)`` on; its ``snapshot()`` does not return while the file
    ``hold`` exists (polling, up to ``max_s``): checkpoints that cannot complete."""

    outputs = ("key", "seq", "value")

    def __init__(self, hold: str, max_s: float = 60.0) -> None:
        self.hold = hold
        self.max_s = max_s

    def execute(self, tup: Any) -> None:
        self.emit((tup["key"], tup["seq"], tup["value"]))

    def snapshot(self) -> int:
        import time

        deadline = time.monotonic() + self.max_s
        while os.path.exists(self.hold) and time.monotonic() < deadline:
            time.sleep(0.02)  # polls the hold file (the condition), bounded
        return 0

    def restore(self, snap: int) -> None:
        pass


class FinishAfterCheckpoint(NumberSpout):
    """A :class:`NumberSpout` that finishes only after its first ``snapshot()`` of this
    process: a checkpoint is in flight at its end of input, its barrier before the end
    (the ack of it says "not finished")."""

    def next_tuple(self) -> None:
        if self.offset < len(self.mine):
            self.emit_next_call()
        elif getattr(self, "snapshotted", False):
            self.finish()  # everything emitted and a checkpoint's barrier behind it

    def snapshot(self) -> int:
        self.snapshotted = True
        return self.offset


class HeldPassThrough(PassThrough):
    """:class:`PassThrough` whose ``snapshot()`` waits while the file ``hold`` exists (as
    :class:`HeldSnapshots`): a checkpoint that stays in flight until the test removes it."""

    def __init__(self, hold: str, max_s: float = 60.0) -> None:
        self.hold = hold
        self.max_s = max_s

    def snapshot(self) -> int:
        return HeldSnapshots.snapshot(self)  # type: ignore[arg-type]

    def restore(self, snap: int) -> None:
        pass
