"""Per-channel bounded out-of-orderness: min over channels, idle channels, restore."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jstormpy.api.errors import TopologyError
from jstormpy.window import BoundedOutOfOrderness, ChannelWatermarks


def test_watermark_is_min_over_channels() -> None:
    w = ChannelWatermarks(5, None, channels=(1, 2))
    w.observe(1, 100)
    assert w.current() == -math.inf  # channel 2 has said nothing yet
    w.observe(2, 30)
    assert w.current() == 25
    w.observe(2, 200)
    assert w.current() == 95


def test_idle_channel_stops_holding_back_and_rejoins() -> None:
    w = ChannelWatermarks(0, 1000, channels=(1, 2))
    w.observe(1, 10)
    w.observe(2, 10)
    w.tick(0)
    w.observe(1, 500)
    w.tick(600)
    assert w.current() == 10
    w.observe(1, 900)
    assert not w.tick(999)
    assert w.tick(1000)  # channel 2 silent for 1000 ms
    assert w.idle_channels == {2}
    assert w.current() == 900
    w.observe(2, 50)  # wakes up: holds back again (the task's watermark stays monotone)
    assert w.current() == 50


def test_all_channels_idle_lets_watermark_reach_furthest_channel() -> None:
    w = ChannelWatermarks(10, 100, channels=(1, 2))
    w.observe(1, 500)
    w.tick(0)
    w.tick(100)
    assert w.idle_channels == {1, 2}
    assert w.current() == 490


def test_restore_keeps_maxima_and_restarts_idleness() -> None:
    w = ChannelWatermarks(0, 100, channels=(1, 2))
    w.observe(1, 40)
    w.observe(2, 70)
    w.tick(0)
    w.tick(500)
    w2 = ChannelWatermarks(0, 100, channels=(1, 2))
    w2.restore(w.snapshot())
    assert w2.current() == 40 and w2.idle_channels == frozenset()


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-1000, 1000)), max_size=50),
       st.integers(0, 100))
def test_matches_definition(observations, lag) -> None:
    w = ChannelWatermarks(lag, None, channels=range(4))
    seen: dict[int, list[int]] = {c: [] for c in range(4)}
    for ch, ts in observations:
        w.observe(ch, ts)
        seen[ch].append(ts)
        expected = min(max(v) if v else -math.inf for v in seen.values()) - lag
        assert w.current() == expected


@pytest.mark.parametrize("args", [(-1,), (float("inf"),), ("5",), (5, 0), (5, -3), (True,)])
def test_strategy_rejects_bad_values(args) -> None:
    with pytest.raises(TopologyError):
        BoundedOutOfOrderness(*args)


@given(steps=st.lists(st.tuples(st.sampled_from([1, 2, 3]),
                                st.lists(st.integers(-50, 500), max_size=8),
                                st.integers(0, 700)), max_size=12),
       lag=st.integers(0, 20))
def test_observe_batch_equals_observe_then_current(steps, lag) -> None:
    """Per-record watermarks of a batch, also with idle channels waking up."""
    one = ChannelWatermarks(lag, 1000, channels=(1, 2, 3))
    many = ChannelWatermarks(lag, 1000, channels=(1, 2, 3))
    now = 0
    for channel, timestamps, advance in steps:
        expected = []
        for ts in timestamps:
            one.observe(channel, ts)
            expected.append(one.current())
        assert many.observe_batch(channel, timestamps) == expected
        assert many.current() == one.current()
        now += advance
        assert many.tick(now) == one.tick(now)
        assert many.idle_channels == one.idle_channels
        assert many.current() == one.current()
