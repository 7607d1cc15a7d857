"""The faults a simulation injects, and one seed's plan of them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from jstormpy.testing.simulation.world import World


class Fault(enum.Enum):
    """A kind of fault (``jstorm simulate --faults`` takes their values)."""

    WORKER_CRASH = "worker_crash"
    """A worker process dies (its tasks, queued frames and callbacks with it) and restarts."""
    TM_CRASH = "tm_crash"
    """The Topology Master dies and restarts from what it stored."""
    MESSAGE_DELAY = "message_delay"
    """Control and data messages take up to 30x longer (reordering across channels)."""
    MESSAGE_DUPLICATE = "message_duplicate"
    """A control message is delivered twice (a retried RPC)."""
    MESSAGE_LOSS = "message_loss"
    """A control message is lost with its connection: the TM sees the worker as lost."""
    LISTING_ERROR = "listing_error"
    """Listing the completed checkpoints fails."""
    LISTING_SHORT = "listing_short"
    """A listing answers without its newest entries (a store that lags or is remounted)."""
    READ_ERROR = "read_error"
    """Reading a snapshot or metadata fails."""
    WRITE_ERROR = "write_error"
    """Writing a snapshot fails."""
    METADATA_WRITE_ERROR = "metadata_write_error"
    """Writing a checkpoint's metadata (the commit point) fails."""
    METADATA_TIMEOUT = "metadata_timeout"
    """A metadata write reports a timeout but lands later."""
    PARTIAL_WRITE = "partial_write"
    """A snapshot write fails after leaving a partial object behind."""
    META_WRITE_ERROR = "meta_write_error"
    """Storing the generation counter or the completed floor fails."""
    SLOW_STORAGE = "slow_storage"
    """Some storage calls answer up to 100x slower (uploads outlive a recovery)."""
    DISK_FULL = "disk_full"
    """For a while every write fails."""
    SINK_UNAVAILABLE = "sink_unavailable"
    """The external system of a sink is unavailable for a while."""
    FRESH_RUN_INTO_USED = "fresh_run_into_used"
    """A second, fresh run writes into the outputs of a first run."""
    SAVEPOINT_INTO_USED = "savepoint_into_used"
    """A run restored from a savepoint writes into outputs used after the savepoint."""
    RESCALE = "rescale"
    """The bolts are rescaled at a quiescent checkpoint."""
    GRAY_RELEASE = "gray_release"
    """One worker is restarted on new code at a quiescent checkpoint (master/upgrade.py)."""
    SHARED_FILES = "shared_files"
    """Keyed state is checkpointed incrementally: each snapshot writes only a new shared file
    (a delta, or a base every few) and references the older ones, as the incremental
    changelog and the RocksDB store's SST files do; retention deletes a shared file once no
    retained checkpoint references it (the real ``state_backends/shared_files.py``)."""
    LEADER_DEPOSED = "leader_deposed"
    """The Topology Master is deposed while a commit point is being written (an ``--ha``
    leader whose lease ran out): it stops at once, a standby takes the run over in the
    next epoch, and the old write lands at any moment, often after the standby listed
    the checkpoints and restored an older one."""
    SHARED_FILE_LOSS = "shared_file_loss"
    """With shared files, one of them disappears from storage (an operator's cleanup, a lost
    disk): a restore that needs it must fall back or fail naming it, never restore less."""
    LOCAL_RECOVERY = "local_recovery"
    """With shared files, a worker keeps local copies of its tasks' files (those of the last
    upload and the one before, completed or not) and a task restored on it takes a copy
    only if it has the size and CRC-32 the restored snapshot records (the real
    ``rocksdb_files.local_copy_matches``), downloading the rest; the fault garbles,
    truncates, deletes or replaces a copy (another generation's file under its name)."""
    STATE_TTL = "state_ttl"
    """The counter keeps a second state with a TTL (``self.state(name, ttl_ms=...)``: the
    real memory store's ``TtlState`` on the simulated clock); an entry not written for
    ``ttl_ms`` is invisible, and no restore, rescale or savepoint may resurrect it."""
    ROCKSDB_TTL = "rocksdb_ttl"
    """As ``state_ttl``, with the TTL state on the real RocksDB store (``RocksState``, its
    clock the simulated one): snapshots freeze the database at the barrier and leave out
    what expired by then, restores fill a fresh database (``stores.py``)."""
    MULTILANG_SPOUT = "multilang_spout"
    """The spouts are Storm multilang spouts (``jstormpy.multilang.ShellSpout``): no offset,
    a subprocess over a durable queue that emits every record it was not acked for, with
    message ids, and re-emits on ``fail``. The host side is the real ``AckLedger``: ids
    acked only when the checkpoint covering them completes, the subprocess kept across a
    rollback on a surviving worker and failed every id after the restored checkpoint, a
    re-emitted id the restored checkpoint covers dropped. The fault: a subprocess lost
    with tuples in flight (its task fails). No lifecycle fault runs with it (the queue
    outlives a run)."""


