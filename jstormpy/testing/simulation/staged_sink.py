"""The ``"staged"`` sink of the simulator: the real two-phase-commit sink base over a
simulated external system (issue 37).

PostgresSink and RedisStreamSink are
:class:`~jstormpy.connectors.twophase.TwoPhaseCommitSink` s: the base decides what a
recovery commits, discards or records (``recover``, ``resolve_staged``), whose record of
discarded transactions a commit consults (``abandoned_owner``), and the error a commit of
a discarded transaction raises (``abandoned_error``); the connector only stores.
:class:`SimStagedSink` is such a connector whose storage is a
:class:`~jstormpy.testing.simulation.outputs.SimOutput`, keyed as the Redis sink keys its
own (docs/connectors.md):

* staged transactions per (topology, task, id): their names carry no run, so a task of
  any run or generation sees them;
* the fencing token per (:attr:`~TwoPhaseCommitSink.fence_owner`, task): staging needs
  this generation's token, publishing and discarding refuse an older generation
  (:class:`~jstormpy.api.errors.FencedError`);
* the record of discarded (abandoned) transactions per (run, task).

Every call first asks the system whether it is reachable: while the fault plan holds it
down (``SimOutput.down``), :class:`~jstormpy.api.errors.SinkUnavailableError`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import FencedError
from jstormpy.connectors.twophase import TwoPhaseCommitSink
from jstormpy.run_identity import RunIdentity
from jstormpy.testing.simulation.outputs import Row, SimOutput

TOPOLOGY = "simulated"
"""The simulated job's topology name (every run of it uses the same one)."""


class SimStagedSink(TwoPhaseCommitSink):
    """A :class:`TwoPhaseCommitSink` storing in a simulated external system (module doc).

    Args:
        output: The external system, shared by every task and run writing to it.
    """

    def __init__(self, output: SimOutput) -> None:
        self.output = output

    def row_of(self, tup: Tuple) -> Any:
        """The simulator writes :class:`Row` s, stored as they are."""
        return tup

    def stage_rows(self, checkpoint_id: int, rows: list[Row]) -> None:
        """The task's open transaction ``checkpoint_id`` is ``rows``: buffer them and
        pre-commit (the engine's ``begin``, ``write`` s and ``pre_commit``)."""
        self.begin(checkpoint_id)
        for row in rows:
            self.write(cast(Tuple, row))
        self.pre_commit(checkpoint_id)

    # -- the connector's storage steps -----------------------------------------------------
    def stage_transaction(self, checkpoint_id: int, rows: list[Any]) -> None:
        """Stage ``rows`` (an empty transaction stages nothing, as PostgreSQL and Redis)."""
        self._fence(f"staging {self.transaction_name(checkpoint_id)}", exact=True)
        if rows:
            self.output.staged[self._key(checkpoint_id)] = list(rows)

    def commit_transaction(self, checkpoint_id: int) -> None:
        """Publish staged ``checkpoint_id``; if it is not staged, refuse when the owning
        run's record holds it (:meth:`abandoned_owner`), else it is committed already."""
        self._fence(f"committing {self.transaction_name(checkpoint_id)}", exact=False)
        rows = self.output.staged.pop(self._key(checkpoint_id), None)
        if rows is not None:
            self.output.rows.extend(rows)
        elif self.was_abandoned(self.abandoned_owner(checkpoint_id), checkpoint_id):
            raise self.abandoned_error(checkpoint_id, "the simulated external system")

    def abort_transaction(self, checkpoint_id: int) -> None:
        """Discard staged ``checkpoint_id`` (no-op if it is not staged)."""
        self._fence(f"aborting {self.transaction_name(checkpoint_id)}", exact=False)
        self.output.staged.pop(self._key(checkpoint_id), None)

    def abandon_transaction(self, checkpoint_id: int) -> None:
        """Record ``checkpoint_id`` under this run, then discard it (one step)."""
        self._fence(f"abandoning {self.transaction_name(checkpoint_id)}", exact=False)
        if self.output.staged.pop(self._key(checkpoint_id), None) is not None:
            self.output.abandoned.setdefault((self.fence_owner, self.task_id),
                                             set()).add(checkpoint_id)

    def staged_transactions(self) -> list[int]:
        """The ids this task has staged (by any run or generation)."""
        self.output.check_up()
        return sorted(txn for top, task, txn in self.output.staged
                      if top == self.topology and task == self.task_id)

    def fence_installed(self) -> bool:
        """Whether this run holds a fencing token for the task."""
        self.output.check_up()
        return (self.fence_owner, self.task_id) in self.output.fences

    def install_fence(self) -> None:
        """Make this generation the task's token (refused if a newer one holds it)."""
        self._fence("installing the fence", exact=False)
        self.output.fences[(self.fence_owner, self.task_id)] = self.generation

    def was_abandoned(self, owner: str, checkpoint_id: int) -> bool:
        """Whether ``owner``'s record holds ``checkpoint_id`` (a recovery discarded it)."""
        return checkpoint_id in self.output.abandoned.get((owner, self.task_id), ())

    # -- helpers ---------------------------------------------------------------------------
    def _key(self, checkpoint_id: int) -> tuple[str, int, int]:
        return (self.topology, self.task_id, checkpoint_id)

    def _fence(self, doing: str, exact: bool) -> None:
        """Reachable, and not fenced: a newer token refuses every step; staging also needs
        this generation's own (``exact``)."""
        self.output.check_up()
        token = self.output.fences.get((self.fence_owner, self.task_id), 0)
        if token > self.generation or (exact and token != self.generation):
            raise FencedError(f"{type(self).__name__} task {self.task_id} generation "
                              f"{self.generation} is fenced (token {token}): not {doing}")


def open_staged_sink(output: SimOutput, run: RunIdentity,
                     earlier: tuple[RunIdentity, int] | None, task_id: int,
                     task_index: int, worker_id: int, generation: int) -> SimStagedSink:
    """A prepared :class:`SimStagedSink` for one task incarnation. ``earlier``: the run a
    savepoint restore started from and the savepoint's checkpoint id (the context's run
    identity says so, as ``RunIdentity.from_savepoint`` does)."""
    if earlier is not None:
        run = replace(run, restored_from=earlier[0].job_id, restored_through=earlier[1])
    sink = SimStagedSink(output)
    sink.prepare({}, TopologyContext(topology=TOPOLOGY, component="sink", task_id=task_id,
                                     task_index=task_index, worker_id=worker_id,
                                     generation=generation, run=run))
    return sink
