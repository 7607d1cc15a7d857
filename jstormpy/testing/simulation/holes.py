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

from jstormpy.barrier.snapshots import TaskSnapshots
from jstormpy.barrier.transactions import SinkTransactions
from jstormpy.keygroups import redistribute
from jstormpy.master.restore_plan import RestorePlan
from jstormpy.testing.simulation import cluster, outputs
from jstormpy.testing.simulation.faults import ALL_FAULTS, Fault


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
    # one commit log per sink task, whatever the run
    return _patches((outputs, "commit_log_key", lambda tid, run: tid))


def _hole4() -> contextlib.AbstractContextManager[Any]:
    return _patches((outputs.SimOutput, "check_savepoint_restore", lambda self, cid: None),
                    (outputs.SimOutput, "check_fresh_run", lambda self: None))


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
    # issue 23, seed 1032215 in PostgreSQL/Redis: a commit that finds nothing staged is
    # "committed already", even for a transaction a recovery discarded
    return _patches((outputs.SimOutput, "check_not_abandoned", lambda self, *args: None))


HOLES: dict[int, tuple[str, Callable[[], contextlib.AbstractContextManager[Any]]]] = {
    1: ("a failed checkpoint listing read as 'no checkpoints'", _hole1),
    2: ("sinks recover to the id floor, not the restored checkpoint", _hole2),
    3: ("one commit log per sink task across runs", _hole3),
    4: ("a savepoint restore or fresh run into used FileSink output", _hole4),
    5: ("key groups merged per group, not per state name", _hole5),
    6: ("snapshots of a stopped task still report", _hole6),
    7: ("a generation handed out without being stored", _hole7),
    8: ("a deposed leader's late commit point restored (issue 27)", _hole8),
    9: ("a discarded PostgreSQL/Redis transaction committed as a no-op", _hole9),
}

HOLE_FAULTS: dict[int, tuple[Fault, ...]] = {
    7: (Fault.META_WRITE_ERROR, Fault.TM_CRASH),
    8: (Fault.LEADER_DEPOSED, Fault.WORKER_CRASH, Fault.MESSAGE_LOSS, Fault.MESSAGE_DELAY),
    9: (Fault.SAVEPOINT_INTO_USED, Fault.SHARED_FILE_LOSS, Fault.WORKER_CRASH),
}
"""The fault kinds a hole's hunt draws from, where not every kind: hole 7 needs a failed
write of ``meta/`` and then a TM crash before any other write of it succeeds; among every
kind (which since the ids record, issue 23, write ``meta/`` more often) that is rarer than
one seed in 20,000. Hole 8 needs a deposed leader and then a recovery of the new one (a
worker lost) after the late commit point landed and before the new leader's own
checkpoints passed it. Hole 9 needs a savepoint restore into used output, the first run's
fallback past the savepoint's checkpoint (a lost shared file) and a sink task that had not
committed that checkpoint (a worker crash), with the ``staged`` sink."""


@contextlib.contextmanager
def _patches(*patches: tuple[Any, str, Any]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for target, name, value in patches:
            stack.enter_context(mock.patch.object(target, name, value))
        yield


def reintroduced(hole: int) -> contextlib.AbstractContextManager[Any]:
    """A context in which hole ``hole`` is back in the code."""
    return HOLES[hole][1]()


def hole_faults(hole: int) -> tuple[Fault, ...]:
    """The fault kinds that hunt hole ``hole`` (:data:`HOLE_FAULTS`, else every kind)."""
    return HOLE_FAULTS.get(hole, ALL_FAULTS)