ALL_FAULTS = tuple(Fault)
MAX_HITS = 6
TTL_CHOICES_MS = (4, 8, 20, 60)
"""A ``state_ttl`` seed's TTL: around the records' spacing (0.5-3 ms per spout), so some
entries expire between two records of their key and some across a recovery."""
LIFECYCLES = (Fault.FRESH_RUN_INTO_USED, Fault.SAVEPOINT_INTO_USED)
ROCKSDB_TTL_KEPT = 0.25
"""Drawn from every kind (the default sweep, CI, the hunts of holes 1-6), a seed keeps
``rocksdb_ttl`` this often and runs ``state_ttl`` instead otherwise: a seed on the real
RocksDB store costs about ten ordinary ones (a native checkpoint at every barrier, a
database opened for every task incarnation and frozen snapshot). ``--faults`` that name
fewer kinds keep it always."""


@dataclass
class FaultPlan:
    """Which faults one seed injects, and how often."""

    enabled: frozenset[Fault]
    rate: dict[Fault, float] = field(default_factory=dict)
    crash_times: list[tuple[float, int]] = field(default_factory=list)
    tm_crash_times: list[float] = field(default_factory=list)
    disk_full: tuple[float, float] | None = None
    sink_down: tuple[float, float] | None = None
    lifecycle: Fault | None = None
    rescale_at: int | None = None
    upgrade_at: int | None = None
    file_loss_at: float | None = None
    ttl_ms: int | None = None
    hits: dict[Fault, int] = field(default_factory=dict)

    @classmethod
    def draw(cls, world: World, allowed: tuple[Fault, ...], horizon: float) -> FaultPlan:
        """A seed's plan: a random subset of ``allowed`` with random rates and moments."""
        rng = world.rng
        k = rng.randint(1, min(4, len(allowed))) if allowed else 0
        enabled = frozenset(rng.sample(allowed, k))
        if (Fault.ROCKSDB_TTL in enabled and allowed == ALL_FAULTS
                and not rng.random() < ROCKSDB_TTL_KEPT):
            enabled = enabled - {Fault.ROCKSDB_TTL} | {Fault.STATE_TTL}
        lifecycles = [f for f in LIFECYCLES if f in enabled]  # one per seed
        if Fault.MULTILANG_SPOUT in enabled:  # its queue outlives a run: one run only
            enabled, lifecycles = enabled - set(LIFECYCLES), []
        plan = cls(enabled - set(lifecycles[1:]))
        plan.lifecycle = lifecycles[0] if lifecycles else None
        for f in allowed:  # in a fixed order: a set's order changes with the hash seed
            if f in plan.enabled:
                plan.rate[f] = rng.choice((0.05, 0.15, 0.35))
        if Fault.WORKER_CRASH in plan.enabled:
            plan.crash_times = sorted((rng.uniform(0, horizon), rng.randrange(2))
                                      for _ in range(rng.randint(1, 3)))
        if Fault.TM_CRASH in plan.enabled:
            plan.tm_crash_times = sorted(rng.uniform(0, horizon)
                                         for _ in range(rng.randint(1, 2)))
        if Fault.DISK_FULL in plan.enabled:
            start = rng.uniform(0, horizon)
            plan.disk_full = (start, start + rng.uniform(20, 200))
        if Fault.SINK_UNAVAILABLE in plan.enabled:
            start = rng.uniform(0, horizon)
            plan.sink_down = (start, start + rng.uniform(20, 200))
        if Fault.RESCALE in plan.enabled:
            plan.rescale_at = rng.randint(1, 4)
        if Fault.GRAY_RELEASE in plan.enabled:
            plan.upgrade_at = rng.randint(1, 4)
        if Fault.SHARED_FILE_LOSS in plan.enabled:
            plan.file_loss_at = rng.uniform(0, horizon)
        if plan.enabled & {Fault.STATE_TTL, Fault.ROCKSDB_TTL}:
            plan.ttl_ms = rng.choice(TTL_CHOICES_MS)
        return plan

    @property
    def shared_files(self) -> bool:
        """Whether keyed state goes to shared files (a shared-file fault is on)."""
        return bool(self.enabled & {Fault.SHARED_FILES, Fault.SHARED_FILE_LOSS,
                                    Fault.LOCAL_RECOVERY})

    def on(self, fault: Fault) -> bool:
        return fault in self.enabled

    def hit(self, world: World, fault: Fault) -> bool:
        """Whether ``fault`` strikes at this step (at most :data:`MAX_HITS` times a run:
        every run gets a chance to finish, as real faults end)."""
        if fault not in self.enabled or self.hits.get(fault, 0) >= MAX_HITS:
            return False
        if not world.chance(self.rate.get(fault, 0.0)):
            return False
        self.hits[fault] = self.hits.get(fault, 0) + 1
        return True

    def struck(self, fault: Fault) -> None:
        """Count a strike of ``fault`` that is not drawn through :meth:`hit` (a delay)."""
        self.hits[fault] = self.hits.get(fault, 0) + 1

    def describe(self) -> str:
        parts = sorted(f.value for f in self.enabled)
        return ", ".join(parts) or "none"
