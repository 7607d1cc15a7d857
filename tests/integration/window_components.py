"""Components for the window runtime tests."""

from __future__ import annotations

from collections import Counter

from jstormpy import Bolt, Spout
from jstormpy.window import TumblingWindows, WindowedBolt
from jstormpy.window.reference import ReferenceWindows
from jstormpy.window.types import LateRecord

EVENTS_PER_TASK = 3000


class TimedEvents(Spout):
    """Per task: events in event-time order, then an in-band watermark after each batch.
    Task 1 runs at half the event-time speed of task 0, so the bolt's watermark (the
    minimum over its input channels) is held back by the slower channel."""

    outputs = ("key", "ts")

    def __init__(self) -> None:
        self.offset = 0

    def open(self, conf, context):
        self.speed = 10 if context.task_index == 0 else 5
        self.index = context.task_index

    def next_tuple(self):
        end = min(self.offset + 100, EVENTS_PER_TASK)
        for i in range(self.offset, end):
            self.emit((f"k{i % 3}", i * self.speed))
        if self.index == 0 and self.offset == 500:
            self.emit(("bad", "not-a-number"))  # data error → errors stream
        self.offset = end
        self.emit_watermark((end - 1) * self.speed)
        if end >= EVENTS_PER_TASK:
            self.finish()

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class _Counting(WindowedBolt):
    """Counts the records of each key and window."""

    def create(self):
        return 0

    def add(self, acc, tup):
        return acc + 1

    def merge(self, a, b):
        return a + b

    def result(self, key, window, acc):
        return acc


class CountPerWindow(_Counting):
    window = TumblingWindows(size_ms=1000)
    time = "event"
    timestamp = "ts"
    key = "key"


WORDS_PER_TASK = 4000


def word_at(task_index: int, i: int) -> tuple[str, int]:
    """The ``i``-th (word, sequence number) of spout task ``task_index``."""
    return f"w{(i * 7 + task_index * 3) % 50}", task_index * 1_000_000 + i


class Words(Spout):
    """Per task: WORDS_PER_TASK deterministic (word, n) tuples, 100 per call, replayable."""

    outputs = ("word", "n")

    def __init__(self) -> None:
        self.offset = 0

    def open(self, conf, context):
        self.index = context.task_index

    def next_tuple(self):
        end = min(self.offset + 100, WORDS_PER_TASK)
        for i in range(self.offset, end):
            self.emit(word_at(self.index, i))
        self.offset = end
        if end >= WORDS_PER_TASK:
            self.finish()

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class KeptTuplesPerWord(WindowedBolt):
    """Ingestion time, one window firing at the end of input; ``add`` keeps every Tuple
    it is given, so a Tuple the engine reused after ``add`` kept it would change."""

    window = TumblingWindows(2 ** 62)
    time = "ingestion"
    key = "word"

    def create(self):
        return []

    def add(self, acc, tup):
        acc.append(tup)
        return acc

    def merge(self, a, b):
        return a + b

    def result(self, key, window, acc):
        return [len(acc), sum(t["n"] for t in acc)]


class FinalWordCount(_Counting):
    """Each word's final count: one ingestion-time window that fires when the input ends
    (the peer word count's shape), combinable before the shuffle."""

    window = TumblingWindows(2 ** 62)
    time = "ingestion"
    key = "word"


OUT_OF_ORDER_EVENTS = 3000


def out_of_order_event(i: int) -> tuple[str, int]:
    """The ``i``-th (key, ts) of :class:`OutOfOrderEvents`: up to 22 ms out of order, and
    every 10th one 150 ms behind (past its window once the watermark moved on)."""
    ts = i * 4 - (i * 7 % 23)
    if i % 10 == 9:
        ts -= 150
    return f"k{i % 5}", ts


class OutOfOrderEvents(Spout):
    """One task: :func:`out_of_order_event` in chunks of ``chunk``, each followed by the
    watermark ``4 * end - 1``, at times the last millisecond of a 100 ms window, so a
    tumbling window ending there fires on time with records of it still to come (late
    firings, one per record, with ``allowed_lateness_ms = 0``), and older records land on
    the late stream. ``pause_s`` after each chunk makes a run last long enough to kill."""

    outputs = ("key", "ts")

    def __init__(self, total: int = OUT_OF_ORDER_EVENTS, chunk: int = 50,
                 pause_s: float = 0.0) -> None:
        self.total = total
        self.chunk = chunk
        self.pause_s = pause_s
        self.offset = 0

    def next_tuple(self):
        end = min(self.offset + self.chunk, self.total)
        for i in range(self.offset, end):
            self.emit(out_of_order_event(i))
        self.offset = end
        self.emit_watermark(4 * end - 1)
        if end >= self.total:
            self.finish()
        elif self.pause_s:
            import time

            time.sleep(self.pause_s)

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class Forward(Bolt):
    """Passes ``(key, ts)`` on (the engine forwards the watermark)."""

    outputs = ("key", "ts")

    def execute(self, tup):
        self.emit(tup.values)


class _CountAgg:
    def create(self):
        return 0

    def add(self, acc, rec):
        return acc + 1

    def merge(self, a, b):
        return a + b

    def result(self, key, window, acc):
        return acc


def out_of_order_reference(total: int = OUT_OF_ORDER_EVENTS,
                           chunk: int = 50) -> tuple[Counter, int]:
    """:class:`CountPer100`'s firings (key, start, end, result, kind) and late records
    for :class:`OutOfOrderEvents`' sequence: the window module's reference fed its
    records and watermarks in order."""
    ref = ReferenceWindows(CountPer100.window, _CountAgg())
    firings: Counter = Counter()
    late = 0
    for start in range(0, total, chunk):
        end = min(start + chunk, total)
        for i in range(start, end):
            key, ts = out_of_order_event(i)
            for res in ref.process(key, ts, (key, ts)):
                if isinstance(res, LateRecord):
                    late += 1
                else:
                    firings[tuple(res)] += 1
        firings.update(tuple(f) for f in ref.advance_watermark(4 * end - 1))
    firings.update(tuple(f) for f in ref.finish())
    return firings, late


class CountPer100(_Counting):
    """Event-time 100 ms tumbling counts per key (combinable before the shuffle)."""

    window = TumblingWindows(size_ms=100)
    time = "event"
    timestamp = "ts"
    key = "key"
