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
writes to PostgreSQL, a Redis stream or a Kafka topic
(:mod:`jstormpy.testing.chaos.brokers`), the refused fresh run is followed by one into an
empty directory and the used table, stream and topic: not fenced by the first run's fence
rows or keys, and a worker SIGKILLed in a sink between complete and commit of checkpoint 2
(:data:`SECOND_RUN_CRASH`, on a worker holding a Kafka sink task), whose transactions the
recovery must re-commit, not take for the first run's committed 2 (issue 23 hole 3). Its
output must be exactly once after the first run's in each of them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jstormpy import JStormError
from jstormpy.api.topology import Topology, assign_tasks
from jstormpy.connectors.file_parts import PART_RE, committed_files, parts_after
from jstormpy.master.topology_state import TopologyState
from jstormpy.testing.chaos.brokers import BrokerMark, BrokerOutputs
from jstormpy.testing.chaos.kills import describe_fired_fault
from jstormpy.testing.chaos.topologies import build_topology

REUSE_KINDS = ("fresh_run_into_used", "savepoint_into_used")
"""The fault classes of this module."""
SECOND_RUN_CRASH = "sink_before_commit@2"
"""The fault point (:mod:`jstormpy.faults`) armed in the fresh run into used external
outputs, on one worker (:func:`second_run_environment`): the first of its sink tasks told
that checkpoint 2 completed SIGKILLs the worker before committing it, so its other sink
tasks have not committed 2 either."""
EXTERNAL_SINKS = ("kafka", "redis", "pg")
"""The ``stateful`` job's sinks into external systems; the crash of
:data:`SECOND_RUN_CRASH` goes to the worker of the first one present's first task."""


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
        brokers_after: A later run also wrote to the Redis stream / Kafka topic: its
            output comes after this mark (None: no later run wrote there).
    """

    refused: bool
    message: str
    events: tuple[str, ...] = field(default_factory=tuple)
    error: str = ""
    checked: Path = Path()
    drained: bool = False
    postgres_after: int | None = None
    brokers_after: BrokerMark | None = None


def savepoint_uri(work: Path) -> str:
    """Where ``savepoint_into_used`` writes its savepoint."""
    return f"file://{work / 'savepoint'}"


def take_savepoint(handle: Any, work: Path) -> int:
    """Savepoint the running first run (it goes on running); returns its checkpoint id."""
    from jstormpy.operations.savepoints import read_manifest

    return int(read_manifest(handle.savepoint(savepoint_uri(work)))["checkpoint_id"])


def _files(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in out.iterdir()} if out.is_dir() else {}


def second_run_environment(kind: str, work: Path, topology: Topology,
                           workers: int) -> dict[str, str]:
    """The environment of the cluster the second run goes to: for ``fresh_run_into_used``
    of a ``topology`` with external sinks (:data:`EXTERNAL_SINKS`), :data:`SECOND_RUN_CRASH`
    armed on the worker of the first external sink's first task (Kafka's, when the job
    writes there: the sink whose commit log a recovery reads) among ``workers``; fired at
    most once, marked in ``work/faults``."""
    tasks = topology.task_ids()
    external = [c for c in EXTERNAL_SINKS if c in tasks]
    if kind != "fresh_run_into_used" or not external:
        return {}
    worker = assign_tasks(tasks, workers)[tasks[external[0]][0]]
    folder = work / "faults"
    folder.mkdir(parents=True, exist_ok=True)
    return {"JSTORM_FAULTS": f"{SECOND_RUN_CRASH}@{worker}", "JSTORM_FAULT_DIR": str(folder)}


def second_run(kind: str, topology: str, work: Path, config: Any, cluster: Any,
               timeout_s: float, pg_dsn: str | None = None,
               brokers: BrokerOutputs | None = None) -> SecondRun:
    """Submit ``topology`` a second time into ``work/out`` on ``cluster`` (a fresh run, or
    from the savepoint :func:`take_savepoint` wrote), and check what the user sees.

    ``config`` is the first run's; a savepoint restore after the refusal goes into
    ``work/restored/out`` with its own checkpoint store. With ``pg_dsn`` or ``brokers``
    (the job also writes to PostgreSQL, Redis, Kafka), a refused fresh run is followed by a
    fresh run into an empty ``work/second/out`` and the same, used, table, stream and
    topic, on a ``cluster`` with :func:`second_run_environment`: the run identity keeps
    the earlier run's fence rows from fencing it and its commit log from answering for
    this run's checkpoint ids (issue 23 hole 3), so it must drain with no restart but the
    armed crash's, and add its own output exactly once after the earlier run's.
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
        if uri is None and (pg_dsn is not None or brokers is not None):
            return _fresh_into_used_external(topology, work, config, cluster, pg_dsn,
                                             brokers, timeout_s, events, message)
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


def _fresh_into_used_external(topology: str, work: Path, config: Any, cluster: Any,
                              pg_dsn: str | None, brokers: BrokerOutputs | None,
                              timeout_s: float, events: list[str],
                              message: str) -> SecondRun:
    """A fresh run into an empty FileSink directory and the used PostgreSQL table, Redis
    stream and Kafka topic, with :data:`SECOND_RUN_CRASH` armed."""
    from jstormpy.testing.chaos.topologies import postgres_last_row

    after = None if pg_dsn is None else postgres_last_row(pg_dsn)
    mark = None if brokers is None else brokers.mark()
    out = work / "second" / "out"
    handle = cluster.submit(build_topology(topology, work, out=out, pg_dsn=pg_dsn,
                                           brokers=brokers), config)
    status = handle.wait(timeout=timeout_s)
    b = brokers or BrokerOutputs()
    used = ", ".join(what for what, on in (("PostgreSQL table", pg_dsn),
                                           ("Redis stream", b.redis_url),
                                           ("Kafka topic", b.kafka_bootstrap)) if on)
    events.append(f"fresh run into {out} and the used {used}: {status.get('state')}, "
                  f"{status.get('restarts', 0)} restart(s)")
    folder = work / "faults"
    fired = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    events += [f"fault point fired: {describe_fired_fault(f)}" for f in fired]
    restarts = int(status.get("restarts", 0))
    reasons = [str(r.get("reason")) for r in status.get("recoveries", [])]
    fenced = [r for r in reasons if "fenc" in r.lower()]
    problem = ""
    if fenced or restarts > len(fired):
        problem = (f"the fresh run into the used outputs restarted {restarts} time(s) "
                   f"({len(fired)} crash(es) armed fired; fenced by the earlier run's "
                   f"fence rows?): {(fenced or reasons)[:3]}")
    return SecondRun(True, message, tuple(events), problem, work / "second",
                     status.get("state") == TopologyState.DRAINED, postgres_after=after,
                     brokers_after=mark)


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


__all__ = ["EXTERNAL_SINKS", "REUSE_KINDS", "SECOND_RUN_CRASH", "SecondRun", "second_run",
           "second_run_environment", "take_savepoint"]
