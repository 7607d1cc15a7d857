"""WindowedBolt driven directly, with a list-collecting collector."""

from __future__ import annotations

import math
import pickle
from typing import Any

from jstormpy.api.component import Tuple, bind_task
from jstormpy.window import (
    BoundedOutOfOrderness,
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowedBolt,
)

from .helpers import attach, context, sensor


class AvgTemp(WindowedBolt):
    window = TumblingWindows(size_ms=1000)
    timestamp = "ts"
    key = "sensor"
    watermark = BoundedOutOfOrderness(max_lag_ms=100)
    allowed_lateness_ms = 500

    def __init__(self, label: str = "x") -> None:  # no super().__init__(): allowed
        self.label = label

    def create(self) -> tuple[float, int]:
        return (0.0, 0)

    def add(self, acc: tuple[float, int], tup: Tuple) -> tuple[float, int]:
        return (acc[0] + tup["temp"], acc[1] + 1)

    def merge(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, key: Any, window: Any, acc: tuple[float, int]) -> float:
        return acc[0] / acc[1]


def test_event_time_firings_watermark_forwarding_and_finish() -> None:
    bolt = AvgTemp()
    col = attach(bolt)
    bolt.execute(sensor("s1", 100, 10.0))
    bolt.execute(sensor("s2", 500, 30.0))
    bolt.execute(sensor("s1", 900, 20.0))
    assert col.stream("default") == []
    bolt.execute(sensor("s1", 1099, 0.0))  # watermark 999 passes the end of [0, 1000)
    assert sorted(col.stream("default")) == [("s1", 0, 1000, 15.0, "on_time"),
                                             ("s2", 0, 1000, 30.0, "on_time")]
    assert col.watermarks == [999]
    bolt.on_inputs_finished()
    assert col.stream("default")[-1] == ("s1", 1000, 2000, 0.0, "on_time")
    assert col.watermarks[-1] == math.inf


def test_late_updates_then_late_stream_with_original_values() -> None:
    bolt = AvgTemp()
    col = attach(bolt)
    bolt.execute(sensor("s1", 100, 10.0))
    bolt.execute(sensor("s1", 1200, 0.0))  # wm 1100: [0,1000) fires on time
    col.take()
    bolt.execute(sensor("s1", 200, 20.0))  # within lateness: late firing
    assert col.take() == [("default", ("s1", 0, 1000, 15.0, "late"))]
    bolt.execute(sensor("s1", 1700, 0.0))  # wm 1600 >= 1000 + 500: purged
    col.take()
    late = sensor("s1", 300, 99.5)
    bolt.execute(late)
    assert col.take() == [("late", ("s1", 300, 99.5))]
    assert bolt.late_records == 1


def test_watermark_is_min_over_inputs_and_idle_input_stops_holding_back() -> None:
    class W(AvgTemp):
        idle_timeout_ms = 1000

    bolt = W()
    col = attach(bolt, input_tasks=(1, 2))
    bolt.on_tick(0)
    bolt.execute(sensor("a", 100, 1.0, task=1))
    bolt.execute(sensor("a", 5000, 1.0, task=1))
    assert bolt.current_watermark == -math.inf  # task 2 has sent nothing
    bolt.execute(sensor("b", 600, 1.0, task=2))
    assert bolt.current_watermark == 500
    bolt.on_tick(500)
    bolt.execute(sensor("a", 6000, 1.0, task=1))
    bolt.on_tick(1400)
    assert bolt.current_watermark == 500  # task 2 silent for 900 ms: still counted
    bolt.execute(sensor("a", 6100, 1.0, task=1))
    bolt.on_tick(1500)  # silent for 1000 ms: idle
    assert bolt.current_watermark == 6000
    assert ("a", 0, 1000, 1.0, "on_time") in col.stream("default")
    assert col.watermarks[-1] == 6000


def test_engine_watermark_drives_event_time_without_strategy() -> None:
    class W(AvgTemp):
        watermark = None

    bolt = W()
    col = attach(bolt)
    bolt.execute(sensor("s", 10, 1.0))
    bolt.execute(sensor("s", 5000, 1.0))
    assert col.stream("default") == []
    bolt.on_watermark(999)
    assert col.stream("default") == [("s", 0, 1000, 1.0, "on_time")]
    assert col.watermarks == [999]
    assert W.tick_interval_ms is None  # nothing needs processing time


def test_strategy_ignores_engine_watermark() -> None:
    bolt = AvgTemp()
    col = attach(bolt)
    bolt.execute(sensor("s", 10, 1.0))
    bolt.on_watermark(10_000)
    assert col.stream("default") == [] and bolt.current_watermark == -90


def test_bad_data_goes_to_errors_stream() -> None:
    class ByMethod(AvgTemp):
        def timestamp(self, tup: Tuple) -> float:
            return int(tup["ts"])

    bolt = AvgTemp()
    col = attach(bolt)
    bolt.execute(sensor("s", "12:00", 1.0))
    bolt.execute(sensor("s", None, 1.0))
    bolt.execute(sensor("s", float("nan"), 1.0))
    bolt.execute(sensor("s", True, 1.0))
    bolt.execute(Tuple(("s", 1.0), {"sensor": 0, "temp": 1}, "src", "default", 1))
    bolt.execute(Tuple((1, 5, 1.0), {"id": 0, "ts": 1, "temp": 2}, "src", "default", 1))
    errors = col.stream("errors")
    values = [e[1] for e in errors]
    assert math.isnan(values[2][1])
    assert values[:2] + values[3:] == [("s", "12:00", 1.0), ("s", None, 1.0),
                                       ("s", True, 1.0), ("s", 1.0), (1, 5, 1.0)]
    reasons = [e[0] for e in errors]
    assert "non-numeric timestamp '12:00'" in reasons[0]
    assert "non-finite" in reasons[2]
    assert reasons[4] == "missing timestamp field 'ts'"
    assert reasons[5] == "missing key field 'sensor'"
    assert bolt.error_records == 6

    bolt2 = ByMethod()
    col2 = attach(bolt2)
    bolt2.execute(sensor("s", "oops", 1.0))
    bolt2.execute(sensor("s", "12", 1.0))
    assert col2.stream("errors")[0][0].startswith("timestamp() raised ValueError")
    assert col2.stream("errors")[1:] == []
    bolt2.on_inputs_finished()
    assert col2.stream("default") == [("s", 0, 1000, 1.0, "on_time")]


