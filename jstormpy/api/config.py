"""Topology configuration: one dataclass, every setting declared once with its default and doc."""

from __future__ import annotations

import dataclasses
import difflib
import functools
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import ConfigError, UnknownSettingError
from jstormpy.api.restart import DEFAULT_RESTART_STRATEGY, RestartStrategy
from jstormpy.state_store import COMPACTION_STYLES, MIN_MEMORY_MB, STATE_STORES

GUARANTEES = ("exactly_once", "at_least_once", "at_most_once")
ON_ERROR = ("fail", "dead_letter")
"""Values of ``Config.on_error``."""


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""Log levels accepted by ``Config.log_level`` and ``jstorm loglevel`` (one shared list)."""


@dataclass
class Config:
    """Settings of one topology run.

    Unknown keys are refused with an error naming them; every value is validated on
    construction.

    Example:
        >>> Config(workers=2, guarantee="exactly_once").checkpoint_interval_ms
        1000
    """

    workers: int = 2
    """Number of worker processes."""
    guarantee: str = "exactly_once"
    """"exactly_once" (aligned barriers, rollback, 2PC sinks), "at_least_once"
    (barriers without alignment) or "at_most_once" (no state snapshots, no rollback)."""
    checkpoint_interval_ms: int = 1000
    """How often the Topology Master triggers a checkpoint (also the sink commit period)."""
    checkpoint_timeout_ms: int = 60_000
    """A checkpoint not completed within this time is aborted (and the tasks that never
    acked it are named in the checkpoint history)."""
    tolerable_failed_checkpoints: int = 3
    """Checkpoint timeouts in a row tolerated (Flink's name); one more starts a recovery, so a
    lost barrier or a stalled channel never hangs the job."""
    max_concurrent_checkpoints: int = 1
    """Checkpoints in flight at once."""
    min_pause_between_checkpoints_ms: int = 0
    """Least time from the end of one checkpoint (completed, failed or timed out) to the
    start of the next (Flink's name). 0 (the default): a checkpoint starts every
    ``checkpoint_interval_ms`` while none is in flight, so checkpoints that take longer
    than the interval run back to back. Checkpoints here are asynchronous (the task
    thread pauses about a millisecond per barrier) and exactly-once output becomes
    visible only when one completes, so a pause adds to output latency and to what a
    failure replays; ``jstorm status`` says when checkpoints run back to back or keep
    timing out, and that is when to set it (docs/checkpointing.md, "Checkpoints slower
    than their interval")."""
    checkpoints_retained: int = 3
    """Completed checkpoints kept by garbage collection (the newest K)."""
    incremental_checkpoints: bool | None = None
    """Whether a checkpoint writes only what changed since the last one. ``None`` (the
    default): incremental with ``state_store="rocksdb"`` (the database's own SST files,
    shared between checkpoints: a checkpoint's cost follows what changed, not the state's
    size) and full with ``state_store="memory"``. ``True``: incremental for both (memory:
    a changelog per key group on top of a base, compacted into a new base from time to
    time); ``False``: every checkpoint writes every entry (docs/checkpointing.md,
    incremental checkpoints). Savepoints are self-contained whatever the setting."""
    incremental_compaction_every: int = 10
    """With incremental checkpoints, write a new full base after this many increments."""
    incremental_compaction_ratio: float = 0.5
    """... or as soon as the increments since the base add up to more than this fraction
    of the base's bytes (whichever comes first)."""
    state_store: str = "memory"
    """Where managed state (``self.state(...)``) lives while the job runs: "memory" (a dict
    per state in the worker's heap) or "rocksdb" (an embedded RocksDB per task on local
    disk, so state is bounded by disk, not RAM; docs/state-stores.md). Checkpoints,
    savepoints and rescale work the same with both."""
    rocksdb_compaction_style: str = "universal"
    """RocksDB state store: how a task database compacts, "universal" (tiered: sorted runs
    merged when :attr:`rocksdb_level0_compaction_trigger` of them pile up or the newer ones
    outgrow the oldest; a quarter to a half less compaction CPU, but now and then a merge
    of the whole database, which the next incremental checkpoint uploads, and up to about
    3x the live data on disk between such merges) or "level" (leveled: more compaction CPU
    as the state grows, smaller largest uploads, less disk). docs/state-stores.md,
    "Compaction and incremental checkpoints"."""
    rocksdb_level0_compaction_trigger: int = 12
    """RocksDB state store: level-0 files (memtable flushes, one or more per checkpoint
    interval) that start a level-0 compaction (RocksDB's own default is 4); under universal
    compaction, the sorted runs (level-0 files and non-empty levels) that start a merge.
    Higher: fewer incremental checkpoints carry a compaction's output (smaller p50
    checkpoint bytes), at the price of more files or runs a lookup probes and more
    overwritten entries on disk until compacted; docs/state-stores.md, "Compaction and
    incremental checkpoints"."""
    rocksdb_memory_mb: int | None = None
    """RocksDB state store: a memory budget for one worker's task databases, in MB (as
    Flink's managed memory bounds a slot's RocksDB): one block cache shared by all the
    worker's tasks and states, with their memtables charged to it (5/6 of the budget is
    the cache, the memtables may hold a third; docs/state-stores.md, "Memory"). Index and
    filter blocks are outside it (about 2-3 bytes per key). At least 32. None (the
    default): no budget, each task database has its own 32 MB block cache and each state
    its own memtables (a budget flushes the memtables of many busy states early)."""
    state_store_dir: str = ""
    """Local directory of the RocksDB state store's databases (one per task, rebuilt from
    the checkpoint at every restore). "" = ``state-store/`` under the run directory, or a
    directory of the worker process's own in the temp directory where there is none (set
    it on Spark)."""
    state_backend: str = ""
    """Where snapshots live: memory://, file:///dir (default: a run directory), hdfs://, hbase://."""
    state_backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend settings, e.g. ``{"user": "hdfs", "retries": 5, "timeout_s": 20}`` for HDFS or
    ``{"column_family": "c", "transport": "framed"}`` for HBase (docs/state-backends.md)."""
    state_backend_timeout_ms: int = 20_000
    """Deadline of every state-backend call (snapshot upload, metadata write, listing),
    retries included. A backend that does not answer in time fails that call with a
    BackendError: the checkpoint is aborted (and counts toward
    ``tolerable_failed_checkpoints``), a recovery waits and retries; the Topology Master
    never blocks on it (``jstorm status`` and ``kill`` keep answering)."""
    batch_size: int = 512
    """Tuples per transport batch before a flush."""
    batch_linger_ms: float = 5.0
    """Longest a partly filled batch waits before it is flushed."""
    queue_capacity: int = 64
    """Batches a task's input queue holds before the producer blocks."""
    worker_gc: str = "tuned"
    """A worker's garbage collector: ``"tuned"`` (after building its tasks it collects once,
    freezes what it holds so collections never scan it again, and collects the young
    generation every 10,000 allocations instead of 700) or ``"default"`` (CPython's
    settings). docs/performance.md has what it buys."""
    worker_cpu_affinity: str = "auto"
    """Where a local cluster's workers run: ``"auto"`` puts each worker's threads on one CPU
    of its own (worker *i* on the *i*-th CPU the launcher may use) when the topology runs
    alone under its ``JSTORM_HOME``, has no more workers than those CPUs and keeps its
    state in memory; ``"off"`` leaves them to the OS. A worker's Python threads share one
    GIL: spread over several cores, each hand-over of the GIL waits for another core's
    wake-up (docs/performance.md, "A third of the two cores idle"). RocksDB state is not
    pinned (its compactions hold no GIL and use every core), nor workers on Spark."""
    chaining: bool = True
    """Run a bolt in its source's thread when it reads only that source with
    ``local_or_shuffle`` and their tasks pair up one per worker (Flink's operator
    chaining; docs/performance.md). False: every task in its own thread."""
    send_buffer_bytes: int = 1024 * 1024
    """Bytes of encoded frames queued per outbound connection before the producer blocks."""
    max_frame_bytes: int = 64 * 1024 * 1024
    """Frames larger than this are refused and the connection closed."""
    heartbeat_interval_ms: int = 500
    """Worker → Topology Master heartbeat period (carries metrics and queue levels)."""
    worker_timeout_ms: int = 10_000
    """A worker silent this long is declared dead (a closed control stream is detected at once)."""
    backpressure_high_watermark: float = 0.8
    """Input-queue fill above which the TM throttles upstream spouts."""
    backpressure_low_watermark: float = 0.3
    """Input-queue fill below which throttled spouts are released."""
    throttle_lease_ms: int = 2000
    """A throttle command expires unless renewed within this time."""
    max_parallelism: int = 0
    """Number of key groups keyed state and fields grouping are split into (the most tasks a
    component can ever be rescaled to); fixed for the life of the job's state. 0 = Flink's
    default ``max(128, roundUpPow2(1.5 × largest parallelism))`` (docs/savepoints.md)."""
    max_restarts: int = 100
    """Recoveries allowed before the topology is failed: the ``attempts`` of the default
    restart strategy (and of a fixed-delay or exponential-delay one given without them)."""
    restart_strategy: str | RestartStrategy = ""
    """What a failure leads to (Flink's restart strategies, docs/errors.md): a
    ``RestartStrategy`` (``RestartStrategy.fixed_delay(3, 1000)``, ``.failure_rate(...)``,
    ``.exponential_delay(...)``, ``.no_restart()``) or its string form
    (``"fixed-delay:attempts=3,delay_ms=1000"``); stored as the string. "" = the default,
    exponential-delay from 50 ms (x1.5, up to 10 s, reset after 60 s without failure), at most
    ``max_restarts`` restarts in a row. Whatever the strategy, the same exception on the
    same tuple right after the restore it caused fails the job at once."""
    on_error: str = "fail"
    """What a bolt's ``execute`` raising does: "fail" (a recovery, per ``restart_strategy``;
    the same error on the same tuple again fails the job) or "dead_letter" (the tuple and
    its error go to the bolt's ``errors`` stream, fields ``component, task, error,
    traceback, tuple``, which a bolt or sink can subscribe to; the job goes on and the
    component's ``errors`` metric counts them). docs/errors.md."""
    upgrade_expiry_ms: int = 1_800_000
    """An upgrade left partly done (no continue/complete/rollback) this long is rolled back."""
    upgrade_step_timeout_ms: int = 120_000
    """One switch step (quiesce, restart, restore) longer than this aborts the upgrade."""
    host: str = "127.0.0.1"
    """Address workers and the TM bind to and advertise."""
    log_level: str = "INFO"
    """Level of the per-task logs."""
    user: dict[str, Any] = field(default_factory=dict)
    """Free-form settings passed to components (conf argument of open/prepare)."""
    # -- operations (docs/operations.md) --
    ui_port: int = 0
    """Port of the Topology Master's web UI and Prometheus ``/metrics`` (0 = a free port;
    the port is written to ``run_dir/ui.port``)."""
    latency_timing: bool = True
    """Time each executed batch for the latency histograms (off saves one clock read per
    batch)."""
    # -- security (docs/security.md) --
    tls: bool = True
    """Mutual TLS on gRPC to the Topology Master with a per-topology CA issued at submit
    (Flink's ``security.ssl.internal.enabled``). Turn off only for trusted single-host runs
    (the per-call HMAC token still applies)."""
    tls_ca_cert: str = ""
    """PEM file of an (intermediate) CA to issue the topology's certificates from instead
    of a generated one (with ``tls_ca_key``); Flink's ``security.ssl.internal.truststore``."""
    tls_ca_key: str = ""
    """PEM private key of ``tls_ca_cert`` (read at submit only, never copied)."""
    tls_certs_dir: str = ""
    """A directory of ready certificates (``ca.pem``, ``tm|worker|cli.pem`` and ``.key``)
    from a corporate PKI, used as they are (Storm's ``*.tls.keystore.path`` convention)."""

    def __post_init__(self) -> None:
        self.validate()

    def __setattr__(self, name: str, value: Any) -> None:
        """Known settings may be changed; any other name is refused (a typo such as
        ``config.checkpoint_interval = 100`` would otherwise be silently ignored)."""
        if name not in _FIELD_NAMES:
            raise UnknownSettingError(f"Config has no setting {name!r}"
                                      f"{_did_you_mean([name])}")
        object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Config:
        """Build a Config from a mapping, refusing unknown keys by name."""
        _refuse_unknown(values)
        return cls(**values)

    def restart(self) -> RestartStrategy:
        """The restart strategy in force (``restart_strategy`` parsed, or the default)."""
        if not self.restart_strategy:
            return DEFAULT_RESTART_STRATEGY
        if isinstance(self.restart_strategy, RestartStrategy):
            return self.restart_strategy
        return RestartStrategy.parse(self.restart_strategy)

    def incremental(self) -> bool:
        """Whether checkpoints are incremental (``incremental_checkpoints`` resolved:
        ``None`` means incremental for RocksDB, full for memory)."""
        if self.incremental_checkpoints is None:
            return self.state_store == "rocksdb"
        return self.incremental_checkpoints

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (JSON-serialisable)."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> Config:
        """A copy with some settings changed (validated like the constructor)."""
        return Config.from_dict({**self.to_dict(), **changes})

    def validate(self) -> None:
        """Raise ConfigError naming the first bad setting."""
        def need(cond: bool, key: str, why: str) -> None:
            if not cond:
                raise ConfigError(f"Config.{key}={getattr(self, key)!r} is invalid: {why}")

        for name in ("workers", "checkpoint_interval_ms", "checkpoint_timeout_ms",
                     "max_concurrent_checkpoints", "checkpoints_retained", "batch_size",
                     "queue_capacity", "send_buffer_bytes", "max_frame_bytes",
                     "heartbeat_interval_ms", "worker_timeout_ms", "throttle_lease_ms",
                     "upgrade_expiry_ms", "upgrade_step_timeout_ms", "state_backend_timeout_ms",
                     "incremental_compaction_every"):
            value = getattr(self, name)
            need(isinstance(value, int) and not isinstance(value, bool), name, "must be an int")
            need(value >= 1, name, "must be >= 1")
        need(type(self.min_pause_between_checkpoints_ms) is int
             and self.min_pause_between_checkpoints_ms >= 0,
             "min_pause_between_checkpoints_ms", "must be an int >= 0 (milliseconds)")
        need(self.guarantee in GUARANTEES, "guarantee", f"must be one of {GUARANTEES}")
        need(isinstance(self.batch_linger_ms, (int, float)) and self.batch_linger_ms >= 0,
             "batch_linger_ms", "must be a number >= 0")
        need(isinstance(self.max_restarts, int) and self.max_restarts >= 0,
             "max_restarts", "must be an int >= 0")
        need(self.on_error in ON_ERROR, "on_error", f"must be one of {ON_ERROR}")
        if isinstance(self.restart_strategy, RestartStrategy):
            self.restart_strategy = self.restart_strategy.checked().spec()
        need(isinstance(self.restart_strategy, str), "restart_strategy",
             "must be a RestartStrategy or its string form, e.g. 'fixed-delay:attempts=3'")
        self.restart()  # a bad string form raises ConfigError naming it
        need(isinstance(self.tolerable_failed_checkpoints, int)
             and not isinstance(self.tolerable_failed_checkpoints, bool)
             and self.tolerable_failed_checkpoints >= 0,
             "tolerable_failed_checkpoints", "must be an int >= 0")
        need(isinstance(self.max_parallelism, int) and not isinstance(self.max_parallelism, bool)
             and 0 <= self.max_parallelism <= 32768, "max_parallelism",
             "must be an int in 0..32768 (0 = default)")
        for name in ("backpressure_high_watermark", "backpressure_low_watermark"):
            value = getattr(self, name)
            need(isinstance(value, (int, float)) and 0 < value <= 1, name, "must be in (0, 1]")
        need(self.backpressure_low_watermark < self.backpressure_high_watermark,
             "backpressure_low_watermark", "must be below backpressure_high_watermark")
        need(isinstance(self.state_backend, str), "state_backend", "must be a URI string")
        if self.state_backend:
            scheme = self.state_backend.split("://", 1)[0] if "://" in self.state_backend else ""
            need(scheme in ("memory", "file", "hdfs", "hbase"), "state_backend",
                 "must start with memory://, file:///, hdfs:// or hbase://")
        need(self.log_level.upper() in LOG_LEVELS, "log_level",
             f"must be one of {', '.join(LOG_LEVELS)}")
        need(isinstance(self.user, dict), "user", "must be a dict")
        need(isinstance(self.state_backend_options, dict), "state_backend_options",
             "must be a dict of backend settings")
        need(isinstance(self.ui_port, int) and 0 <= self.ui_port <= 65535, "ui_port",
             "must be an int in 0..65535 (0 = pick a free port)")
        need(isinstance(self.latency_timing, bool), "latency_timing", "must be a bool")
        need(isinstance(self.chaining, bool), "chaining", "must be True or False")
        need(self.incremental_checkpoints is None
             or isinstance(self.incremental_checkpoints, bool), "incremental_checkpoints",
             "must be None (incremental for RocksDB, full for memory), True or False")
        need(self.worker_gc in ("tuned", "default"), "worker_gc",
             "must be 'tuned' or 'default'")
        need(self.worker_cpu_affinity in ("auto", "off"), "worker_cpu_affinity",
             "must be 'auto' or 'off'")
        need(self.state_store in STATE_STORES, "state_store",
             f"must be one of {', '.join(map(repr, STATE_STORES))}")
        need(isinstance(self.state_store_dir, str), "state_store_dir", "must be a path string")
        need(self.rocksdb_compaction_style in COMPACTION_STYLES, "rocksdb_compaction_style",
             f"must be one of {', '.join(map(repr, COMPACTION_STYLES))}")
        need(type(self.rocksdb_level0_compaction_trigger) is int
             and 2 <= self.rocksdb_level0_compaction_trigger <= 64,
             "rocksdb_level0_compaction_trigger", "must be an int from 2 to 64")
        need(self.rocksdb_memory_mb is None or (type(self.rocksdb_memory_mb) is int
                                                and self.rocksdb_memory_mb >= MIN_MEMORY_MB),
             "rocksdb_memory_mb", f"must be None or an int >= {MIN_MEMORY_MB} (MB of RocksDB "
             "block cache and memtables per worker)")

        need(isinstance(self.incremental_compaction_ratio, (int, float))
             and not isinstance(self.incremental_compaction_ratio, bool)
             and self.incremental_compaction_ratio > 0, "incremental_compaction_ratio",
             "must be a number > 0 (increments' bytes as a fraction of the base's)")
        need(isinstance(self.tls, bool), "tls", "must be a bool")
        for name in ("tls_ca_cert", "tls_ca_key", "tls_certs_dir"):
            need(isinstance(getattr(self, name), str), name, "must be a path string")
        need(bool(self.tls_ca_cert) == bool(self.tls_ca_key), "tls_ca_cert",
             "tls_ca_cert and tls_ca_key go together")
        need(not (self.tls_certs_dir and self.tls_ca_cert), "tls_certs_dir",
             "give either tls_certs_dir or tls_ca_cert/tls_ca_key, not both")


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Config))


def _did_you_mean(names: list[str]) -> str:
    """"; 'x': did you mean 'y'?" per name with a close setting; the list of every setting
    when some name has none."""
    hints = []
    for name in names:
        close = difflib.get_close_matches(name, sorted(_FIELD_NAMES), n=1, cutoff=0.6)
        if close:
            hints.append(f"{name!r}: did you mean {close[0]!r}?")
    if len(hints) < len(names):
        hints.append(f"known keys are: {', '.join(sorted(_FIELD_NAMES))}")
    return "; " + "; ".join(hints)


def _refuse_unknown(values: Any) -> None:
    unknown = sorted(set(values) - _FIELD_NAMES)
    if unknown:
        raise UnknownSettingError(f"unknown Config key(s) {', '.join(map(repr, unknown))}"
                                  f"{_did_you_mean(unknown)}")


_dataclass_init = Config.__init__


@functools.wraps(_dataclass_init)
def _init_refusing_unknown(self: Config, *args: Any, **kwargs: Any) -> None:
    _refuse_unknown(kwargs)  # a ConfigError with "did you mean", not a bare TypeError
    _dataclass_init(self, *args, **kwargs)


Config.__init__ = _init_refusing_unknown  # type: ignore[method-assign]


def as_config(value: Config | dict[str, Any] | None) -> Config:
    """The Config a submit uses: a Config as it is, a dict converted (unknown keys refused
    with a suggestion), None the defaults; anything else is refused."""
    if value is None:
        return Config()
    if isinstance(value, Config):
        return value
    if isinstance(value, dict):
        return Config.from_dict(value)
    raise ConfigError(f"config must be a jstormpy.Config or a dict of its settings, not "
                      f"{type(value).__name__}: e.g. Config(workers=2) or {{'workers': 2}}")
