"""The run identity: which run of a topology a checkpoint, an output or a fence belongs to.

A topology name is reused: the same ``jstorm run FILE`` is submitted again (a *fresh run*),
restarted from a savepoint (a *savepoint restore*), or continued after its Topology Master
or launcher died (a *resume*). Checkpoint ids and generations restart with every new run,
so anything a sink leaves in an external system keyed only by topology name and checkpoint
id (a Kafka commit log, PostgreSQL/Redis fence rows, part-file names) would be mistaken
for this run's by the next one. :class:`RunIdentity` names the run instead:

==================  ==================================================================
fresh run           a new ``job_id``; trusts nothing an earlier run left (commit-log
                    entries, fence rows are looked up under its own ``job_id`` only)
savepoint restore   a new ``job_id`` too, with ``restored_from`` = the ``job_id`` of the
                    run that took the savepoint and ``restored_through`` = the savepoint's
                    checkpoint id: transactions ``<= restored_through`` belong to that run
resume              the same ``job_id`` (the run continues): a Topology Master that takes
                    the run over bumps ``epoch``
==================  ==================================================================

The Topology Master keeps the identity in the state backend (``meta/run``, next to the
generation counter), records it in every checkpoint's metadata and in savepoints, and the
workers read it from there after fetching the topology (it is written before the TM
serves); tasks see it as ``TopologyContext.run``. See docs/checkpointing.md, "Run identity".
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from jstormpy.api.errors import JStormError

__all__ = ["RUN_META", "RunIdentity", "load_run_identity", "store_run_identity",
           "take_over_run"]

RUN_META = "run"
"""The state backend's meta object holding the current run identity (JSON)."""


class MetaStore(Protocol):
    """The two calls of a state backend the run identity needs."""

    def get_meta(self, name: str) -> bytes | None: ...

    def put_meta(self, name: str, data: bytes) -> None: ...


@dataclass(frozen=True)
class RunIdentity:
    """One run of a topology: ``job_id`` + ``epoch``.

    Attributes:
        job_id: Unique per run (a fresh run and a savepoint restore each get a new one;
            a resume keeps it). Sinks namespace what they leave in external systems with
            it: commit-log entries, fence rows.
        epoch: A plain increasing number: the Topology Master incarnation driving the run
            (1 for the first; every TM that takes the run over, e.g. one restarted with
            ``--resume``, bumps it). Not part of any sink namespace: a resume continues
            the same outputs.
        restored_from: The ``job_id`` of the run a savepoint restore started from ("" for
            a fresh run, or a savepoint of a run older than run identities).
        restored_through: The savepoint's checkpoint id (0 for a fresh run): transactions
            with ids up to it were the earlier run's, which committed them.

    Example:
        >>> run = RunIdentity("3f2a9c01b7de", 1)
        >>> run.taken_over().epoch
        2
    """

    job_id: str
    epoch: int = 1
    restored_from: str = ""
    restored_through: int = 0

    def __post_init__(self) -> None:
        if not self.job_id or not all(c.isalnum() or c in "-_" for c in self.job_id):
            raise JStormError(f"run identity job_id {self.job_id!r} must be a non-empty "
                              "string of letters, digits, '-' and '_'")
        if self.epoch < 0 or self.restored_through < 0:
            raise JStormError(f"run identity {self!r}: epoch and restored_through must be >= 0")

    @classmethod
    def fresh(cls) -> RunIdentity:
        """A new run (no earlier run's leftovers are trusted)."""
        return cls(uuid.uuid4().hex[:16], 1)

    @classmethod
    def from_savepoint(cls, parent: RunIdentity | None, checkpoint_id: int) -> RunIdentity:
        """A new run starting from a savepoint of ``parent`` taken at ``checkpoint_id``
        (epoch 0: the Topology Master that starts it takes it over as epoch 1)."""
        return cls(uuid.uuid4().hex[:16], 0, parent.job_id if parent else "", checkpoint_id)

    def taken_over(self) -> RunIdentity:
        """The same run, driven by the next Topology Master incarnation."""
        return replace(self, epoch=self.epoch + 1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (checkpoint metadata, savepoint manifests)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> RunIdentity | None:
        """The identity in ``data`` (a :meth:`to_dict`), or None if ``data`` holds none."""
        if not isinstance(data, dict) or not data.get("job_id"):
            return None
        return cls(str(data["job_id"]), int(data.get("epoch", 1)),
                   str(data.get("restored_from", "")), int(data.get("restored_through", 0)))

    def __str__(self) -> str:
        return f"run {self.job_id} (epoch {self.epoch})"


def load_run_identity(store: MetaStore) -> RunIdentity | None:
    """The run identity kept in a state backend, or None (none written yet)."""
    raw = store.get_meta(RUN_META)
    if not raw:
        return None
    try:
        return RunIdentity.from_dict(json.loads(raw.decode()))
    except (ValueError, UnicodeDecodeError) as exc:
        raise JStormError(f"the state backend's meta/{RUN_META} is not a run identity "
                          f"({exc}); remove it to start a fresh run") from exc


def store_run_identity(store: MetaStore, run: RunIdentity) -> None:
    """Keep ``run`` as the state backend's current run identity."""
    store.put_meta(RUN_META, json.dumps(run.to_dict(), sort_keys=True).encode())


def take_over_run(store: MetaStore, resume: bool) -> RunIdentity | None:
    """What a starting Topology Master runs as, stored before it serves any worker.

    ``resume`` (a TM restart, or a savepoint restore prepared by the launcher): the stored
    run, one epoch later. Otherwise a fresh run. None when resuming a run that an older
    version started (nothing stored): it continues under the names it started with (no
    run namespace) until its next fresh start.
    """
    if resume:
        current = load_run_identity(store)
        if current is None:
            return None
        run = current.taken_over()
    else:
        run = RunIdentity.fresh()
    store_run_identity(store, run)
    return run
