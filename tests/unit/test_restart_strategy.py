"""Restart strategies (master/restart.py): each decision on a fake clock."""

from __future__ import annotations

import pytest

from jstormpy import Config
from jstormpy.api.errors import ConfigError
from jstormpy.api.restart import RestartKind, RestartStrategy
from jstormpy.master.restart import ErrorSignature, RestartTracker
from tests.manual_clock import Clock


def tracker(strategy: RestartStrategy, max_restarts: int = 100) -> tuple[RestartTracker, Clock]:
    clock = Clock()
    return RestartTracker(strategy, max_restarts, clock=clock, rand=lambda: 0.5), clock


def test_fixed_delay_restarts_attempts_times_then_fails() -> None:
    t, clock = tracker(RestartStrategy.fixed_delay(attempts=3, delay_ms=2000))
    for _ in range(3):
        d = t.on_failure("boom")
        assert d.restart and d.delay_s == 2.0
        assert not t.due()
        clock.now += 2.0
        assert t.due()
    d = t.on_failure("boom")
    assert not d.restart and "3 restarts" in d.reason and "fixed-delay" in d.reason
    assert t.restarts == 3  # the ones made


def test_failure_rate_counts_only_failures_within_the_interval() -> None:
    t, clock = tracker(RestartStrategy.failure_rate(max_failures=2, interval_ms=10_000,
                                                    delay_ms=500))
    assert t.on_failure("a").restart
    clock.now += 6
    assert t.on_failure("b").restart
    clock.now += 6  # the first failure left the window
    assert t.on_failure("c").restart
    clock.now += 1  # three within 10 s
    d = t.on_failure("d")
    assert not d.restart and "3 failures within 10000 ms" in d.reason


def test_exponential_delay_grows_caps_and_resets() -> None:
    t, clock = tracker(RestartStrategy.exponential_delay(
        initial_ms=100, max_ms=1000, multiplier=2.0, reset_after_ms=60_000, jitter=0.0))
    delays = []
    for _ in range(6):
        delays.append(t.on_failure("x").delay_s)
        clock.now += 1
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    clock.now += 60  # a quiet minute resets the back-off
    assert t.on_failure("x").delay_s == 0.1


def test_exponential_delay_jitter_and_attempts() -> None:
    clock = Clock()
    t = RestartTracker(RestartStrategy.exponential_delay(initial_ms=1000, jitter=0.1,
                                                         attempts=2),
                       100, clock=clock, rand=lambda: 1.0)
    assert t.on_failure("x").delay_s == pytest.approx(1.1)
    assert t.on_failure("x").restart
    assert not t.on_failure("x").restart


def test_max_restarts_is_the_default_strategys_attempts() -> None:
    config = Config(max_restarts=2)
    assert config.restart().kind is RestartKind.EXPONENTIAL_DELAY
    t, _ = tracker(config.restart(), config.max_restarts)
    assert t.on_failure("x").restart and t.on_failure("x").restart
    assert not t.on_failure("x").restart


def test_no_restart() -> None:
    t, _ = tracker(RestartStrategy.no_restart())
    assert not t.on_failure("x").restart
    assert t.restarts == 0


def test_same_error_on_same_tuple_after_its_restore_is_deterministic() -> None:
    t, _ = tracker(RestartStrategy())
    sig = ErrorSignature("double", "KeyError: 'num'", "Tuple(n=3)")
    assert not t.is_deterministic(sig, generation=1)
    assert t.is_deterministic(sig, generation=2)  # the generation its restore started
    other = ErrorSignature("double", "KeyError: 'num'", "Tuple(n=4)")
    assert not t.is_deterministic(other, generation=3)  # another tuple: maybe transient
    assert not t.is_deterministic(other, generation=7)  # not right after its restore


def test_config_accepts_typed_and_string_forms() -> None:
    typed = Config(restart_strategy=RestartStrategy.fixed_delay(3, 1000))
    text = Config(restart_strategy="fixed-delay:attempts=3,delay_ms=1000")
    assert typed.restart() == text.restart() == RestartStrategy.fixed_delay(3, 1000)
    assert Config.from_dict(typed.to_dict()).restart() == typed.restart()
    e = RestartStrategy.exponential_delay(initial_ms=10, multiplier=1.5)
    assert RestartStrategy.parse(e.spec()) == e


@pytest.mark.parametrize("bad, words", [
    ("fixed-dely", "unknown restart strategy 'fixed-dely'"),
    ("fixed-delay:tries=3", "bad setting 'tries=3'"),
    ("fixed-delay:attempts=x", "attempts must be a number"),
    ("exponential-delay:multiplier=0.5", "multiplier must be >= 1"),
])
def test_bad_strategies_are_refused_by_name(bad: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        Config(restart_strategy=bad)
