"""CPU per word of each stage of the per-tuple word count, one stage at a time.

The peer harness's per-tuple word count (``lines -> split -> count -> sink`` and the
windowed ``FinalCount``) crosses these stages for every word; this script drives the
engine's real code for each stage alone, in one process, and prints the CPU time per word:

    emit (spout)   ``Lines`` emitting one sentence per call through a one-target route
    tuple+loop     ``TaskExecutor._execute_batch`` of a bolt whose ``execute`` does nothing
    split          the user's ``Split.execute`` (``str.split``, a loop, a call per word),
                   with ``emit`` a no-op
    emit (fields)  ``emit`` -> fields route -> batch, the split's 10 emits per sentence
    encode         ``codec.encode_item`` of the fields hop's 512-word batches
    socket         those bytes through a local socket pair (no TLS, no frame header)
    decode         ``codec.decode_item``
    count          the user's ``Count.execute`` with managed state in memory
                   (``get`` + set), ``emit`` a no-op
    emit (sink)    ``emit((word, count))`` through the count -> sink one-target route
    sink encode    ``FileSink``'s jsonl batch encoder (``connectors/jsonl.py``) + ``write``
    window add     ``FinalCount`` (ingestion-time ``WindowedBolt``) on channel batches
    emit (combined)  the split's emits through a fields route that combines before the
                   shuffle towards ``FinalCount`` (``runtime/combine.py``): per word the
                   generic ``emit`` and ``FinalCount.add`` into the target's partial
    encode (comb.) ``codec.encode_item`` of the partial batches that route sent
    decode (comb.) ``codec.decode_item`` of them
    window merge   ``FinalCount.execute_partials`` on them (through the executor)

Event time (``ev ...``): the words as ``(word, ts)`` records, four per millisecond, up to
49 ms out of order and every 100th 2 s behind (late), a watermark 200 ms behind every
5,000 words, counted per word in 1 s tumbling windows by ``EventCount``:

    ev emit (fields)  ``emit((word, ts))`` through a plain fields route (and the watermarks)
    ev emit (comb.)   the same through a route that combines before the shuffle: per
                      record the emit and, on time under the sent watermark, the fold into
                      the target's (key, pane) partial
    ev encode / ev decode, ev encode (comb.) / ev decode (comb.)  the codec on what each
                      route sent
    ev window add     ``EventCount`` on the plain batches (``execute_batch``) and watermarks
    ev window merge   ``EventCount`` on the combined items (``execute_partials``) and the
                      late records

Figures are the minimum over ``--repeat`` runs of ``time.process_time`` (the machine may be
shared: the minimum is the least disturbed run). ``--stage NAME --times N`` runs one stage
only, so an instruction counter can count it, which repeats on a busy machine:
``valgrind --tool=callgrind`` of ``--times 2`` minus ``--times 1`` is one warm run of the stage
(the route's key memo filled, as in a long run); divide by the words.

    python -m bench.stage_profile [--words 200000] [--repeat 5] [--stage NAME [--times N]]
        [--corpus DIR]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.profile_datapath import Count, FinalCount, Split, _task, make_lines
from jstormpy import Bolt
from jstormpy.api.component import Tuple
from jstormpy.connectors.jsonl import encode_rows
from jstormpy.runtime.codec import decode_item, encode_item
from jstormpy.runtime.collector import apply_collector_policy
from jstormpy.runtime.routing import MessageKind, OutputCollector, Route
from jstormpy.window import TumblingWindows, WindowedBolt
from jstormpy.window.combine import sender_aggregation

BATCH = 512
EV_WATERMARK_EVERY = 5_000


class EventCount(WindowedBolt):
    """Counts per word in 1 s event-time tumbling windows (combinable before the shuffle)."""

    window = TumblingWindows(1000)
    time = "event"
    timestamp = "ts"
    key = "word"

    def create(self) -> int:
        return 0

    def add(self, acc: int, tup: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


class Nothing(Bolt):
    """A bolt whose ``execute`` does nothing: the engine's loop and ``Tuple`` alone."""

    outputs = ("word",)

    def execute(self, tup: Any) -> None:
        pass


