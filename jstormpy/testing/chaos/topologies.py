"""The topologies the chaos soak runs, each with its exactly-once check.

Three small jobs, each lasting a few seconds, each checked from its committed output only:

* ``stateful`` — keyed events (:class:`~jstormpy.SequenceSpout`) through a bolt keeping a
  running sum per key in managed state, into a transactional :class:`~jstormpy.FileSink`;
* ``wordcount`` — lines from files, split, counted (managed state), emitting the new count
  at every occurrence;
* ``windowed`` — per-sensor event-time tumbling windows with early firings;
* ``shuffled`` — keyed events fed by shuffle into a bolt counting per key in managed state:
  every task keeps a partial count of every key (state not partitioned by the routing
  key; used by the ``rescale_unkeyed_state`` fault class only).

:func:`build_topology` makes one; :func:`check_output` returns a :class:`Verdict`: events
lost, duplicated and reordered per key (Flink's SemanticsCheck idea, via
:func:`jstormpy.testing.semantics.check_sequences`) and where the final state differs from a
batch recomputation.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jstormpy import Bolt, FileSink, FileSpout, SequenceSpout, Spout, TopologyBuilder
from jstormpy.api.topology import Topology
from jstormpy.connectors.sinks import read_committed
from jstormpy.testing.semantics import SemanticsReport, check_sequences
from jstormpy.window import BoundedOutOfOrderness, TumblingWindows, WindowedBolt

if TYPE_CHECKING:
    from jstormpy.testing.chaos.brokers import BrokerOutputs

TOPOLOGIES = ("stateful", "wordcount", "windowed")
"""The topologies a scenario's seed draws from."""
SHUFFLED = "shuffled"
"""The topology of the ``rescale_unkeyed_state`` fault class only (not drawn by seeds)."""
ALL_TOPOLOGIES = (*TOPOLOGIES, SHUFFLED)
"""Names accepted by :func:`build_topology`."""

KEYS, PER_KEY, RATE = 16, 1200, 3000.0          # stateful: ~3 s of input at 2 spout tasks
CORPUS_FILES, CORPUS_LINES = 3, 700             # wordcount
SENSORS, READINGS = 8, 700                      # windowed: 70 s of event time per sensor
WINDOW_MS, STEP_MS = 2_000, 100


class SlowCommitFileSink(FileSink):
    """A :class:`~jstormpy.FileSink` whose pre-commit takes ``pause_s`` longer, as one
    over a slow store does. ``kill_during_drain`` runs with it: the final checkpoint of a
    one-spout job otherwise completed 20 ms after the TM showed the spout finished, and a
    loaded machine's injector saw the job drained before its kill (seed 129)."""

    def __init__(self, directory: str | Path, pause_s: float) -> None:
        super().__init__(str(directory))
        self.pause_s = pause_s

    def pre_commit(self, checkpoint_id: int) -> None:
        time.sleep(self.pause_s)  # the slow store's latency, not a wait for a condition
        super().pre_commit(checkpoint_id)


def _sink(out: Path, commit_pause_s: float) -> FileSink:
    return SlowCommitFileSink(out, commit_pause_s) if commit_pause_s > 0 else FileSink(str(out))


@dataclass(frozen=True)
class Verdict:
    """What a run's committed output shows.

    Attributes:
        lost: Events (or windows) expected but never committed.
        duplicated: Events committed more than once.
        reordered: Events committed after a later event of the same key.
        state_problems: Where the final state differs from a batch recomputation.
        detail: Which keys and sequence numbers were lost, duplicated or reordered.
    """

    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    state_problems: tuple[str, ...] = field(default_factory=tuple)
    detail: str = ""

    @property
    def ok(self) -> bool:
        """No loss, duplicate, reordering or wrong state."""
        return not (self.lost or self.duplicated or self.reordered or self.state_problems)