class EarlyCount(WindowedBolt):
    window = SlidingWindows(size_ms=1000, slide_ms=500)
    timestamp = "ts"
    key = "sensor"
    watermark = BoundedOutOfOrderness(max_lag_ms=200)
    early_fire_every_ms = 100
    allowed_lateness_ms = 300

    def create(self) -> int:
        return 0

    def add(self, acc: int, tup: Tuple) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


def _script() -> list[tuple]:
    steps: list[tuple] = []
    now = 0
    for i in range(60):
        steps.append(("rec", sensor(f"s{i % 3}", i * 40 - (i * 7919) % 300, 1.0)))
        if i % 4 == 0:
            now += 37
            steps.append(("tick", now))
    steps.append(("finish",))
    return steps


def _run(steps: list[tuple], bolt: WindowedBolt, col: Any) -> None:
    for step in steps:
        if step[0] == "rec":
            bolt.execute(step[1])
        elif step[0] == "tick":
            bolt.on_tick(step[1])
        else:
            bolt.on_inputs_finished()


def test_bolt_snapshot_restore_equals_uninterrupted_run() -> None:
    steps = _script()
    ref = EarlyCount()
    ref_col = attach(ref)
    _run(steps, ref, ref_col)
    kinds = {v[4] for v in ref_col.stream("default")}
    assert {"early", "on_time"} <= kinds
    for cut in range(0, len(steps), 7):
        first = EarlyCount()
        col = attach(first)
        _run(steps[:cut], first, col)
        snap = pickle.loads(pickle.dumps(first.snapshot()))
        second = EarlyCount()
        second.restore(snap)  # restore runs before prepare
        bind_task(second, col, None)
        second.prepare({}, context())
        _run(steps[cut:], second, col)
        assert col.emitted == ref_col.emitted, cut
        assert col.watermarks == ref_col.watermarks, cut
        assert second.late_records == ref.late_records


def test_processing_time_windows_fire_on_ticks() -> None:
    class Proc(EarlyCount):
        window = TumblingWindows(1000)
        time = "processing"
        watermark = None
        early_fire_every_ms = None

    assert Proc.tick_interval_ms == 100
    bolt = Proc()
    clock = [10_000.0]
    bolt.now_ms = lambda: clock[0]  # type: ignore[method-assign]
    col = attach(bolt)
    bolt.on_tick(10_000)
    bolt.execute(sensor("a", "no ts needed", 1.0))
    clock[0] = 10_500
    bolt.execute(sensor("a", None, 1.0))
    bolt.on_tick(10_999)
    assert col.stream("default") == []
    bolt.on_tick(11_000)
    assert col.stream("default") == [("a", 10_000, 11_000, 2, "on_time")]
    assert col.watermarks == []  # processing time is not forwarded as event time


def test_ingestion_time_stamps_on_arrival() -> None:
    class Ingest(EarlyCount):
        window = TumblingWindows(1000)
        time = "ingestion"
        watermark = None
        early_fire_every_ms = None

    bolt = Ingest()
    clock = [500.0]
    bolt.now_ms = lambda: clock[0]  # type: ignore[method-assign]
    col = attach(bolt)
    bolt.execute(sensor("a", -99999, 1.0))  # the field is ignored
    clock[0] = 1000.0
    bolt.execute(sensor("a", None, 1.0))  # stamped 1000: [0, 1000) can close
    assert col.stream("default") == [("a", 0, 1000, 1, "on_time")]
    bolt.on_tick(2000)
    assert col.stream("default")[-1] == ("a", 1000, 2000, 1, "on_time")
    assert col.watermarks[-1] == 1999


def test_count_windows_and_global_key() -> None:
    class Every3(EarlyCount):
        window = CountWindows(3)
        key = None
        early_fire_every_ms = None
        watermark = None

    assert Every3.tick_interval_ms is None
    bolt = Every3()
    col = attach(bolt)
    for i in range(7):
        bolt.execute(sensor(f"s{i}", "ignored", 1.0))
    bolt.on_inputs_finished()
    assert col.stream("default") == [(None, 0, 3, 3, "on_time"), (None, 3, 6, 3, "on_time"),
                                     (None, 6, 7, 1, "on_time")]


def test_session_bolt_with_composite_key() -> None:
    class Sessions(EarlyCount):
        window = SessionWindows(gap_ms=100)
        key = ("sensor", "temp")
        early_fire_every_ms = None

    bolt = Sessions()
    col = attach(bolt)
    for ts in (0, 50, 120, 400):
        bolt.execute(sensor("a", ts, 1.0))
    bolt.on_inputs_finished()
    assert col.stream("default") == [(("a", 1.0), 0, 220, 3, "on_time"),
                                     (("a", 1.0), 400, 500, 1, "on_time")]
