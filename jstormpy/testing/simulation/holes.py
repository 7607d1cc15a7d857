"""The exactly-once holes of issue 23, re-introduced one at a time into the real code.

Each entry patches the production object (or the connector function) back to the
behaviour the hole had, for the duration of a ``with`` block. ``jstorm simulate --hole N``
and the simulator's tests use them to show the simulator finds every hole: a seed that
passes on the real code and fails with the hole.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from jstormpy.barrier import task_barrier
from jstormpy.barrier.snapshots import TaskSnapshots
from jstormpy.barrier.transactions import SinkTransactions
from jstormpy.connectors import kafka
from jstormpy.connectors.sinks import FileSink
from jstormpy.key_filter import KeyFilter
from jstormpy.keygroups import key_group, redistribute, task_index_for_key_group
from jstormpy.master.restore_plan import RestorePlan
from jstormpy.state_store import FrozenStore, RocksDBStore, RocksState, Stamped
from jstormpy.testing.simulation import cluster
from jstormpy.testing.simulation.faults import ALL_FAULTS, Fault
from jstormpy.testing.simulation.staged_sink import SimStagedSink


def _hole1() -> contextlib.AbstractContextManager[Any]:
    # a failed listing read as "no checkpoints", and no floor check
    return _patches(
        (RestorePlan, "listing_failed", lambda self, error: self.listed([])),
        (RestorePlan, "_short_listing", lambda self, target: ""))


def _hole2() -> contextlib.AbstractContextManager[Any]:
    real = SinkTransactions.restore

    def restore(self: SinkTransactions, restored: int | None, id_floor: int = 0) -> Any:
        return real(self, max(restored or 0, id_floor) if id_floor else restored, id_floor)
    return _patches((SinkTransactions, "restore", restore))


def _hole3() -> contextlib.AbstractContextManager[Any]:
    # one commit log per sink task, whatever the run (KafkaSink's key of its entries)
    return _patches((kafka, "commit_log_key", lambda tid, run: tid))


def _hole4() -> contextlib.AbstractContextManager[Any]:
    # the launcher's checks of used FileSink output, gone
    return _patches((FileSink, "check_savepoint_restore", lambda self, cid: None),
                    (FileSink, "check_fresh_run", lambda self: None))


def _hole5() -> contextlib.AbstractContextManager[Any]:
    return _patches((cluster, "redistribute", functools.partial(redistribute,
                                                                keyed_state=False)))


def _hole6() -> contextlib.AbstractContextManager[Any]:
    # snapshotters of a stopped task report on
    return _patches((TaskSnapshots, "stop", lambda self: None))


def _hole7() -> contextlib.AbstractContextManager[Any]:
    # a generation that could not be stored is handed out anyway
    return _patches((RestorePlan, "generation_not_persisted",
                     lambda self, error: self._choose()))


def _hole8() -> contextlib.AbstractContextManager[Any]:
    # issue 27: an older epoch's commit point that landed late is restored like any other
    return _patches((RestorePlan, "_late_commit_point", lambda self, cid, metadata: ""))


def _hole9() -> contextlib.AbstractContextManager[Any]:
    # a RocksDB restore that stamps the restored TTL entries with the time of the restore
    real = RocksDBStore.adopt

    def adopt(self: RocksDBStore, states: dict[str, Any]) -> None:
        for name, current in list(states.items()):
            if isinstance(current, dict):
                states[name] = {k: Stamped(self.clock(), v.value) if isinstance(v, Stamped)
                                else v for k, v in current.items()}
        real(self, states)
    return _patches((RocksDBStore, "adopt", adopt))


class _LiveState:
    """Hole 10's "frozen" state: the live database as it is when the upload reads it."""

    def __init__(self, frozen: FrozenStore, name: str, ttl_ms: int | None) -> None:
        self.frozen, self.name, self.ttl_ms = frozen, name, ttl_ms

    def items(self) -> Iterator[tuple[Any, Any]]:
        store = self.frozen.source
        if store is None or self.name not in store.families:
            return iter(())  # the task stopped (its database closed): nothing reports it
        horizon = float("-inf") if self.ttl_ms is None else self.frozen.now_ms - self.ttl_ms
        view = RocksState(store, self.name, store.families[self.name])
        return ((k, v) for k, v in view.raw_items()
                if v.__class__ is not Stamped or v.written_ms > horizon)


