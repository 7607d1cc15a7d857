"""Live operations in the Topology Master: log levels and settings safe to change at run time.

``jstorm loglevel`` and ``jstorm config`` call the ``SetLogLevel`` / ``SetConfig`` RPCs;
the service hands them to :func:`set_log_level` / :func:`set_config`. Settings read by
the TM (checkpoint interval, backpressure watermarks) are applied to ``core.config``
(validated through ``Config.replace``); worker-side ones (``batch_linger_ms``) are pushed
to every worker as a ``ConfigCommand``. Overrides are remembered and replayed to a
worker that (re)registers, so a respawned worker keeps them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jstormpy.api.config import LOG_LEVELS
from jstormpy.api.errors import ConfigError, JStormError
from jstormpy.proto import jstorm_pb2 as pb

log = logging.getLogger("jstormpy.master.ops")

LIVE_TM_KEYS = ("checkpoint_interval_ms", "backpressure_high_watermark",
                "backpressure_low_watermark")
"""Settings the Topology Master itself reads on every tick."""
LIVE_WORKER_KEYS = ("batch_linger_ms",)
"""Settings pushed to the workers (applied to every executor)."""
LIVE_KEYS = LIVE_TM_KEYS + LIVE_WORKER_KEYS
LEVELS = LOG_LEVELS


def _overrides(core: Any) -> dict[str, Any]:
    store: dict[str, Any] | None = core.__dict__.get("_ops_overrides")
    if store is None:
        store = {"log_levels": {}, "config": {}}
        core.__dict__["_ops_overrides"] = store
    return store


def parse_value(key: str, raw: str, current: Any) -> Any:
    """Parse a CLI string for ``key`` to the type of its current value."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        return value
    if isinstance(current, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def set_log_level(core: Any, component: str, level: str) -> int:
    """Push a log level for ``component`` ("" = all) to every worker; returns how many."""
    level = level.upper()
    if level not in LEVELS:
        raise JStormError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    with core.lock:
        if component and component not in core.component_tasks:
            raise JStormError(f"no component {component!r} (components: "
                              f"{', '.join(sorted(core.component_tasks))})")
        store = _overrides(core)
        if component:
            store["log_levels"].pop(component, None)  # keep replay order = command order
            store["log_levels"][component] = level
        else:
            store["log_levels"] = {"": level}
            core.config = core.config.replace(log_level=level)  # shown in "Live settings"
        alive = core.alive_sessions()
        for s in alive:
            s.send(set_log_level=pb.LogLevelCommand(component=component, level=level))
    log.info("log level of %s set to %s on %d worker(s)", component or "every component",
             level, len(alive))
    return len(alive)


def set_config(core: Any, key: str, raw_value: str) -> tuple[Any, str]:
    """Apply a live-safe setting; returns (the value applied, "master" or "workers")."""
    if key not in LIVE_KEYS:
        raise JStormError(f"{key!r} cannot be changed while the topology runs; live-safe "
                          f"settings are: {', '.join(LIVE_KEYS)}")
    with core.lock:
        value = parse_value(key, raw_value, getattr(core.config, key))
        try:
            new = core.config.replace(**{key: value})
        except ConfigError as exc:
            raise JStormError(str(exc)) from exc
        core.config = new
        bp = getattr(core, "backpressure", None)
        if bp is not None:  # the coordinator keeps its own copy of the watermarks
            bp.high = new.backpressure_high_watermark
            bp.low = new.backpressure_low_watermark
        if key in LIVE_WORKER_KEYS:
            _overrides(core)["config"][key] = value
            for s in core.alive_sessions():
                s.send(set_config=pb.ConfigCommand(key=key, value_json=json.dumps(value)))
    scope = "workers" if key in LIVE_WORKER_KEYS else "master"
    log.info("config %s set to %r (%s)", key, value, scope)
    return value, scope


def live_log_levels(core: Any) -> dict[str, str]:
    """Log levels set live with ``jstorm loglevel``: component ("" = all) -> level."""
    with core.lock:
        return dict(_overrides(core)["log_levels"])


def replay(core: Any, session: Any) -> None:
    """Send remembered overrides to a worker that just registered."""
    with core.lock:
        store = _overrides(core)
        for component, level in store["log_levels"].items():
            session.send(set_log_level=pb.LogLevelCommand(component=component, level=level))
        for key, value in store["config"].items():
            session.send(set_config=pb.ConfigCommand(key=key, value_json=json.dumps(value)))
