"""The fault classes ``fresh_run_into_used`` and ``savepoint_into_used``: a second run into
the :class:`~jstormpy.FileSink` directory an earlier run of the same job wrote (issue 23,
holes 3 and 4; used by :mod:`jstormpy.testing.chaos.scenarios`).

The first run of ``fresh_run_into_used`` recovers from a worker SIGKILL, then drains. In
``savepoint_into_used`` a savepoint is taken while it runs (:func:`take_savepoint`), and
the job is stopped once a later checkpoint has committed more output (as a user stops a
job to restore it elsewhere). :func:`second_run` then submits the job again into the same
directory: fresh, or restored from the savepoint. Checkpoint ids restart (at 1, or after
the savepoint's) and would name part files the first run committed, so the submit must be
refused with an error naming the directory, leaving every file as it was. For a savepoint
the user then does what the error says, a restore into an empty directory; the output
committed up to the savepoint plus the restored run's output must be every event exactly
once (checked by the scenario's usual per-key verdict over both). When the job also
writes to PostgreSQL, the refused fresh run is followed by one into an empty directory and
the used table: not fenced by the first run's fence rows, its rows exactly once after the
first run's (issue 23 hole 3).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jstormpy import JStormError
from jstormpy.connectors.file_parts import PART_RE, committed_files, parts_after
from jstormpy.master.topology_state import TopologyState
from jstormpy.testing.chaos.topologies import build_topology

REUSE_KINDS = ("fresh_run_into_used", "savepoint_into_used")
"""The fault classes of this module."""


@dataclass(frozen=True)
class SecondRun:
    """What the second run into used output did.

    Attributes:
        refused: The submit was refused (what must happen).
        message: The refusal's error message ("" if it was accepted).
        events: What was done, in order.
        error: What went wrong ("" if the refusal was as it must be and the output is
            untouched).
        checked: The directory whose ``out/`` holds the output the verdict must check.
        drained: The run that wrote the last of it (the restored run, or a second run
            that was accepted) drained.
        postgres_after: A later run also wrote to the PostgreSQL table: its rows come
            after this id (None: no later run wrote there).
    """

    refused: bool
    message: str
    events: tuple[str, ...] = field(default_factory=tuple)
    error: str = ""
    checked: Path = Path()
    drained: bool = False
    postgres_after: int | None = None


def savepoint_uri(work: Path) -> str:
    """Where ``savepoint_into_used`` writes its savepoint."""
    return f"file://{work / 'savepoint'}"


def take_savepoint(handle: Any, work: Path) -> int:
    """Savepoint the running first run (it goes on running); returns its checkpoint id."""
    from jstormpy.operations.savepoints import read_manifest

    return int(read_manifest(handle.savepoint(savepoint_uri(work)))["checkpoint_id"])


def _files(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in out.iterdir()} if out.is_dir() else {}


def second_run(kind: str, topology: str, work: Path, config: Any, cluster: Any,
               timeout_s: float, pg_dsn: str | None = None) -> SecondRun:
    """Submit ``topology`` a second time into ``work/out`` on ``cluster`` (a fresh run, or
    from the savepoint :func:`take_savepoint` wrote), and check what the user sees.

    ``config`` is the first run's; a savepoint restore after the refusal goes into
    ``work/restored/out`` with its own checkpoint store. With ``pg_dsn`` (the job also
    writes to PostgreSQL), a refused fresh run is followed by a fresh run into an empty
    ``work/second/out`` and the same, used, PostgreSQL table: the run identity keeps the
    earlier run's fence rows from fencing it (issue 23 hole 3), so it must drain without a
    restart and add its own output exactly once after the earlier run's rows.
    """
    from jstormpy.operations.savepoints import read_manifest

    out = work / "out"
    before = _files(out)
    events: list[str] = []
    uri = savepoint_uri(work) if kind == "savepoint_into_used" else None
    if uri is not None and not (work / "savepoint").exists():
        return SecondRun(False, "", ("skipped: no savepoint was taken during the first run",),
                         checked=work)
    what = "fresh run" if uri is None else "savepoint restore"
    try:
        handle = cluster.submit(build_topology(topology, work, pg_dsn=pg_dsn), config,
                                from_savepoint=uri)
    except JStormError as exc:
        message = str(exc)
        events.append(f"{what} into {out} refused: {message[:160]}")
        problems = []
        if str(out) not in message:
            problems.append(f"the refusal does not name the directory {out}: {message}")
        if _files(out) != before:
            problems.append("the refused run changed the output directory")
        if problems:
            return SecondRun(True, message, tuple(events), "; ".join(problems), work)
        if uri is None and pg_dsn is not None:
            return _fresh_into_used_postgres(topology, work, config, cluster, pg_dsn,
                                             timeout_s, events, message)
        if uri is None:
            return SecondRun(True, message, tuple(events), "", work, drained=True)
        return _restore_elsewhere(topology, work, config, cluster, uri, timeout_s, events,
                                  int(read_manifest(uri)["checkpoint_id"]), message)
    events.append(f"{what} into {out} was accepted")
    drained = False
    try:
        drained = handle.wait(timeout=timeout_s).get("state") == TopologyState.DRAINED
    except Exception as exc:  # noqa: BLE001 - reported, and the verdict shows the damage
        events.append(f"the second run ended with {type(exc).__name__}: {exc}")
    if uri is not None and not parts_after(before, int(read_manifest(uri)["checkpoint_id"])):
        # the first run committed nothing after the savepoint's checkpoint (it was stopped
        # before its later transactions were committed, or they were empty): nothing can
        # collide, so the restore is rightly accepted; the per-key check judges the output
        events.append("no part file above the savepoint's checkpoint: accepted, as it "
                      "should be")
        return SecondRun(False, "", tuple(events),
                         "" if drained else "the accepted savepoint restore did not drain",
                         work, drained=drained)
    return SecondRun(False, "", tuple(events),
                     f"a {what} into the used directory {out} was not refused", work,
                     drained=drained)


def _fresh_into_used_postgres(topology: str, work: Path, config: Any, cluster: Any,
                              pg_dsn: str, timeout_s: float, events: list[str],
                              message: str) -> SecondRun:
    """A fresh run into an empty FileSink directory and the used PostgreSQL table."""
    from jstormpy.testing.chaos.topologies import postgres_last_row

    after = postgres_last_row(pg_dsn)
    out = work / "second" / "out"
    handle = cluster.submit(build_topology(topology, work, out=out, pg_dsn=pg_dsn), config)
    status = handle.wait(timeout=timeout_s)
    events.append(f"fresh run into {out} and the used PostgreSQL table (rows after id "
                  f"{after}): {status.get('state')}, {status.get('restarts', 0)} restart(s)")
    restarts = int(status.get("restarts", 0))
    problem = "" if not restarts else (
        f"the fresh run into the used PostgreSQL table restarted {restarts} time(s) "
        f"(fenced by the earlier run's fence rows?): "
        f"{[r.get('reason') for r in status.get('recoveries', [])][:3]}")
    return SecondRun(True, message, tuple(events), problem, work / "second",
                     status.get("state") == TopologyState.DRAINED, postgres_after=after)


def _restore_elsewhere(topology: str, work: Path, config: Any, cluster: Any, uri: str,
                       timeout_s: float, events: list[str], at: int,
                       message: str) -> SecondRun:
    """What the refusal says to do: restore the savepoint into an empty directory; the
    verdict then reads the first run's output up to the savepoint plus the restored
    run's (in ``work/combined/out``)."""
    restored = work / "restored" / "out"
    config = config.replace(state_backend=f"file://{work / 'restored' / 'ckpt'}")
    handle = cluster.submit(build_topology(topology, work, out=restored), config,
                            from_savepoint=uri)
    status = handle.wait(timeout=timeout_s)
    drained = status.get("state") == TopologyState.DRAINED
    events.append(f"restored into {restored}: {status.get('state')}")
    combined = work / "combined" / "out"
    combined.mkdir(parents=True, exist_ok=True)
    kept = 0
    for path in committed_files(work / "out"):
        m = PART_RE.match(path.name)
        if m and int(m.group(1)) <= at:
            shutil.copy2(path, combined / path.name)
            kept += 1
    for path in committed_files(restored):
        if (combined / path.name).exists():
            return SecondRun(True, message, tuple(events),
                             f"restored part file {path.name} collides with the first run's",
                             work / "combined", drained)
        shutil.copy2(path, combined / path.name)
    events.append(f"checking {kept} part file(s) up to checkpoint {at} plus the restored run's")
    return SecondRun(True, message, tuple(events), "", work / "combined", drained)


__all__ = ["REUSE_KINDS", "SecondRun", "second_run", "take_savepoint"]
