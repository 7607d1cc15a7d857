"""PostgresSink: exactly-once rows into PostgreSQL with true two-phase commit (psycopg 3).

Mode ``"2pc"`` (default), per sink task and checkpoint ``n``:

* pre-commit (barrier ``n``): one transaction checks the task's fencing row
  (``SELECT ... FOR SHARE`` on ``jstorm_sink_fence``), ``COPY``s the buffered rows into the
  table and ends with ``PREPARE TRANSACTION 'jstorm-<topology>-<task>-<n>'``: durable,
  invisible, and it survives this process and a server restart;
* commit (checkpoint ``n`` complete): ``COMMIT PREPARED``; a GID that no longer exists means
  it was already committed (idempotent);
* recovery to checkpoint ``c``: every prepared transaction of this task (``pg_prepared_xacts``)
  with ``n <= c`` is committed, the others rolled back (``ROLLBACK PREPARED``); then this
  generation becomes the task's fencing token, so a zombie of an older generation can no
  longer prepare (its fence check fails) or commit. The fencing row is the run's own
  (``topology`` column = ``<topology>@<job_id>``, :attr:`TwoPhaseCommitSink.fence_owner`):
  a fresh run, whose generations restart at 1, never meets an earlier run's token.
  Each transaction the recovery rolls back is first recorded in ``jstorm_sink_abandoned``
  (owner = the run's ``<topology>@<job_id>``, task, id); a ``COMMIT PREPARED`` that finds
  no such GID and whose id is in the owning run's record (for a savepoint restore, the
  earlier run's) raises a :class:`~jstormpy.api.errors.SinkError`: the rows are gone,
  and the restored state counts them as written (docs/connectors.md).

Mode ``"upsert"``: rows are written in an ordinary transaction at the barrier as
``INSERT ... ON CONFLICT (key) DO UPDATE``; a replay rewrites the same rows, so the table
ends up exactly-once for sinks whose key identifies the row (visible at the barrier, not at
the checkpoint's completion).

A server that cannot be reached raises :class:`~jstormpy.api.errors.SinkUnavailableError`: the
engine gives that checkpoint up, keeps the rows buffered, and stages them at the next
barrier once the server is back; the job keeps running.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import FencedError, SinkError, SinkUnavailableError, UnavailableError
from jstormpy.connectors.twophase import TwoPhaseCommitSink

__all__ = ["ABANDONED_TABLE", "FENCE_TABLE", "MODES", "PostgresSink"]

_log = logging.getLogger(__name__)

MODES = ("2pc", "upsert")
"""Write modes of :class:`PostgresSink`."""

FENCE_TABLE = "jstorm_sink_fence"
"""The table holding each sink task's fencing token (created when missing)."""

_FENCE_DDL = (f"CREATE TABLE IF NOT EXISTS {FENCE_TABLE} (topology text NOT NULL, "
              "task integer NOT NULL, generation bigint NOT NULL, PRIMARY KEY (topology, task))")

ABANDONED_TABLE = "jstorm_sink_abandoned"
"""The table recording, per run and task, the transactions a recovery rolled back (created
when missing): a later commit of one of them is refused instead of finding nothing."""

_ABANDONED_DDL = (f"CREATE TABLE IF NOT EXISTS {ABANDONED_TABLE} (topology text NOT NULL, "
                  "task integer NOT NULL, txn bigint NOT NULL, "
                  "PRIMARY KEY (topology, task, txn))")

_UNAVAILABLE_SINCE: dict[str, float] = {}
"""Per DSN, since when this process has not reached the server (kept across generations:
every recovery builds new sink objects)."""