def _verdict(report: SemanticsReport, problems: list[str]) -> Verdict:
    return Verdict(lost=sum(len(v) for v in report.lost.values()),
                   duplicated=sum(len(v) for v in report.duplicated.values())
                   + sum(len(v) for v in report.unexpected.values()),
                   reordered=sum(len(v) for v in report.reordered.values()),
                   state_problems=tuple(problems[:10]),
                   detail="" if report.ok else report.summary())


# -- stateful -------------------------------------------------------------------------------
class RunningSum(Bolt):
    """Per key: running sum and count in managed state; one output per input."""

    outputs = ("key", "seq", "value", "sum", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.sums = self.state("sums")

    def execute(self, tup: Any) -> None:
        key, value = tup["key"], tup["value"]
        total, count = self.sums.get(key, (0, 0))
        self.sums[key] = (total + value, count + 1)
        self.emit((key, tup["seq"], value, total + value, count + 1))


PG_TABLE = "chaos_out"
"""``stateful`` with a PostgreSQL DSN: the table its second sink writes (create it with
:func:`create_postgres_table`)."""
STATEFUL_FIELDS = ("key", "seq", "value", "sum", "count")
"""The fields of the ``stateful`` job's output (its PostgreSQL columns, its Redis entries'
fields, its Kafka records' JSON keys)."""


def _stateful(out: Path, slow: float = 1.0, pg_dsn: str | None = None,
              brokers: BrokerOutputs | None = None, commit_pause_s: float = 0.0) -> Topology:
    b = TopologyBuilder("chaos-stateful")
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, rate_per_s=RATE / slow),
                parallelism=2)
    b.set_bolt("sum", RunningSum, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", _sink(out, commit_pause_s), parallelism=2).fields_grouping("sum", ["key"])
    if pg_dsn is not None:
        from jstormpy.connectors import PostgresSink

        b.set_bolt("pg", PostgresSink(pg_dsn, PG_TABLE, list(STATEFUL_FIELDS)),
                   parallelism=2).fields_grouping("sum", ["key"])
    if brokers is not None:
        brokers.add_sinks(b, "sum", "key", parallelism=2)
    return b.build()


def create_postgres_table(dsn: str) -> None:
    """Create :data:`PG_TABLE` (rows numbered in insert order) in the database ``dsn``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {PG_TABLE} (id bigserial PRIMARY KEY, key text, seq int, "
                     "value int, sum bigint, count int)")


def postgres_last_row(dsn: str) -> int:
    """The id of the last row in :data:`PG_TABLE` (0 if empty): where a later run's rows
    begin."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {PG_TABLE}").fetchone()
    return int(row[0]) if row else 0