def _null_emit(values: Any, stream: str = "default") -> None:
    pass


def _batches(rows: list[Any]) -> list[list[Any]]:
    return [rows[i:i + BATCH] for i in range(0, len(rows), BATCH)]


def corpus_lines(folder: str, words_wanted: int) -> list[str]:
    """The first lines of a peer-harness corpus (``part-*.txt``, Zipf-distributed words)
    holding about ``words_wanted`` words."""
    import glob

    lines: list[str] = []
    n = 0
    for path in sorted(glob.glob(os.path.join(folder, "part-*.txt"))):
        with open(path) as fh:
            for line in fh:
                lines.append(line.rstrip("\n"))
                n += line.count(" ") + 1
                if n >= words_wanted:
                    return lines
    return lines


def stages(words_wanted: int, corpus: str | None = None) -> dict[str, Callable[[], int]]:
    """Each stage as a callable that runs it once and returns the words it covered."""
    lines = corpus_lines(corpus, words_wanted) if corpus else make_lines(
        max(1, words_wanted // 10))
    words = [w for s in lines for w in s.split()]
    n_words = len(words)
    line_batches = _batches([(s,) for s in lines])
    word_batches = _batches([(w,) for w in words])
    counts: dict[str, int] = {}
    pairs = []
    for w in words:
        counts[w] = counts.get(w, 0) + 1
        pairs.append((w, counts[w]))
    pair_batches = _batches(pairs)
    sink_out: list[Any] = []

    def sent(dst: int, item: Any) -> None:  # the transport encodes a batch and drops it
        sink_out.append(len(item[3]))

    def task(comp: Any, route: Route | None, fields: tuple[str, ...], emit_null: bool) -> Any:
        ex = _task(3, "stage", comp, {"default": tuple(comp.outputs)}, route,
                   {(2, "default"): ("up", {f: i for i, f in enumerate(fields)})}, sent)
        if emit_null:
            comp.__dict__["emit"] = _null_emit
        return ex

    def spout_emit() -> int:
        sink_out.clear()
        r = Route("global", "default", "split", [5], 1, sent, BATCH)
        coll = OutputCollector(1, "lines", {"default": [r]}, [5], sent,
                               streams={"default": ("sentence",)})
        emit = coll.emit
        for s in lines:
            emit((s,))
        return n_words

    def tuple_loop() -> int:
        ex = task(Nothing(), None, ("word",), True)
        for b in word_batches:
            ex._execute_batch(2, "default", b)
        return n_words

    def split_user() -> int:
        ex = task(Split(), None, ("sentence",), True)
        for b in line_batches:
            ex._execute_batch(2, "default", b)
        return n_words

    # the route's key -> task memo is warm after the first run (as in a long run: the
    # corpus's 10k words are 1 % of a split task's 1M words)
    split_ex = task(Split(), Route("fields", "default", "count", [3, 4], 2, sent, BATCH,
                                   (0,)), ("sentence",), False)

    def split_emit() -> int:
        sink_out.clear()
        ex = split_ex
        for b in line_batches:
            ex._execute_batch(2, "default", b)
        ex.collector.flush()
        return n_words

    encoded = [encode_item(3, (2, MessageKind.DATA, "default", b)) for b in word_batches]

    def encode() -> int:
        for b in word_batches:
            encode_item(3, (2, MessageKind.DATA, "default", b))
        return n_words

    def through_socket() -> int:
        a, b = socket.socketpair()
        total = sum(map(len, encoded))

        def reader() -> None:
            got = 0
            while got < total:
                got += len(b.recv(1 << 20))

        t = threading.Thread(target=reader)
        t.start()
        for e in encoded:
            a.sendall(e)
        t.join()
        a.close()
        b.close()
        return n_words

    def decode() -> int:
        for e in encoded:
            decode_item(memoryview(e))
        return n_words

    def count_user() -> int:
        ex = task(Count(), None, ("word",), True)
        for b in word_batches:
            ex._execute_batch(2, "default", b)
        return n_words

    def sink_emit() -> int:
        sink_out.clear()
        r = Route("global", "default", "sink", [6], 3, sent, BATCH)
        coll = OutputCollector(3, "count", {"default": [r]}, [6], sent,
                               streams={"default": ("word", "count")})
        emit = coll.emit
        for p in pairs:
            emit(p)
        return n_words

    sink_dir = tempfile.mkdtemp(prefix="jstorm-stage-")

    def sink_encode() -> int:
        index = {"word": 0, "count": 1}
        with open(os.path.join(sink_dir, "out.jsonl"), "w") as fh:
            for b in pair_batches:
                text = encode_rows(b, index)
                assert text is not None, "rows of the plain shape"
                fh.write(text)
        return n_words

    def window_add() -> int:
        ex = task(FinalCount(), None, ("word",), True)
        for b in word_batches:
            ex._execute_batch(2, "default", b)
        return n_words

    partial_items: list[Any] = []

    def sent_partials(dst: int, item: Any) -> None:
        partial_items.append(item)

    combining = Route("fields", "default", "count", [3, 4], 2, sent_partials, BATCH, (0,),
                      combine=sender_aggregation("count", FinalCount(), "fields", ("word",),
                                                 False),
                      make_tuple=Tuple.bound({"word": 0}, "split", "default", 2))
    combine_ex = task(Split(), combining, ("sentence",), False)

    def combined_emit() -> int:
        partial_items.clear()
        for b in line_batches:
            combine_ex._execute_batch(2, "default", b)
            combine_ex.collector.flush()  # what the split's loop does when its input waits
        return n_words

    combined_emit()
    items = list(partial_items)
    encoded_partials = [encode_item(3, item) for item in items]

    def encode_combined() -> int:
        for item in items:
            encode_item(3, item)
        return n_words

    def decode_combined() -> int:
        for e in encoded_partials:
            decode_item(memoryview(e))
        return n_words

    def window_merge() -> int:
        ex = task(FinalCount(), None, ("word",), True)
        for src, _kind, stream, payload in items:
            ex._execute_batch(src, stream, payload)
        return n_words

    events = [(w, i // 4 - (i * 7 % 50) - (2000 if i % 100 == 99 else 0))
              for i, w in enumerate(words)]
    ev_fields = ("word", "ts")
    ev_plain_items: list[Any] = []
    ev_comb_items: list[Any] = []

    def ev_emit(items: list[Any], combine: bool) -> int:
        items.clear()

        def keep(dst: int, item: Any) -> None:
            items.append(item)

        r = Route("fields", "default", "count", [3, 4], 2, keep, BATCH, (0,),
                  combine=sender_aggregation("count", EventCount(), "fields", ("word",),
                                             False) if combine else None,
                  make_tuple=Tuple.bound({"word": 0, "ts": 1}, "src", "default", 2),
                  ts_index=1 if combine else None)
        coll = OutputCollector(2, "src", {"default": [r]}, [3, 4], keep,
                               streams={"default": ev_fields})
        emit = coll.emit
        for i, ev in enumerate(events):
            emit(ev)
            if i % EV_WATERMARK_EVERY == EV_WATERMARK_EVERY - 1:
                coll.emit_watermark(i // 4 - 200)
        coll.flush()
        return n_words

    ev_emit(ev_plain_items, False)
    ev_emit(ev_comb_items, True)
    ev_encoded = {name: [encode_item(3, it) for it in items if it[1] == MessageKind.DATA]
                  for name, items in (("plain", ev_plain_items), ("comb", ev_comb_items))}

    def ev_encode(name: str) -> Callable[[], int]:
        items = [it for it in (ev_plain_items if name == "plain" else ev_comb_items)
                 if it[1] == MessageKind.DATA]

        def run() -> int:
            for item in items:
                encode_item(3, item)
            return n_words
        return run

    def ev_decode(name: str) -> Callable[[], int]:
        def run() -> int:
            for e in ev_encoded[name]:
                decode_item(memoryview(e))
            return n_words
        return run

    def ev_window(items: list[Any]) -> Callable[[], int]:
        def run() -> int:
            ex = task(EventCount(), None, ev_fields, True)
            comp = ex.component
            for src, kind, stream, payload in items:
                if kind == MessageKind.DATA:
                    ex._execute_batch(src, stream, payload)
                else:
                    comp.on_watermark(payload)
            comp.on_inputs_finished()
            return n_words
        return run

    return {
        "none": lambda: n_words,
        "emit (spout)": spout_emit,
        "tuple+loop": tuple_loop,
        "split": split_user,
        "emit (fields)": split_emit,
        "encode": encode,
        "socket": through_socket,
        "decode": decode,
        "count": count_user,
        "emit (sink)": sink_emit,
        "sink encode": sink_encode,
        "window add": window_add,
        "emit (combined)": combined_emit,
        "encode (comb.)": encode_combined,
        "decode (comb.)": decode_combined,
        "window merge": window_merge,
        "ev emit (fields)": lambda: ev_emit(ev_plain_items, False),
        "ev emit (comb.)": lambda: ev_emit(ev_comb_items, True),
        "ev encode": ev_encode("plain"),
        "ev encode (comb.)": ev_encode("comb"),
        "ev decode": ev_decode("plain"),
        "ev decode (comb.)": ev_decode("comb"),
        "ev window add": ev_window(ev_plain_items),
        "ev window merge": ev_window(ev_comb_items),
    }


def measure(fn: Callable[[], int], repeat: int) -> float:
    """Minimum CPU nanoseconds per word over ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time_ns()
        n = fn()
        best = min(best, (time.process_time_ns() - t0) / n)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--words", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--stage", default=None, help="run this stage --times times (for an "
                   "instruction counter); 'none' runs only the set-up")
    p.add_argument("--times", type=int, default=1)
    p.add_argument("--corpus", default=None, help="read the words from a peer-harness "
                   "corpus directory (Zipf keys: what combining sees) instead of the "
                   "uniform synthetic sentences")
    args = p.parse_args()
    table = stages(args.words, args.corpus)
    apply_collector_policy("tuned")  # a worker's collector (Config.worker_gc default)
    if args.stage is not None:
        n = sum(table[args.stage]() for _ in range(args.times))
        print(f"stage={args.stage!r} words={n}")
        return
    raw = {name: measure(fn, args.repeat) for name, fn in table.items() if name != "none"}
    derived = dict(raw)
    # a stage timed through the engine's loop carries the loop: report it without
    for name in ("split", "count", "window add"):  # window merge: no loop per word
        derived[name] = raw[name] - raw["tuple+loop"] * (0.1 if name == "split" else 1.0)
    derived["emit (fields)"] = raw["emit (fields)"] - raw["split"]
    derived["emit (combined)"] = raw["emit (combined)"] - raw["split"]
    print(f"{'stage':<16}{'ns/word':>10}")
    for name, ns in derived.items():
        print(f"{name:<16}{ns:>10.0f}")
    reduce_path = sum(derived[k] for k in ("emit (spout)", "split",
                                           "emit (fields)", "encode", "socket", "decode",
                                           "count", "emit (sink)", "sink encode"))
    reduce_path += raw["tuple+loop"] * 1.1  # the split's loop (per line) and the sink's
    window_path = sum(derived[k] for k in ("emit (spout)", "split", "emit (fields)",
                                           "encode", "socket", "decode", "window add"))
    window_path += raw["tuple+loop"] * 0.1
    combined_path = sum(derived[k] for k in ("emit (spout)", "split", "emit (combined)",
                                             "encode (comb.)", "socket", "decode (comb.)",
                                             "window merge"))
    combined_path += raw["tuple+loop"] * 0.1
    print(f"{'reduce path':<16}{reduce_path:>10.0f}")
    print(f"{'window path':<16}{window_path:>10.0f}")
    print(f"{'window combined':<16}{combined_path:>10.0f}")
    for name, keys in (("event path", ("ev emit (fields)", "ev encode", "ev decode",
                                       "ev window add")),
                       ("event combined", ("ev emit (comb.)", "ev encode (comb.)",
                                           "ev decode (comb.)", "ev window merge"))):
        print(f"{name:<16}{sum(derived[k] for k in keys):>10.0f}")


if __name__ == "__main__":
    main()
