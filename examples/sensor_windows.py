"""The main job: per-sensor average temperature over sliding event-time windows,
exactly-once, with a worker SIGKILLed in the middle and the result verified.

    jstorm run examples/sensor_windows.py --chaos 7     # kill a worker mid-run, then verify
    python examples/sensor_windows.py                   # same, with a kill, from Python

Pipeline: readings spout (replayable; some readings out of order, a few very late)
→ windowed bolt (sliding 10 s windows every 5 s by event time, 2 s of disorder tolerated,
early results every 200 ms, late updates for 3 s more, later records to a ``late``
stream) → two transactional file sinks (window results, late records).

``verify`` checks, from the committed files only:
* every (sensor, window) has exactly one ``on_time`` result (no loss, no duplicate);
* the last result of each window (on_time or late update) equals a batch recomputation
  over every reading in the window that did not go to the late stream;
* every reading is accounted for exactly once: in its windows or in the late stream.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from jstormpy import Config, FileSink, Spout, TopologyBuilder, read_committed
from jstormpy.window import BoundedOutOfOrderness, SlidingWindows, WindowedBolt

SENSORS = 16
READINGS_PER_SENSOR = 1500          # one every 100 ms of event time: 150 s per sensor
SIZE_MS, SLIDE_MS = 10_000, 5_000


def reading(i: int) -> tuple[str, int, float]:
    """The i-th reading (deterministic): sensor, event time (ms), temperature."""
    sensor = i % SENSORS
    step = i // SENSORS
    ts = step * 100
    if i % 97 == 0:
        ts -= 1_500            # out of order, within the 2 s bound: on time
    if i % 1_009 == 0 and step > 300:
        ts -= 20_000           # very late: every window it belongs to has expired
    temp = round(15 + (sensor * 7 + step * 13) % 100 / 10, 1)
    if i % 1_009 == 0 and step > 300:
        temp = -temp           # marks the very late readings (distinct values)
    return f"s{sensor:02d}", ts, temp


TOTAL = SENSORS * READINGS_PER_SENSOR


class Readings(Spout):
    """Replayable source: its offset is the whole state."""

    outputs = ("sensor", "ts", "temp")

    def __init__(self, rate_per_call: int = 40) -> None:
        self.offset = 0
        self.rate_per_call = rate_per_call

    def next_tuple(self):
        import time

        end = min(self.offset + self.rate_per_call, TOTAL)
        for i in range(self.offset, end):
            self.emit(reading(i))
        self.offset = end
        if self.offset >= TOTAL:
            self.finish()
        time.sleep(0.01)  # a steady stream: the run lasts about 6 s, so a kill lands mid-run

    def snapshot(self):
        return self.offset

    def restore(self, snap):
        self.offset = snap


class AvgTemp(WindowedBolt):
    window = SlidingWindows(size_ms=SIZE_MS, slide_ms=SLIDE_MS)
    time = "event"
    timestamp = "ts"
    key = "sensor"
    watermark = BoundedOutOfOrderness(max_lag_ms=2_000)
    allowed_lateness_ms = 3_000
    early_fire_every_ms = 200
    late_stream = "late"

    def create(self):
        return (0.0, 0)

    def add(self, acc, tup):
        return (acc[0] + tup["temp"], acc[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def result(self, key, window, acc):
        return {"avg": round(acc[0] / acc[1], 6), "n": acc[1]}


def build(out: Path):
    b = TopologyBuilder("sensor-windows")
    b.set_spout("readings", Readings(), parallelism=1)
    b.set_bolt("avg", AvgTemp, parallelism=2).fields_grouping("readings", ["sensor"])
    b.set_bolt("windows", FileSink(str(out / "windows")), parallelism=1).global_grouping("avg")
    b.set_bolt("late", FileSink(str(out / "late")), parallelism=1).global_grouping(
        "avg", stream="late")
    return b.build()


# a new directory name, made by the sink when it first writes: each worker imports this
# module too (for the classes above), and a directory made here would be made there, empty
OUT = Path(tempfile.gettempdir()) / f"sensor-windows-{secrets.token_hex(4)}"
topology = build(OUT)
config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=300)


def verify(handle=None, out: Path = OUT) -> bool:
    """Check the committed output against a batch recomputation (see module doc)."""
    results = read_committed(out / "windows")
    late = read_committed(out / "late")
    problems: list[str] = []
    late_keys = [(r["sensor"], r["ts"], r["temp"]) for r in late]
    if len(set(late_keys)) != len(late_keys):
        problems.append("a late record was committed twice")
    late_set = set(late_keys)
    expected: dict[tuple[str, int], list[float]] = defaultdict(list)
    for i in range(TOTAL):
        sensor, ts, temp = reading(i)
        if (sensor, ts, temp) in late_set:
            continue
        first = (ts - SIZE_MS + SLIDE_MS) // SLIDE_MS * SLIDE_MS
        for start in range(first, ts + 1, SLIDE_MS):
            if start <= ts < start + SIZE_MS:
                expected[(sensor, start)].append(temp)
    on_time: dict[tuple[str, int], int] = defaultdict(int)
    final: dict[tuple[str, int], dict] = {}
    for r in results:
        k = (r["key"], r["window_start"])
        if r["kind"] == "on_time":
            on_time[k] += 1
        if r["kind"] in ("on_time", "late"):
            final[k] = r["result"]
    for k, temps in expected.items():
        if on_time.get(k, 0) != 1:
            problems.append(f"window {k}: {on_time.get(k, 0)} on_time results, expected 1")
        got = final.get(k)
        want = {"avg": round(sum(temps) / len(temps), 6), "n": len(temps)}
        if got is None or got["n"] != want["n"] or abs(got["avg"] - want["avg"]) > 1e-6:
            problems.append(f"window {k}: final result {got} != recomputed {want}")
    extra = set(on_time) - set(expected)
    if extra:
        problems.append(f"{len(extra)} unexpected windows, e.g. {sorted(extra)[:3]}")
    print(f"verify: {len(expected)} windows, {len(results)} results "
          f"({sum(on_time.values())} on_time), {len(late)} late records, read back from "
          f"{out}; {'no problems' if not problems else str(len(problems)) + ' problems'}")
    for p in problems[:10]:
        print("  -", p)
    if not problems:
        recoveries = len(handle.status().get("recoveries", [])) if handle is not None else 0
        after = f" across {recoveries} recover{'y' if recoveries == 1 else 'ies'}" \
            if recoveries else ""
        print(f"verify: exactly once{after}: every (sensor, window) has one on_time result, "
              f"the last result of each window equals a batch recomputation, and every "
              f"reading is counted once (in its windows or on the late stream)")
    return not problems


def main() -> int:
    from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

    schedule = ChaosSchedule(7, (Kill("worker", at_s=1.0, worker=1),))
    status, kills, _ = run_with_chaos(topology, config, schedule, timeout=300)
    print(f"drained: generation {status['generation']}, {status['restarts']} recoveries; "
          + "; ".join(kills))
    return 0 if verify() else 1


if __name__ == "__main__":
    sys.exit(main())
