"""Exception types of jstormpy. Every message names the bad thing and what to do."""

from __future__ import annotations


class JStormError(Exception):
    """Base class of every error jstormpy raises on purpose."""


class TopologyError(JStormError):
    """A topology definition is invalid (unknown component, cycle, missing field, ...)."""


class ConfigError(JStormError):
    """A configuration value or key is invalid."""


class UnknownSettingError(ConfigError, TypeError):
    """A Config setting name that does not exist (a typo); also a ``TypeError``, which is
    what an unknown keyword argument raised before."""


class TopologyStopped(JStormError):
    """``wait()`` on a topology stopped on request (``jstorm kill``, ``jstorm savepoint
    --stop``, ``kill()``) before it drained: a planned stop, not a failure."""


class BackendError(JStormError):
    """A state backend failed (unreachable, unwritable, bad URI)."""


class BackendTimeoutError(BackendError):
    """A state backend did not answer within ``Config.state_backend_timeout_ms``."""


class ObjectExistsError(BackendError):
    """A create-only write found its key taken (a checkpoint's commit point is written
    once: a late writer never replaces it)."""


class SnapshotNotFoundError(BackendError):
    """A snapshot or metadata object that should exist does not."""


class CorruptSnapshotError(BackendError):
    """A snapshot failed its checksum or could not be decoded."""


class MissingSegmentError(CorruptSnapshotError, SnapshotNotFoundError):
    """A segment of an incremental checkpoint chain is gone: the snapshot that references it
    cannot be restored (corrupt, for recovery) and was probably removed by retention
    (not found, for a savepoint copy that can retry with a newer checkpoint)."""


class AuthenticationError(JStormError):
    """A peer failed the per-topology HMAC challenge."""


class FrameError(JStormError):
    """A transport frame is malformed, oversized or of an unknown type."""


class CheckpointError(JStormError):
    """A checkpoint could not be taken, completed or restored."""


class UpgradeError(JStormError):
    """A gray-release upgrade was refused or failed."""


class SinkError(JStormError):
    """A sink could not write, stage, commit or discard a transaction (e.g. unwritable dir)."""


class SourceError(JStormError):
    """A source (spout) cannot read its input (missing file, glob matching nothing, ...)."""


class SemanticsError(JStormError):
    """Records given to the exactly-once checker are malformed (missing key or seq field)."""


class UnavailableError(JStormError):
    """An external system (a broker, a database) did not answer within the documented wait
    (e.g. ``connect_timeout_ms`` of a connector): a restart would only wait again, so the
    topology fails at once with this message, which names the system and the wait."""


class SinkUnavailableError(SinkError):
    """The sink's external system is unreachable for now: the checkpoint is given up, the
    open transaction is kept and staged again at the next barrier (the job keeps running)."""


class FencedError(SinkError):
    """A newer generation of the same sink task took over: this (zombie) instance may no
    longer stage or commit transactions."""


class RestoreRefusedError(SinkError):
    """A sink refuses the checkpoint being restored: committing what it lists as pending
    would silently lose output (a savepoint restored into output from which the run that
    took it discarded one of those transactions). Every restore of that checkpoint would
    refuse again, so the topology fails at once with this message, which says what to do."""


class UnsafePackageError(JStormError):
    """A code package is refused: an entry escapes the unpack directory, is a link, or the
    archive is too large or too compressed (the message names the entry)."""


class MultilangError(JStormError):
    """A Storm multilang subprocess (``jstormpy.multilang``) died, hung past its heartbeat
    timeout, or broke the protocol (a malformed or oversized message, a failed tuple); the
    message names the component and shows the last lines of its stderr."""


class HeronError(JStormError):
    """A heronpy component (``jstormpy.heron``) failed a tuple (``fail(tup)``): its task
    fails and the topology rolls back to its last checkpoint, as Heron's effectively-once
    does; the message names the component and the tuple."""