def _hole10() -> contextlib.AbstractContextManager[Any]:
    # a snapshot that reads the live database when its upload runs, not the checkpoint
    # frozen at the barrier: writes made after the barrier leak into it
    return _patches((FrozenStore, "state",
                     lambda self, name, ttl_ms, groups=None: _LiveState(self, name, ttl_ms)))


def _hole11() -> contextlib.AbstractContextManager[Any]:
    # issue 23, seed 1032215 in PostgreSQL/Redis: a commit that finds nothing staged is
    # "committed already", even for a transaction a recovery discarded
    return _patches((SimStagedSink, "was_abandoned", lambda self, *args: False))


def _hole12() -> contextlib.AbstractContextManager[Any]:
    # issue 37's audit: a rescale that places each key by the old parallelism (the task
    # index that owned its key group before), not by the new one
    real = redistribute

    def misplaced(component: str, snapshots: Any, new_parallelism: int,
                  max_parallelism: int, hook: Any = None,
                  keyed_state: bool = True) -> list[dict[str, Any]]:
        out = real(component, snapshots, new_parallelism, max_parallelism, hook, keyed_state)
        if len(snapshots) == new_parallelism:
            return out
        parts: list[dict[str, dict[Any, Any]]] = [{} for _ in out]
        for snap in out:
            for name, entries in snap.get("states", {}).items():
                for key, value in entries.items():
                    old = task_index_for_key_group(max_parallelism, len(snapshots),
                                                   key_group(key, max_parallelism))
                    parts[old % new_parallelism].setdefault(name, {})[key] = value
        return [{**snap, "states": parts[i]} for i, snap in enumerate(out)]
    return _patches((cluster, "redistribute", misplaced))


def _hole13() -> contextlib.AbstractContextManager[Any]:
    # issue 37: a sink's steps at a barrier with its capture before its pre-commit, in the
    # one step list every runtime performs (the snapshot does not name the transaction
    # the barrier stages)
    real = task_barrier.TaskBarrier.steps

    def steps(self: task_barrier.TaskBarrier) -> tuple[task_barrier.BarrierStep, ...]:
        out = list(real(self))
        if self.kind is task_barrier.TaskKind.SINK:
            stage = out.index(task_barrier.Stage())
            capture = out.index(task_barrier.Capture(self.stateful))
            out[stage], out[capture] = out[capture], out[stage]
        return tuple(out)
    return _patches((task_barrier.TaskBarrier, "steps", steps))


def _hole14() -> contextlib.AbstractContextManager[Any]:
    # issue 34's key filter: a state opened on a restored database's files trusts a key
    # filter that no scan of those files filled (reads of restored keys skip RocksDB)
    real = RocksDBStore.open_restored

    def open_restored(self: RocksDBStore, *args: Any, **kwargs: Any) -> Any:
        states = real(self, *args, **kwargs)
        for keys in self.state_keys.values():
            keys.stop()
            keys.trusted = KeyFilter(self.key_filter_capacity)
        return states
    return _patches((RocksDBStore, "open_restored", open_restored))