def check_postgres(dsn: str, after: int = 0, upto: int | None = None) -> Verdict:
    """The ``stateful`` job's PostgreSQL output (committed rows in insert order, read with a
    fresh connection; only ids in ``(after, upto]``: one run's rows) checked like its
    files; a prepared transaction left behind is a state problem."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT {', '.join(STATEFUL_FIELDS)} FROM {PG_TABLE} WHERE id > %s "
                            "AND id <= %s ORDER BY id",
                            (after, 2**62 if upto is None else upto)).fetchall()
        prepared = [g for (g,) in conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")]
    verdict = stateful_verdict([dict(zip(STATEFUL_FIELDS, r, strict=True)) for r in rows])
    if not prepared:
        return verdict
    return Verdict(lost=verdict.lost, duplicated=verdict.duplicated,
                   reordered=verdict.reordered, detail=verdict.detail,
                   state_problems=(*verdict.state_problems,
                                   f"prepared transactions left behind: {prepared}"))


def _check_stateful(out: Path) -> Verdict:
    return stateful_verdict(read_committed(out))


def stateful_verdict(records: list[dict[str, Any]]) -> Verdict:
    """The ``stateful`` job's output records (dicts of :data:`STATEFUL_FIELDS`, in commit
    order) checked: every event of every key once, in order, running sums and counts
    equal to a recomputation."""
    report = check_sequences(records, "key", "seq", {f"k{i}": PER_KEY for i in range(KEYS)})
    problems: list[str] = []
    sums: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        sums[r["key"]] += r["value"]
        counts[r["key"]] += 1
        if (r["sum"], r["count"]) != (sums[r["key"]], counts[r["key"]]) and not problems:
            problems.append(f"key {r['key']}: state (sum {r['sum']}, count {r['count']}) != "
                            f"recomputed ({sums[r['key']]}, {counts[r['key']]})")
    want = sum(SequenceSpout.value_of(s) for s in range(PER_KEY))
    problems += [f"key k{i}: final sum {sums[f'k{i}']} != batch recomputation {want}"
                 for i in range(KEYS) if sums[f"k{i}"] != want]
    return _verdict(report, problems)


# -- shuffled -------------------------------------------------------------------------------
SHUFFLED_KEYS, SHUFFLED_RATE = 8, 2000.0          # one spout task: ~4.8 s of input


class PartialCount(Bolt):
    """Fed by shuffle: per key, the number of its events that reached this task (managed
    state every task holds for every key); emits that partial count with each event."""

    outputs = ("key", "seq", "task", "partial")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts = self.state("counts")
        self.task = context.task_index

    def execute(self, tup: Any) -> None:
        key = tup["key"]
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        self.emit((key, tup["seq"], self.task, n))


def _shuffled(out: Path, slow: float = 1.0, commit_pause_s: float = 0.0) -> Topology:
    b = TopologyBuilder("chaos-shuffled")
    b.set_spout("events", SequenceSpout(keys=SHUFFLED_KEYS, per_key=PER_KEY,
                                        rate_per_s=SHUFFLED_RATE / slow), parallelism=1)
    b.set_bolt("partial", PartialCount, parallelism=2).shuffle_grouping("events")
    b.set_bolt("out", _sink(out, commit_pause_s), parallelism=2).fields_grouping("partial",
                                                                                ["key"])
    return b.build()


def _check_shuffled(out: Path) -> Verdict:
    """Every event once (per key), in order per (key, task) (the order across the two
    shuffle targets is not defined); each task's partial counts go 1, 2, 3, ... and add up
    to every event of the key."""
    records = read_committed(out)
    report = check_sequences(records, "key", "seq",
                             {f"k{i}": PER_KEY for i in range(SHUFFLED_KEYS)})
    last_seq: dict[tuple[str, int], int] = {}
    partial: dict[tuple[str, int], int] = {}
    reordered = 0
    problems: list[str] = []
    for r in records:
        kt = (r["key"], r["task"])
        if r["seq"] < last_seq.get(kt, -1):
            reordered += 1
        last_seq[kt] = max(last_seq.get(kt, -1), r["seq"])
        if r["partial"] != partial.get(kt, 0) + 1 and len(problems) < 3:
            problems.append(f"key {kt[0]} task {kt[1]}: partial count {r['partial']} after "
                            f"{partial.get(kt, 0)} (recomputed {partial.get(kt, 0) + 1})")
        partial[kt] = r["partial"]
    for i in range(SHUFFLED_KEYS):
        total = sum(n for (k, _t), n in partial.items() if k == f"k{i}")
        if total != PER_KEY:
            problems.append(f"key k{i}: partial counts add up to {total} != batch "
                            f"recomputation {PER_KEY}")
    verdict = _verdict(report, problems)
    return Verdict(lost=verdict.lost, duplicated=verdict.duplicated, reordered=reordered,
                   state_problems=verdict.state_problems,
                   detail="" if not (verdict.lost or verdict.duplicated) else verdict.detail)


# -- wordcount ------------------------------------------------------------------------------
class SplitWords(Bolt):
    """Line -> words."""

    outputs = ("word",)

    def execute(self, tup: Any) -> None:
        for word in tup["line"].split():
            self.emit((word,))


class CountWords(Bolt):
    """Word count in managed state, emitting the new count at every occurrence."""

    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts = self.state("counts")

    def execute(self, tup: Any) -> None:
        word = tup["word"]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n
        self.emit((word, n))


class PacedFileSpout(FileSpout):
    """A :class:`~jstormpy.FileSpout` reading a few lines per call with a short pause, so
    the run lasts long enough for faults to land in its middle."""

    def __init__(self, paths: Any, per_call: int = 2, pause_s: float = 0.004) -> None:
        super().__init__(paths, batch=per_call)
        self.pause_s = pause_s

    def next_tuple(self) -> None:
        super().next_tuple()
        time.sleep(self.pause_s)


def _corpus_lines(f: int) -> list[str]:
    vocab = [f"w{i}" for i in range(40)]
    return [" ".join(vocab[(f * 31 + i * 7 + j * 13) % len(vocab)] for j in range(8))
            for i in range(CORPUS_LINES)]


def _wordcount(out: Path, corpus: Path, slow: float = 1.0,
               commit_pause_s: float = 0.0) -> Topology:
    corpus.mkdir(parents=True, exist_ok=True)
    for f in range(CORPUS_FILES):
        path = corpus / f"part-{f}.txt"
        if not path.exists():
            path.write_text("\n".join(_corpus_lines(f)) + "\n")
    b = TopologyBuilder("chaos-wordcount")
    b.set_spout("lines", PacedFileSpout(str(corpus / "*.txt"), pause_s=0.004 * slow),
                parallelism=2)
    b.set_bolt("split", SplitWords, parallelism=2).shuffle_grouping("lines")
    b.set_bolt("count", CountWords, parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("out", _sink(out, commit_pause_s), parallelism=2).fields_grouping("count",
                                                                                ["word"])
    return b.build()


def _check_wordcount(out: Path) -> Verdict:
    expected: Counter[str] = Counter()
    for f in range(CORPUS_FILES):
        for line in _corpus_lines(f):
            expected.update(line.split())
    records = read_committed(out)
    report = check_sequences([{"word": r["word"], "seq": r["count"] - 1} for r in records],
                             "word", "seq", dict(expected))
    final: dict[str, int] = {}
    for r in records:
        final[r["word"]] = max(final.get(r["word"], 0), r["count"])
    problems = [f"word {w}: final count {final.get(w, 0)} != batch recomputation {n}"
                for w, n in sorted(expected.items()) if final.get(w, 0) != n]
    return _verdict(report, problems)


# -- windowed -------------------------------------------------------------------------------
def reading(i: int) -> tuple[str, int, int]:
    """The i-th reading: sensor, event time (ms; some up to 300 ms out of order), value."""
    sensor, step = i % SENSORS, i // SENSORS
    ts = step * STEP_MS - (300 if i % 37 == 0 and step > 3 else 0)
    return f"s{sensor}", ts, (sensor * 7 + step * 13) % 100


class Readings(Spout):
    """Replayable readings; its offset is its whole state."""

    outputs = ("sensor", "ts", "value")

    def __init__(self, per_call: int = 10, pause_s: float = 0.004) -> None:
        self.offset = 0
        self.per_call = per_call
        self.pause_s = pause_s

    def next_tuple(self) -> None:
        end = min(self.offset + self.per_call, SENSORS * READINGS)
        for i in range(self.offset, end):
            self.emit(reading(i))
        self.offset = end
        if end >= SENSORS * READINGS:
            self.finish()
        time.sleep(self.pause_s)

    def snapshot(self) -> int:
        return self.offset

    def restore(self, snap: int) -> None:
        self.offset = snap


class WindowSum(WindowedBolt):
    """Per sensor, tumbling event-time windows: sum and count, early results every 300 ms."""

    window = TumblingWindows(size_ms=WINDOW_MS)
    time = "event"
    timestamp = "ts"
    key = "sensor"
    watermark = BoundedOutOfOrderness(max_lag_ms=1_000)
    early_fire_every_ms = 300

    def create(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, acc: tuple[int, int], tup: Any) -> tuple[int, int]:
        return (acc[0] + tup["value"], acc[1] + 1)

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, key: Any, window: Any, acc: tuple[int, int]) -> dict[str, int]:
        return {"sum": acc[0], "n": acc[1]}


def _windowed(out: Path, slow: float = 1.0, commit_pause_s: float = 0.0) -> Topology:
    b = TopologyBuilder("chaos-windowed")
    b.set_spout("readings", Readings(pause_s=0.004 * slow), parallelism=1)
    b.set_bolt("sum", WindowSum, parallelism=2).fields_grouping("readings", ["sensor"])
    b.set_bolt("out", _sink(out, commit_pause_s), parallelism=1).global_grouping("sum")
    return b.build()


def _check_windowed(out: Path) -> Verdict:
    expected: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i in range(SENSORS * READINGS):
        sensor, ts, value = reading(i)
        expected[(sensor, ts // WINDOW_MS * WINDOW_MS)].append(value)
    starts: dict[str, list[int]] = defaultdict(list)
    for sensor, start in expected:
        starts[sensor].append(start)
    index = {s: {start: n for n, start in enumerate(sorted(v))} for s, v in starts.items()}
    on_time = [r for r in read_committed(out) if r["kind"] == "on_time"]
    report = check_sequences(
        [{"key": r["key"], "seq": index.get(r["key"], {}).get(r["window_start"], -1)}
         for r in on_time], "key", "seq", {s: len(v) for s, v in starts.items()})
    problems = []
    for r in on_time:
        values = expected.get((r["key"], r["window_start"]), [])
        if r["result"] != {"sum": sum(values), "n": len(values)}:
            problems.append(f"window {r['key']}@{r['window_start']}: {r['result']} != "
                            f"recomputed sum {sum(values)} n {len(values)}")
    return _verdict(report, problems)


def build_topology(name: str, workdir: Path, slow: float = 1.0,
                   out: Path | None = None, pg_dsn: str | None = None,
                   brokers: BrokerOutputs | None = None,
                   commit_pause_s: float = 0.0) -> Topology:
    """The topology ``name`` (one of :data:`TOPOLOGIES`), writing to ``workdir/out`` (or
    ``out``; the input, such as the word count's corpus, stays under ``workdir``).
    ``pg_dsn`` (``stateful`` only): the same output also goes to :data:`PG_TABLE` there
    through a two-phase-commit :class:`~jstormpy.connectors.PostgresSink`; ``brokers``
    (``stateful`` only): also to a Redis stream and a Kafka topic
    (:mod:`jstormpy.testing.chaos.brokers`).

    ``slow`` stretches the input over ``slow`` times as long (same events, same output):
    a fault that needs time to set up, such as a gray release, then lands mid-run.
    ``commit_pause_s`` > 0: the FileSink's pre-commit takes that much longer
    (:class:`SlowCommitFileSink`), so every checkpoint, the drain's last one too, lasts at
    least that long.
    """
    workdir = Path(workdir)
    out = workdir / "out" if out is None else Path(out)
    if (pg_dsn is not None or brokers is not None) and name != "stateful":
        raise ValueError(f"only the stateful chaos topology writes to PostgreSQL, Redis or "
                         f"Kafka, not {name!r}")
    if name == "stateful":
        return _stateful(out, slow, pg_dsn, brokers, commit_pause_s)
    if name == "wordcount":
        return _wordcount(out, workdir / "corpus", slow, commit_pause_s)
    if name == "windowed":
        return _windowed(out, slow, commit_pause_s)
    if name == SHUFFLED:
        return _shuffled(out, slow, commit_pause_s)
    raise ValueError(f"unknown chaos topology {name!r}; choose one of "
                     f"{', '.join(ALL_TOPOLOGIES)}")


def check_output(name: str, workdir: Path) -> Verdict:
    """Check the committed output of :func:`build_topology` ``(name, workdir)``."""
    checks = {"stateful": _check_stateful, "wordcount": _check_wordcount,
              "windowed": _check_windowed, SHUFFLED: _check_shuffled}
    return checks[name](Path(workdir) / "out")
