"""Restart strategies (Flink's ``restart-strategy.type``): what the Topology Master does when a
failure needs a recovery -- restart after a delay, or give up and fail the job.

Three kinds, with Flink's semantics (docs/errors.md):

* ``fixed-delay``: at most ``attempts`` restarts, each after ``delay_ms``;
* ``failure-rate``: restart after ``delay_ms`` unless more than ``max_failures`` failures
  fell within the last ``interval_ms``;
* ``exponential-delay``: the delay starts at ``initial_ms`` and is multiplied by
  ``multiplier`` per restart up to ``max_ms``; a run of ``reset_after_ms`` without failure
  resets it; ``jitter`` (a fraction) spreads it; at most ``attempts`` restarts in a row
  without such a reset;
* ``none``: the first failure fails the job.

``Config(restart_strategy=RestartStrategy.fixed_delay(3, 1000))`` or the string form
``Config(restart_strategy="fixed-delay:attempts=3,delay_ms=1000")``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from jstormpy.api.errors import ConfigError


class RestartKind(Enum):
    """Kinds of restart strategy (Flink's names)."""

    FIXED_DELAY = "fixed-delay"
    FAILURE_RATE = "failure-rate"
    EXPONENTIAL_DELAY = "exponential-delay"
    NONE = "none"


@dataclass(frozen=True)
class RestartStrategy:
    """One restart strategy; build it with the class methods. ``attempts=0`` (fixed and
    exponential) means ``Config.max_restarts``."""

    kind: RestartKind = RestartKind.EXPONENTIAL_DELAY
    attempts: int = 0
    delay_ms: int = 0
    max_failures: int = 1
    interval_ms: int = 60_000
    initial_ms: int = 50
    max_ms: int = 10_000
    multiplier: float = 1.5
    reset_after_ms: int = 60_000
    jitter: float = 0.1

    @classmethod
    def fixed_delay(cls, attempts: int, delay_ms: int = 0) -> RestartStrategy:
        """At most ``attempts`` restarts, each ``delay_ms`` after the failure."""
        return cls(RestartKind.FIXED_DELAY, attempts=attempts, delay_ms=delay_ms).checked()

    @classmethod
    def failure_rate(cls, max_failures: int, interval_ms: int,
                     delay_ms: int = 0) -> RestartStrategy:
        """Restart after ``delay_ms`` while at most ``max_failures`` failures fall within
        any ``interval_ms``; one more fails the job."""
        return cls(RestartKind.FAILURE_RATE, max_failures=max_failures,
                   interval_ms=interval_ms, delay_ms=delay_ms).checked()

    @classmethod
    def exponential_delay(cls, initial_ms: int = 50, max_ms: int = 10_000,
                          multiplier: float = 1.5, reset_after_ms: int = 60_000,
                          jitter: float = 0.1, attempts: int = 0) -> RestartStrategy:
        """Delays ``initial_ms`` x ``multiplier``^n capped at ``max_ms``, reset after
        ``reset_after_ms`` without failure, spread by +-``jitter``."""
        return cls(RestartKind.EXPONENTIAL_DELAY, attempts=attempts, initial_ms=initial_ms,
                   max_ms=max_ms, multiplier=multiplier, reset_after_ms=reset_after_ms,
                   jitter=jitter).checked()

    @classmethod
    def no_restart(cls) -> RestartStrategy:
        """The first failure fails the job."""
        return cls(RestartKind.NONE)

    @classmethod
    def parse(cls, text: str) -> RestartStrategy:
        """``"fixed-delay:attempts=3,delay_ms=1000"``, ``"exponential-delay"``, ``"none"``
        (the keys are the class methods' parameters)."""
        kind_text, _, rest = text.strip().partition(":")
        try:
            kind = RestartKind(kind_text.strip())
        except ValueError:
            raise ConfigError(
                f"unknown restart strategy {kind_text!r}; use one of "
                f"{', '.join(k.value for k in RestartKind)}, e.g. "
                f"'fixed-delay:attempts=3,delay_ms=1000'") from None
        types = {f.name: f.type for f in dataclasses.fields(cls) if f.name != "kind"}
        values: dict[str, float | int] = {}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = item.partition("=")
            key = key.strip()
            if not eq or key not in types:
                raise ConfigError(f"restart strategy {text!r}: bad setting {item!r}; keys "
                                  f"are {', '.join(sorted(types))}")
            try:
                values[key] = float(value) if types[key] == "float" else int(value)
            except ValueError:
                raise ConfigError(f"restart strategy {text!r}: {key} must be a number, "
                                  f"not {value.strip()!r}") from None
        return cls(kind, **values).checked()  # type: ignore[arg-type]

    def checked(self) -> RestartStrategy:
        """Itself, after refusing impossible values with a ConfigError."""
        for name in ("attempts", "delay_ms", "interval_ms", "initial_ms", "max_ms",
                     "reset_after_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"restart strategy: {name} must be >= 0, "
                                  f"not {getattr(self, name)}")
        if self.max_failures < 1:
            raise ConfigError(f"restart strategy: max_failures must be >= 1, "
                              f"not {self.max_failures}")
        if self.multiplier < 1.0:
            raise ConfigError(f"restart strategy: multiplier must be >= 1, "
                              f"not {self.multiplier}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError(f"restart strategy: jitter must be within [0, 1], "
                              f"not {self.jitter}")
        if self.kind is RestartKind.FAILURE_RATE and self.interval_ms < 1:
            raise ConfigError("restart strategy: failure-rate needs interval_ms >= 1")
        return self

    def spec(self) -> str:
        """The string form (what ``Config.to_dict`` stores); ``parse(spec())`` is equal."""
        keys = {RestartKind.FIXED_DELAY: ("attempts", "delay_ms"),
                RestartKind.FAILURE_RATE: ("max_failures", "interval_ms", "delay_ms"),
                RestartKind.EXPONENTIAL_DELAY: ("initial_ms", "max_ms", "multiplier",
                                                "reset_after_ms", "jitter", "attempts"),
                RestartKind.NONE: ()}[self.kind]
        settings = ",".join(f"{k}={getattr(self, k)}" for k in keys)
        return self.kind.value + (f":{settings}" if settings else "")

    def describe(self, max_restarts: int) -> str:
        """In words, for error messages."""
        attempts = self.attempts or max_restarts
        if self.kind is RestartKind.FIXED_DELAY:
            return f"fixed-delay: at most {attempts} restarts, {self.delay_ms} ms apart"
        if self.kind is RestartKind.FAILURE_RATE:
            return (f"failure-rate: at most {self.max_failures} failures per "
                    f"{self.interval_ms} ms")
        if self.kind is RestartKind.EXPONENTIAL_DELAY:
            return (f"exponential-delay: at most {attempts} restarts in a row, "
                    f"{self.initial_ms}..{self.max_ms} ms apart")
        return "none: no restart"


DEFAULT_RESTART_STRATEGY = RestartStrategy()
"""exponential-delay, 50 ms doubling-ish (x1.5) up to 10 s, reset after 60 s of quiet, attempts
= ``Config.max_restarts`` (docs/errors.md says why)."""