HOLES: dict[int, tuple[str, Callable[[], contextlib.AbstractContextManager[Any]]]] = {
    1: ("a failed checkpoint listing read as 'no checkpoints'", _hole1),
    2: ("sinks recover to the id floor, not the restored checkpoint", _hole2),
    3: ("one commit log per sink task across runs", _hole3),
    4: ("a savepoint restore or fresh run into used FileSink output", _hole4),
    5: ("key groups merged per group, not per state name", _hole5),
    6: ("snapshots of a stopped task still report", _hole6),
    7: ("a generation handed out without being stored", _hole7),
    8: ("a deposed leader's late commit point restored (issue 27)", _hole8),
    9: ("a RocksDB restore restamps its TTL entries (issue 25)", _hole9),
    10: ("a RocksDB snapshot reads the live database, not the barrier's (issue 25)",
         _hole10),
    11: ("a discarded PostgreSQL/Redis transaction committed as a no-op", _hole11),
    12: ("a rescale that places keys by the old parallelism (issue 37)", _hole12),
    13: ("a sink captures its snapshot before it stages the barrier's transaction "
         "(issue 37)", _hole13),
    14: ("a restored RocksDB state trusts a key filter no scan filled (issue 34)",
         _hole14),
}

HOLE_FAULTS: dict[int, tuple[Fault, ...]] = {
    1: tuple(f for f in ALL_FAULTS if f is not Fault.MULTILANG_SPOUT),
    7: (Fault.META_WRITE_ERROR, Fault.TM_CRASH),
    8: (Fault.LEADER_DEPOSED, Fault.WORKER_CRASH, Fault.MESSAGE_LOSS, Fault.MESSAGE_DELAY),
    9: (Fault.ROCKSDB_TTL, Fault.WORKER_CRASH, Fault.TM_CRASH),
    10: (Fault.ROCKSDB_TTL, Fault.WORKER_CRASH, Fault.TM_CRASH, Fault.SLOW_STORAGE),
    11: (Fault.SAVEPOINT_INTO_USED, Fault.SHARED_FILE_LOSS, Fault.WORKER_CRASH),
    14: (Fault.ROCKSDB_TTL, Fault.WORKER_CRASH, Fault.TM_CRASH),
}
"""The fault kinds a hole's hunt draws from, where not every kind: hole 1 draws from the
kinds there were before ``multilang_spout`` (one more kind changed every seed's draw, and
the CI's 3,000 seeds no longer held a failed listing followed by a recovery); hole 7 needs a failed
write of ``meta/`` and then a TM crash before any other write of it succeeds; among every
kind (which since the ids record, issue 23, write ``meta/`` more often) that is rarer than
one seed in 20,000. Hole 8 needs a deposed leader and then a recovery of the new one (a
worker lost) after the late commit point landed and before the new leader's own
checkpoints passed it. Holes 9, 10 and 14 need the counter on RocksDB (drawn from every
kind, a seed keeps ``rocksdb_ttl`` one time in four) and a restore; hole 10 an upload that
starts late, which slow storage makes likelier. Hole 11 needs a savepoint restore into
used output, the first run's fallback past the savepoint's checkpoint (a lost shared
file) and a sink task that had not committed that checkpoint (a worker crash), with the
``staged`` sink."""


@contextlib.contextmanager
def _patches(*patches: tuple[Any, str, Any]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for target, name, value in patches:
            stack.enter_context(mock.patch.object(target, name, value))
        yield


def reintroduced(hole: int) -> contextlib.AbstractContextManager[Any]:
    """A context in which hole ``hole`` is back in the code."""
    return HOLES[hole][1]()


HOLE_SINKS: dict[int, str] = {3: "log", 11: "staged"}
"""The sink kind a hole's hunt runs every seed with, where the hole lives in one: hole 3
is in KafkaSink's commit log (``log``), which a seed draws one time in four, hole 11 in
the PostgreSQL/Redis sinks' resolution (``staged``), also one time in four
(``scenario.run_seed``'s ``sink``)."""


def hole_sink(hole: int) -> str | None:
    """The sink kind that hunts hole ``hole`` (:data:`HOLE_SINKS`, else each seed's own)."""
    return HOLE_SINKS.get(hole)


def hole_faults(hole: int) -> tuple[Fault, ...]:
    """The fault kinds that hunt hole ``hole`` (:data:`HOLE_FAULTS`, else every kind)."""
    return HOLE_FAULTS.get(hole, ALL_FAULTS)
