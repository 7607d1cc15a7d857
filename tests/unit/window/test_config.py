"""Configuration errors: TopologyError from validate_config / the assigners; derived ticks."""

from __future__ import annotations

from typing import Any

import pytest

from jstormpy.api.errors import TopologyError
from jstormpy.window import (
    BoundedOutOfOrderness,
    CountWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowedBolt,
)

from .helpers import attach


class Good(WindowedBolt):
    window = TumblingWindows(1000)
    timestamp = "ts"
    key = "sensor"

    def create(self) -> int:
        return 0

    def add(self, acc: int, tup: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, key: Any, window: Any, acc: int) -> int:
        return acc


def variant(**attrs: Any) -> type[WindowedBolt]:
    return type("Variant", (Good,), attrs)


@pytest.mark.parametrize("make", [
    lambda: TumblingWindows(0), lambda: TumblingWindows(-5), lambda: TumblingWindows("1s"),
    lambda: SlidingWindows(1000, 2000), lambda: SlidingWindows(1000, -1),
    lambda: SessionWindows(0), lambda: CountWindows(0), lambda: CountWindows(3, 4),
    lambda: CountWindows(2.5), lambda: TumblingWindows(float("inf")),
])
def test_bad_assigners_raise_topology_error(make) -> None:
    with pytest.raises(TopologyError):
        make()


@pytest.mark.parametrize(("attrs", "match"), [
    ({"window": None}, "window must be"),
    ({"window": "tumbling"}, "window must be"),
    ({"time": "wall"}, "time must be one of"),
    ({"timestamp": None}, "event time needs a timestamp"),
    ({"allowed_lateness_ms": -1}, "allowed_lateness_ms"),
    ({"allowed_lateness_ms": "10"}, "allowed_lateness_ms"),
    ({"early_fire_every_ms": 0}, "early_fire_every_ms"),
    ({"early_fire_every_n": 0}, "early_fire_every_n"),
    ({"early_fire_every_n": 2.0}, "early_fire_every_n"),
    ({"idle_timeout_ms": -5}, "idle_timeout_ms"),
    ({"watermark": 5000}, "watermark must be"),
    ({"time": "processing", "watermark": BoundedOutOfOrderness(10)}, "no meaning"),
    ({"late_stream": "default"}, "late_stream"),
    ({"late_stream": ""}, "late_stream"),
    ({"key": 3}, "key must be"),
    ({"window": CountWindows(3), "early_fire_every_n": 2}, "early firing"),
    ({"window": SessionWindows(10), "merge": None}, "merge"),
    ({"create": None}, "create"),
])
def test_validate_config_names_the_bad_setting(attrs: dict, match: str) -> None:
    cls = variant(**attrs)
    with pytest.raises(TopologyError, match=match):
        cls.validate_config()
    with pytest.raises(TopologyError, match=match):  # prepare validates too
        attach(cls())


def test_good_configs_validate() -> None:
    Good.validate_config()
    variant(timestamp=None, time="ingestion").validate_config()
    variant(timestamp=None, window=CountWindows(5, 1)).validate_config()
    variant(window=TumblingWindows(5), merge=None).validate_config()  # never merges

    class ByMethod(Good):
        timestamp = None

        def timestamp(self, tup: Any) -> float:  # type: ignore[override]  # noqa: F811
            return 0.0

    ByMethod.validate_config()


def test_resolve_outputs_and_outputs() -> None:
    assert Good.outputs == ("key", "window_start", "window_end", "result", "kind")
    assert variant(late_stream="too_late").resolve_outputs(("sensor", "ts", "temp")) == {
        "default": ("key", "window_start", "window_end", "result", "kind"),
        "too_late": ("sensor", "ts", "temp"),
        "errors": ("reason", "values"),
    }


def test_tick_interval_is_derived_from_config() -> None:
    assert Good.tick_interval_ms is None
    assert variant(early_fire_every_ms=1000).tick_interval_ms == 500
    assert variant(early_fire_every_ms=4).tick_interval_ms == 10  # floor
    assert variant(watermark=BoundedOutOfOrderness(5000)).tick_interval_ms == 200
    assert variant(watermark=BoundedOutOfOrderness(5000, idle_timeout_ms=400)
                   ).tick_interval_ms == 100
    assert variant(watermark=BoundedOutOfOrderness(5000), idle_timeout_ms=200
                   ).tick_interval_ms == 50
    assert variant(time="processing", window=TumblingWindows(60_000)).tick_interval_ms == 100
    assert variant(time="processing", window=SlidingWindows(100, 20)).tick_interval_ms == 20
    explicit = variant(tick_interval_ms=1234)
    assert explicit.tick_interval_ms == 1234
    assert type("Child", (explicit,), {"early_fire_every_ms": 10}).tick_interval_ms == 1234


def test_instance_level_config_is_honoured_in_prepare() -> None:
    class PerInstance(Good):
        def __init__(self, every: int) -> None:
            self.early_fire_every_ms = every

    bolt = PerInstance(300)
    attach(bolt)
    assert bolt.tick_interval_ms == 150
