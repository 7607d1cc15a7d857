"""What ShellBolt and ShellSpout share: starting the subprocess for a task, and performing
the messages every multilang component may send (emit, log, error, metrics)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from jstormpy.api.component import DEFAULT_STREAM, TopologyContext, bound_emitter
from jstormpy.api.errors import ConfigError
from jstormpy.multilang.frames import (
    PROTOCOL_CONF,
    FrameProcess,
    check_protocol,
    runner_command,
)
from jstormpy.multilang.protocol import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Emit,
    ErrorReport,
    LogMessage,
    Metric,
    ShellProcess,
    python_log_level,
    storm_context,
)

log = logging.getLogger("jstormpy.multilang")


class ShellSettings:
    """The launch settings both shell components take (checked on construction)."""

    def __init__(self, command: Sequence[str], outputs: Sequence[str] | Mapping[str, Sequence[str]],
                 cwd: str | None, env: Mapping[str, str] | None, heartbeat_timeout_s: float,
                 max_message_bytes: int, conf: Mapping[str, Any] | None = None,
                 protocol: str = "auto") -> None:
        if isinstance(command, str) or not command or not all(
                isinstance(a, str) for a in command):
            raise ConfigError(f"multilang command must be a non-empty list of strings, like "
                              f"['python3', 'split.py'], not {command!r}")
        if heartbeat_timeout_s <= 0:
            raise ConfigError(f"heartbeat_timeout_s must be > 0, not {heartbeat_timeout_s!r}")
        if max_message_bytes <= 0:
            raise ConfigError(f"max_message_bytes must be > 0, not {max_message_bytes!r}")
        self.command = tuple(command)
        self.outputs = outputs
        self.cwd = cwd
        self.env = dict(env or {})
        self.heartbeat_timeout_s = float(heartbeat_timeout_s)
        self.max_message_bytes = int(max_message_bytes)
        self.conf = dict(conf or {})
        self.protocol = check_protocol(protocol)
        """"auto": our pystorm runner for a streamparse command; "json": Storm's protocol."""


DEFAULTS: dict[str, Any] = {"cwd": None, "env": None, "heartbeat_timeout_s": 30.0,
                            "max_message_bytes": DEFAULT_MAX_MESSAGE_BYTES, "protocol": "auto"}


def start_process(settings: ShellSettings, conf: Mapping[str, Any],
                  context: TopologyContext) -> ShellProcess:
    """Start the task's subprocess and do the handshake: our pystorm runner (frames) for a
    streamparse command unless the component or its conf asks for the JSON protocol."""
    merged = {**conf, **settings.conf}
    protocol = settings.protocol
    if PROTOCOL_CONF in merged:
        protocol = check_protocol(str(merged[PROTOCOL_CONF]))
    command = runner_command(settings.command) if protocol == "auto" else None
    proc = (ShellProcess if command is None else FrameProcess)(
        command or settings.command, context.component, context.task_id,
        cwd=settings.cwd, env=settings.env, max_message_bytes=settings.max_message_bytes,
        heartbeat_timeout_s=settings.heartbeat_timeout_s)
    storm_conf = {k: v for k, v in merged.items() if _json_safe(v)}
    storm_conf.setdefault("topology.name", context.topology)
    try:
        proc.handshake(storm_conf, storm_context(context.component, context.task_id,
                                                 context.component_tasks, {}))
    except BaseException:
        proc.close(0.5)
        raise
    return proc


def _json_safe(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


class MessageSink:
    """Performs a component's emit/log/error/metrics messages for its task."""

    def __init__(self, owner: Any, proc: ShellProcess) -> None:
        self.owner = owner
        self.proc = proc
        self.metrics: dict[str, Any] = {}
        """The last value each ``metrics`` message gave, by metric name."""
        self.last_error: str | None = None

    def emit(self, msg: Emit) -> list[int]:
        """Emit the message's tuple; the task ids it went to."""
        emitter = bound_emitter(self.owner)
        assert emitter is not None, "emit outside a running task"
        stream = msg.stream or DEFAULT_STREAM
        if msg.task is not None:
            emitter.emit_direct(msg.task, msg.values, stream)
            return [msg.task]
        tracked = getattr(emitter, "emit_tracked", None)
        if msg.need_task_ids and callable(tracked):
            return list(tracked(msg.values, stream))
        emitter.emit(msg.values, stream)
        return []

    def perform(self, msg: Any) -> bool:
        """Perform a log/error/metrics message; False if ``msg`` is another kind."""
        if isinstance(msg, LogMessage):
            logger = self.owner.log or log
            logger.log(python_log_level(msg.level), "%s: %s", self.proc.component, msg.text)
        elif isinstance(msg, ErrorReport):
            self.last_error = msg.text
            logger = self.owner.log or log
            logger.error("%s reported an error: %s", self.proc.component, msg.text)
        elif isinstance(msg, Metric):
            self.metrics[msg.name] = msg.params
        else:
            return False
        return True
