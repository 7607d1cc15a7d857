"""The text form of ``jstorm status``: topology, checkpoint, workers, backpressure, logs."""

from __future__ import annotations

from typing import Any


def _task_names(status: dict[str, Any]) -> dict[int, str]:
    return {int(t): c["name"] for c in status.get("components", []) for t in c.get("tasks", [])}


def _tasks_text(tasks: list[int], names: dict[int, str]) -> str:
    """``ticks[0,1] square[2]``: task ids grouped under their component's name."""
    groups: dict[str, list[int]] = {}
    for t in sorted(tasks):
        groups.setdefault(names.get(t, "?"), []).append(t)
    return " ".join(f"{name}[{','.join(map(str, ids))}]" for name, ids in groups.items()) or "-"


def _backpressure_lines(bp: dict[str, Any], names: dict[int, str]) -> list[str]:
    if not bp:
        return []
    congested = bp.get("congested") or {}
    throttled = bp.get("throttled_spouts") or []
    task = bp.get("bottleneck_task")
    fill = bp.get("bottleneck_fill") or 0.0
    head = "backpressure " + ("THROTTLING" if throttled else "none")
    if task is not None:
        head += f"; fullest queue: task {task} ({names.get(int(task), '?')}) {fill:.0%}"
    head += f"; throttled {bp.get('throttle_count', 0)} times so far"
    lines = [head]
    if congested:
        lines.append("  congested  " + ", ".join(
            f"task {t} ({names.get(int(t), '?')}) {f:.0%}" for t, f in congested.items()))
    if throttled:
        lines.append("  throttled spouts  " + ", ".join(
            f"task {t} ({names.get(int(t), '?')})" for t in throttled))
    if bp.get("reason"):
        lines.append(f"  reason     {bp['reason']}")
    return lines


def format_status(status: dict[str, Any]) -> str:
    """What ``jstorm status NAME`` prints for a :meth:`MasterClient.status` dict."""
    names = _task_names(status)
    lines = [f"topology   {status['name']}  state={status['state']}  generation="
             f"{status['generation']}  guarantee={status['guarantee']}  "
             f"restarts={status['restarts']}"]
    last = status.get("last_completed_checkpoint")
    if last:
        lines.append(f"checkpoint #{last['id']} completed in {last['duration_ms']} ms, "
                     f"{last['size_bytes']} bytes, alignment {last['alignment_ms']} ms, "
                     f"task pause {last.get('pause_ms', 0)} ms")
    else:
        lines.append("checkpoint none completed yet")
    lines.extend(_health_lines(status.get("checkpoint_health") or {}))
    lines.append(f"{'worker':>6} {'alive':>5} {'pid':>7} {'version':>8} {'rss MB':>7} tasks")
    for w in status["workers"]:
        rss = f"{w['rss_bytes'] / 1e6:.0f}" if w.get("rss_bytes") else "-"
        lines.append(f"{w['id']:>6} {str(w['alive']):>5} {w['pid'] or '-':>7} "
                     f"{w['code_version'] or '-':>8} {rss:>7} {_tasks_text(w['tasks'], names)}")
    lines.extend(_backpressure_lines(status.get("backpressure") or {}, names))
    late = status.get("late_records") or {}  # a finished run's (kept by `jstorm run`)
    if late:
        lines.append("late records " + ", ".join(f"{c} {n}" for c, n in late.items()))
    run = status.get("run")
    if run:  # run identity (docs/checkpointing.md): a takeover bumps the epoch
        lines.append(f"run        {run['job_id']} epoch {run['epoch']}")
    if status.get("ha"):  # jstorm run --ha (docs/cluster.md)
        lines.append(format_ha(status["ha"]))
    for r in status.get("recoveries", [])[-5:]:
        restored = "fresh state" if r["checkpoint"] is None else f"checkpoint {r['checkpoint']}"
        lines.append(f"recovery   gen {r['generation']}: {r['reason']} -> restored "
                     f"{restored} ({r['duration_ms']} ms)")
    lines.extend(_rescale_lines(status.get("rescale") or {}))
    for e in status.get("errors", [])[-5:]:
        lines.append(f"error      task {e['task']} {e['component']}: {e['message']}")
    if status.get("failure"):  # why it failed: component, tuple, traceback (docs/errors.md)
        from jstormpy.api.failure import describe_failure

        lines.append(describe_failure(status["name"], status))
    return "\n".join(lines)


def _health_lines(health: dict[str, Any]) -> list[str]:
    """The checkpoints' duration against their interval, and a warning that says what to
    change when they run back to back or keep timing out (master/checkpoint_health.py)."""
    if not health or health.get("recent_duration_ms") is None and not health.get("advice"):
        return []
    pause = health.get("min_pause_ms") or 0
    line = (f"pace       every {health['interval_ms']} ms"
            + (f" (min pause {pause} ms)" if pause else ""))
    if health.get("recent_duration_ms") is not None:
        line += f"; recent checkpoints take {health['recent_duration_ms']:.0f} ms"
    if health.get("timed_out_in_a_row"):
        line += (f"; {health['timed_out_in_a_row']} timed out in a row "
                 f"({health['recovery_after']} start a recovery)")
    lines = [line]
    if health.get("advice"):
        lines.append(f"WARNING    {health['advice']}")
    return lines


def _rescale_lines(rescale: dict[str, Any]) -> list[str]:
    """The rescale in progress and the last ones (docs/rescaling.md)."""
    lines = []
    if rescale.get("phase", "idle") != "idle":
        lines.append(f"rescale    {rescale['phase']} to {rescale['changes']}")
    for r in rescale.get("history", [])[-3:]:
        shown = ", ".join([f"{n}={p}" for n, p in r["changes"].items()]
                          + ([f"{r['new_workers']} workers"] if r.get("new_workers") else [])
                          + ([f"code {r['code']}"] if r.get("code") else []))
        if r.get("error"):
            lines.append(f"rescale    {shown}: {r['error']}")
        else:
            lines.append(f"rescale    {shown}: spouts paused {r['pause_ms']:.0f} ms, total "
                         f"{r['total_ms']:.0f} ms")
    return lines


def format_ha(ha: dict[str, Any]) -> str:
    """The ``ha`` line of ``jstorm status`` (deploy/ha.py's ``ha_status``): leader,
    standbys, and the run the leader recorded in ZooKeeper."""
    if ha.get("error"):
        return f"ha         {ha['url']}: {ha['error']}"
    standby = ", ".join(ha.get("standby") or []) or "none"
    line = f"ha         leader {ha.get('leader') or 'none'}; standby {standby}"
    run = ha.get("run")
    if run:
        line += (f"; recorded: {run['state']} run {run['job_id']} epoch {run['epoch']} "
                 f"generation {run['generation']} checkpoint #{run['checkpoint']}")
    return line
