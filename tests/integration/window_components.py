"""Components for the window runtime tests."""

from __future__ import annotations

from jstormpy import Spout
from jstormpy.window import TumblingWindows, WindowedBolt

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