class PostgresSink(TwoPhaseCommitSink):
    """Write each input tuple as one row of ``table`` (columns = tuple fields of those names).

    Args:
        dsn: libpq connection string or URI (``host=... port=... dbname=... user=...``).
        table: Target table (``name`` or ``schema.name``); it must exist.
        columns: Column names; each row takes the input tuple's fields of the same names.
        mode: ``"2pc"`` (PREPARE TRANSACTION per checkpoint) or ``"upsert"``.
        key: Conflict target for ``"upsert"`` (a column or a list of columns with a unique
            index); required in that mode.
        unavailable_timeout_ms: While the server cannot be reached, each checkpoint is
            given up and the rows kept for the next one (the job goes on, a WARNING says
            what it waits for); after this long without reaching it the topology fails
            with an UnavailableError naming the server (docs/errors.md).

    Raises:
        SinkError: bad mode, no columns, ``key`` missing in upsert mode or not a column.

    Example:
        >>> sink = PostgresSink("host=db dbname=shop", "totals",
        ...                     ["customer", "window_start", "total"])  # doctest: +SKIP
    """

    def __init__(self, dsn: str, table: str, columns: Sequence[str], mode: str = "2pc",
                 key: str | Sequence[str] | None = None,
                 unavailable_timeout_ms: float = 300_000.0) -> None:
        if mode not in MODES:
            raise SinkError(f"PostgresSink mode {mode!r} is not supported; use one of {MODES}")
        if isinstance(columns, str) or not columns:
            raise SinkError(f"PostgresSink columns must be a non-empty list of names, "
                            f"got {columns!r}")
        keys = [key] if isinstance(key, str) else list(key or ())
        if mode == "upsert" and not keys:
            raise SinkError("PostgresSink mode='upsert' needs key= (the conflict column(s))")
        missing = [k for k in keys if k not in columns]
        if missing:
            raise SinkError(f"PostgresSink key column(s) {missing} are not in columns "
                            f"{list(columns)}")
        self.dsn = dsn
        self.table = table
        self.columns = tuple(columns)
        self.mode = mode
        self.key = tuple(keys)
        self._conn: Any = None
        self.unavailable_timeout_ms = unavailable_timeout_ms

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_conn"] = None
        return state

    # -- connections -----------------------------------------------------------------------
    def _connection(self) -> Any:
        """The task's connection (reconnects after a failure)."""
        import psycopg

        conn = self.__dict__.get("_conn")
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as exc:
            now = time.monotonic()
            since = _UNAVAILABLE_SINCE.setdefault(self.dsn, now)
            if now - since > self.unavailable_timeout_ms / 1000.0:
                raise UnavailableError(
                    f"PostgresSink: PostgreSQL at {self._where()} unreachable for longer than "
                    f"unavailable_timeout_ms={self.unavailable_timeout_ms:.0f} "
                    f"({str(exc).strip()}); check that it runs and is reachable, or raise "
                    f"unavailable_timeout_ms") from exc
            raise SinkUnavailableError(
                f"PostgresSink cannot reach {self._where()} (waiting for it, giving up in "
                f"{self.unavailable_timeout_ms / 1000.0 - (now - since):.0f} s): "
                f"{str(exc).strip()}") from exc
        self._conn = conn
        _UNAVAILABLE_SINCE.pop(self.dsn, None)
        return conn

    def _where(self) -> str:
        import psycopg

        try:
            info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        except psycopg.Error:
            return "the server"
        return f"{info.get('host', '?')}:{info.get('port', 5432)}/{info.get('dbname', '?')}"

    def _fail(self, exc: Exception, doing: str) -> SinkError:
        """Map a psycopg error to ours (connection trouble is 'unavailable')."""
        import psycopg

        conn = self.__dict__.get("_conn")
        if isinstance(exc, psycopg.OperationalError) and (conn is None or conn.broken
                                                          or conn.closed):
            self._conn = None
            return SinkUnavailableError(f"PostgresSink lost {self._where()} while {doing}: "
                                        f"{str(exc).strip()}")
        return SinkError(f"PostgresSink failed {doing} on {self.table!r} at {self._where()}: "
                         f"{type(exc).__name__}: {str(exc).strip()}")

    def connect(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Check the table exists and create the fencing table (lazily if the server is down)."""
        try:
            self._check_table()
        except SinkUnavailableError as exc:
            _log.warning("%s; will retry at the next barrier", exc)

    def _check_table(self) -> None:
        import psycopg
        from psycopg import sql

        conn = self._connection()
        try:
            row = conn.execute("SELECT to_regclass(%s)", (self.table,)).fetchone()
            if row is None or row[0] is None:
                raise SinkError(f"PostgresSink table {self.table!r} does not exist at "
                                f"{self._where()}; create it first")
            if self.mode == "2pc":
                for ddl in (_FENCE_DDL, _ABANDONED_DDL):
                    try:
                        conn.execute(ddl)
                    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject,
                            psycopg.errors.DuplicateTable):  # a concurrent task created it
                        pass
            conn.execute(sql.SQL("SELECT {} FROM {} LIMIT 0").format(
                self._cols(), self._table()))
        except psycopg.Error as exc:
            raise self._fail(exc, "checking the table") from exc

    def _table(self) -> Any:
        from psycopg import sql

        return sql.Identifier(*self.table.split("."))

    def _cols(self) -> Any:
        from psycopg import sql

        return sql.SQL(", ").join(sql.Identifier(c) for c in self.columns)

    def row_of(self, tup: Tuple) -> tuple[Any, ...]:
        """The values of :attr:`columns`, taken from the tuple's fields of those names."""
        try:
            return tuple(tup[c] for c in self.columns)
        except KeyError as exc:
            raise SinkError(f"PostgresSink column {exc.args[0]!r} is not a field of the input "
                            f"stream {tup.fields}") from exc

    # -- the storage steps ------------------------------------------------------------------
    def stage_transaction(self, checkpoint_id: int, rows: list[Any]) -> None:
        """2pc: fence check, COPY, PREPARE TRANSACTION. Upsert: INSERT .. ON CONFLICT; commit."""
        import psycopg

        if self.mode == "upsert":
            self._upsert(rows)
            return
        if not rows:
            return  # an empty transaction prepares nothing
        gid = self.transaction_name(checkpoint_id)
        conn = self._connection()
        try:
            conn.autocommit = False
            conn.tpc_begin(gid)
            fence = conn.execute(f"SELECT generation FROM {FENCE_TABLE} WHERE topology = %s "
                                 "AND task = %s FOR SHARE", (self.fence_owner, self.task_id)
                                 ).fetchone()
            if fence is None or int(fence[0]) != self.generation:
                conn.tpc_rollback()
                raise FencedError(
                    f"PostgresSink task {self.task_id} generation {self.generation} is fenced "
                    f"(token now {None if fence is None else fence[0]}): not preparing {gid}")
            self._copy(conn, rows)
            conn.tpc_prepare()
        except psycopg.Error as exc:
            error = self._fail(exc, f"preparing {gid}")
            self._reset(conn)
            raise error from exc
        finally:
            self._back_to_autocommit(conn)

    def _reset(self, conn: Any) -> None:
        """Roll back the failed (unprepared) transaction; drop the connection if that fails."""
        try:
            if not conn.closed and not conn.broken:
                conn.tpc_rollback()
        except Exception:  # the connection is replaced on the next use
            self._drop(conn)

    def _back_to_autocommit(self, conn: Any) -> None:
        try:
            if not conn.closed and not conn.broken:
                conn.autocommit = True
        except Exception:  # stuck in a transaction: replace it on the next use
            self._drop(conn)

    def _drop(self, conn: Any) -> None:
        try:
            conn.close()
        except Exception:
            _log.debug("closing a failed PostgreSQL connection failed", exc_info=True)
        self._conn = None

    def _copy(self, conn: Any, rows: list[Any]) -> None:
        from psycopg import sql

        stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(self._table(), self._cols())
        with conn.cursor() as cur, cur.copy(stmt) as cp:
            for r in rows:
                cp.write_row(r)

    def _upsert(self, rows: list[Any]) -> None:
        import psycopg
        from psycopg import sql

        if not rows:
            return
        rows = self._last_per_key(rows)
        others = [c for c in self.columns if c not in self.key]
        action = (sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in others))
            if others else sql.SQL("DO NOTHING"))
        stmt = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) {}").format(
            self._table(), self._cols(), sql.SQL(", ").join(sql.Placeholder() * len(self.columns)),
            sql.SQL(", ").join(sql.Identifier(k) for k in self.key), action)
        conn = self._connection()
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(stmt, rows)
        except psycopg.Error as exc:
            raise self._fail(exc, "upserting") from exc

    def _last_per_key(self, rows: list[Any]) -> list[Any]:
        """The last row of each key, in first-seen key order: what the upserts of ``rows``
        in order leave in the table (every other column is set from the row; with the key
        alone, the rows of a key are equal). Writing a row many times in one transaction
        costs PostgreSQL a walk of the row's growing version chain per write (1 s of a
        100-key stream: ~3k rows/s instead of the whole stream's rate). Unhashable keys:
        every row."""
        idx = [self.columns.index(k) for k in self.key]
        latest: dict[Any, Any] = {}
        try:
            for r in rows:
                latest[tuple(r[i] for i in idx)] = r
        except TypeError:
            return rows
        return list(latest.values())

    def _fence_token(self, conn: Any) -> int | None:
        row = conn.execute(f"SELECT generation FROM {FENCE_TABLE} WHERE topology = %s AND "
                           "task = %s", (self.fence_owner, self.task_id)).fetchone()
        return None if row is None else int(row[0])

    def _finish_prepared(self, checkpoint_id: int, verb: str, record: bool = False) -> None:
        """``COMMIT``/``ROLLBACK PREPARED`` (fenced). ``record``: first record the id in
        :data:`ABANDONED_TABLE` under this run (a recovery's rollback: PostgreSQL cannot
        run ``ROLLBACK PREPARED`` in a transaction, so record, then roll back; a crash in
        between leaves the record with the GID still prepared, which the next recovery
        rolls back again). A ``COMMIT`` that finds no GID checks the owning run's record."""
        import psycopg
        from psycopg import sql

        if self.mode == "upsert":
            return
        gid = self.transaction_name(checkpoint_id)
        conn = self._connection()
        try:
            token = self._fence_token(conn)
            if token is not None and token > self.generation:
                raise FencedError(f"PostgresSink task {self.task_id} generation "
                                  f"{self.generation} is fenced (token {token}): not running "
                                  f"{verb} PREPARED {gid}")
            if record:
                conn.execute(f"INSERT INTO {ABANDONED_TABLE} (topology, task, txn) VALUES "
                             "(%s, %s, %s) ON CONFLICT DO NOTHING",
                             (self.fence_owner, self.task_id, checkpoint_id))
            conn.execute(sql.SQL(verb + " PREPARED {}").format(sql.Literal(gid)))
        except psycopg.errors.UndefinedObject:
            # no such prepared transaction: already finished (or empty), unless a recovery
            # rolled it back
            if verb == "COMMIT" and self._was_abandoned(conn, checkpoint_id):
                raise self.abandoned_error(checkpoint_id,
                                           f"table {self.table!r} at {self._where()}") from None
        except psycopg.Error as exc:
            raise self._fail(exc, f"{verb} PREPARED {gid}") from exc

    def _was_abandoned(self, conn: Any, checkpoint_id: int) -> bool:
        """Whether the owning run's recoveries rolled ``checkpoint_id`` back."""
        import psycopg

        try:
            row = conn.execute(f"SELECT 1 FROM {ABANDONED_TABLE} WHERE topology = %s AND "
                               "task = %s AND txn = %s",
                               (self.abandoned_owner(checkpoint_id), self.task_id,
                                checkpoint_id)).fetchone()
        except psycopg.errors.UndefinedTable:
            return False  # a database an older version set up: nothing was recorded
        except psycopg.Error as exc:
            raise self._fail(exc, f"looking up transaction {checkpoint_id} in "
                                  f"{ABANDONED_TABLE}") from exc
        return row is not None

    def commit_transaction(self, checkpoint_id: int) -> None:
        """``COMMIT PREPARED``; a missing GID is a no-op (committed already, or empty)."""
        self._finish_prepared(checkpoint_id, "COMMIT")

    def abort_transaction(self, checkpoint_id: int) -> None:
        """``ROLLBACK PREPARED``; a missing GID is a no-op."""
        self._finish_prepared(checkpoint_id, "ROLLBACK")

    def abandon_transaction(self, checkpoint_id: int) -> None:
        """A recovery's rollback: record the id under this run, then ``ROLLBACK PREPARED``."""
        self._finish_prepared(checkpoint_id, "ROLLBACK", record=True)

    def staged_transactions(self) -> list[int]:
        """This task's prepared transactions in this database (any generation)."""
        import psycopg

        if self.mode == "upsert":
            return []
        conn = self._connection()
        try:
            gids = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE database = "
                                "current_database()").fetchall()
        except psycopg.Error as exc:
            raise self._fail(exc, "listing prepared transactions") from exc
        ids = (self.parse_transaction_name(g[0]) for g in gids)
        return sorted(i for i in ids if i is not None)

    def install_fence(self) -> None:
        """Make this generation the task's token (waits out prepared/preparing zombies)."""
        import psycopg

        if self.mode == "upsert":
            return
        conn = self._connection()
        try:
            conn.execute("SET lock_timeout = '2s'")
            conn.execute(
                f"INSERT INTO {FENCE_TABLE} (topology, task, generation) VALUES (%s, %s, %s) "
                f"ON CONFLICT (topology, task) DO UPDATE SET generation = EXCLUDED.generation "
                f"WHERE {FENCE_TABLE}.generation < EXCLUDED.generation",
                (self.fence_owner, self.task_id, self.generation))
            token = self._fence_token(conn)
        except psycopg.errors.LockNotAvailable:
            raise
        except psycopg.Error as exc:
            raise self._fail(exc, "installing the fencing token") from exc
        if token is not None and token > self.generation:
            raise FencedError(f"PostgresSink task {self.task_id} generation {self.generation} "
                              f"is older than the fencing token {token}")

    def recover(self, completed_id: int | None) -> None:
        """Resolve prepared transactions, fence, resolve again (a zombie may have slipped in).

        A prepared transaction of this task holds its fencing row locked (``FOR SHARE``), so
        the token can only be raised once those are resolved: commit the ones
        ``<= completed_id``, roll the others back, retry. Rolled back with a record
        (:meth:`abandon_transaction`) only if this run's fencing row existed before: at
        the run's first recovery they are earlier runs' leftovers.
        """
        import psycopg

        if self.mode == "upsert":
            return
        self._check_table()
        own = self.fence_installed()
        for _ in range(30):
            self.resolve_staged(completed_id, own)
            try:
                self.install_fence()
                break
            except psycopg.errors.LockNotAvailable:
                _log.info("PostgresSink task %s: fencing row busy; resolving again",
                          self.task_id)
        else:
            raise SinkError(f"PostgresSink task {self.task_id}: could not install the fencing "
                            f"token (row kept locked by another session)")
        self.resolve_staged(completed_id, own)

    def fence_installed(self) -> bool:
        """Whether this run's fencing row for the task exists."""
        import psycopg

        if self.mode == "upsert":
            return True
        conn = self._connection()
        try:
            return self._fence_token(conn) is not None
        except psycopg.Error as exc:
            raise self._fail(exc, "reading the fencing token") from exc

    def cleanup(self) -> None:
        """Close the connection."""
        conn = self.__dict__.get("_conn")
        if conn is not None:
            try:
                conn.close()
            except Exception:
                _log.debug("closing the PostgreSQL connection failed", exc_info=True)
        self._conn = None
