"""Redis Streams connectors: a replayable spout and an exactly-once sink (redis-py).

Why Redis Streams (over NATS JetStream) as the log broker that runs here: Debian ships
``redis-server``; redis-py is synchronous like our task threads (nats-py is asyncio-only);
and a Lua script runs atomically on the server, so the sink's commit (append a whole staged
transaction to the stream *and* mark it done) is one indivisible step that is exactly-once
forever, where JetStream's message-id deduplication only holds within its dedup window.

**Spout.** Splits are stream keys; the offset of a split is the last entry id read (held in
the checkpoint, never ahead). Event time is the entry id's millisecond part. After a
checkpoint completes, its offsets are written to the hash
``jstorm:offsets:<topology>:<component>`` (for monitoring only; a restart reads the
checkpoint).

**Sink.** Per sink task, keys under ``jstorm:2pc:<topology>:<task>:``: ``fence`` (the
generation holding the task; per run, under ``jstorm:2pc:<topology>@<job_id>:<task>:``, so
a fresh run never meets an earlier run's token), ``staged`` (set of staged checkpoint ids)
and ``txn:<n>`` (a list of the encoded entries of transaction ``n``). Pre-commit stages
the list with a script that first checks the fence; commit runs a script that, if ``n`` is
still staged, ``XADD``s its entries to the stream, deletes the list and removes ``n`` from
``staged``. A recovery's discard of a staged transaction (``abandon``) adds its id to the
run's set ``jstorm:2pc:<topology>@<job_id>:<task>:abandoned`` in the same script; a commit
of an id that is not staged but is in the owning run's set (for a savepoint restore, the
earlier run's) is refused: its entries are gone (docs/connectors.md).
Durability of a staged transaction is the server's: run it with ``appendonly yes`` and
``appendfsync always`` (or ``everysec``, accepting up to a second of loss on a server crash).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from jstormpy.api.component import TopologyContext, Tuple
from jstormpy.api.errors import FencedError, SinkError, SinkUnavailableError, SourceError
from jstormpy.connectors.splits import ReplayableSpout, SplitRecord
from jstormpy.connectors.twophase import TwoPhaseCommitSink

__all__ = ["CODECS", "RedisStreamSink", "RedisStreamSpout"]

_log = logging.getLogger(__name__)

CODECS = ("json", "text")
"""How field values are stored in stream entries: JSON text, or plain text (``str(v)``)."""

_STAGE = """
local token = tonumber(redis.call('GET', KEYS[1]) or '0')
if token ~= tonumber(ARGV[1]) then return redis.error_reply('FENCED token ' .. token) end
redis.call('DEL', KEYS[3])
for i = 3, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
redis.call('SADD', KEYS[2], ARGV[2])
return 1
"""

_FINISH = """
local token = tonumber(redis.call('GET', KEYS[1]) or '0')
if token > tonumber(ARGV[1]) then return redis.error_reply('FENCED token ' .. token) end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 0 then
  if ARGV[3] == 'commit' and redis.call('SISMEMBER', KEYS[6], ARGV[2]) == 1 then
    return -2
  end
  return -1
end
local n = 0
if ARGV[3] == 'commit' then
  local rows = redis.call('LRANGE', KEYS[3], 0, -1)
  for _, r in ipairs(rows) do
    local kv = cjson.decode(r)
    if ARGV[4] ~= '' then
      redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', unpack(kv))
    else
      redis.call('XADD', KEYS[4], '*', unpack(kv))
    end
  end
  n = #rows
end
if ARGV[3] == 'abandon' then redis.call('SADD', KEYS[5], ARGV[2]) end
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[2], ARGV[2])
return n
"""

_FENCE = """
local token = tonumber(redis.call('GET', KEYS[1]) or '0')
if token > tonumber(ARGV[1]) then return redis.error_reply('FENCED token ' .. token) end
redis.call('SET', KEYS[1], ARGV[1])
return token
"""


def _check_codec(codec: str, who: str) -> None:
    if codec not in CODECS:
        raise SinkError(f"{who} codec {codec!r} is not supported; use one of {CODECS}")


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5,
                                decode_responses=True)


class RedisStreamSpout(ReplayableSpout):
    """Read entries of one or more Redis streams; emits ``(*fields, "stream", "id",
    "timestamp")``.

    Args:
        url: ``redis://host:port/db``.
        streams: A stream key or a list of them (the splits; task ``i`` of ``n`` reads every
            ``n``-th of the sorted list).
        fields: Entry fields to emit, in order (a missing field emits ``None``).
        codec: ``"json"`` (values decoded with ``json.loads``, as :class:`RedisStreamSink`
            writes them) or ``"text"`` (plain strings).
        batch: Most entries per ``next_tuple``.
        idle_timeout_ms: A stream without new entries this long is idle (does not hold the
            watermark back); ``None`` = never.
        max_lag_ms: Bounded out-of-orderness of event time (the entry id's milliseconds).
        start: Entry id to start after on a fresh start (``"0-0"``: from the beginning).
        bounded: Finish (a finite job) the first time every owned stream has no entry
            after the offset; otherwise read forever.
        connect_timeout_ms: How long ``open`` waits for the server, logging what it waits
            for; then the topology fails naming the server (docs/errors.md).

    Example:
        >>> RedisStreamSpout("redis://127.0.0.1:6379/0", ["orders-0", "orders-1"],
        ...                  fields=("key", "value"))  # doctest: +SKIP
    """

    def __init__(self, url: str, streams: str | Sequence[str],
                 fields: Sequence[str] = ("key", "value"), codec: str = "json",
                 batch: int = 500, idle_timeout_ms: float | None = 10_000.0,
                 max_lag_ms: float = 0.0, start: str = "0-0", bounded: bool = False,
                 connect_timeout_ms: float = 30_000.0) -> None:
        names = [streams] if isinstance(streams, str) else list(streams)
        if not names:
            raise SourceError("RedisStreamSpout needs at least one stream key")
        if codec not in CODECS:
            raise SourceError(f"RedisStreamSpout codec {codec!r} is not supported; use one "
                              f"of {CODECS}")
        if batch < 1:
            raise SourceError(f"RedisStreamSpout batch={batch!r} must be >= 1")
        self.url = url
        self.streams = names
        self.fields = tuple(fields)
        self.codec = codec
        self.batch = batch
        self.idle_timeout_ms = idle_timeout_ms
        self.max_lag_ms = max_lag_ms
        self.start = start
        self.bounded = bounded
        self.connect_timeout_ms = connect_timeout_ms  # open() waits this long (splits.py)
        self.outputs = (*self.fields, "stream", "id", "timestamp")  # type: ignore[misc]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_client", None)
        return state

    def describe_source(self) -> str:
        """Server and streams, for the messages of ``open``'s wait."""
        return f"RedisStreamSpout: Redis at {self.url} (streams {', '.join(self.streams)})"

    def connect(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Connect to the server (and check that it answers)."""
        self.__dict__["_client"] = _redis(self.url)
        self.__dict__["_offsets_key"] = (f"jstorm:offsets:{context.topology}:"
                                         f"{context.component}")
        self.__dict__["_client"].ping()  # no server: open() waits for it, then says so

    def list_splits(self) -> list[str]:
        """The stream keys."""
        return list(self.streams)

    def initial_offset(self, split: Any) -> str:
        """``start`` (default ``"0-0"``: the first entry)."""
        return self.start

    def _decode(self, raw: str | None) -> Any:
        if raw is None or self.codec == "text":
            return raw
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise SourceError(f"RedisStreamSpout: value {raw[:80]!r} is not JSON "
                              f"(use codec='text' for plain strings)") from exc

    def read_splits(self, offsets: Mapping[Any, Any],
                    limit: int) -> list[tuple[Any, SplitRecord]]:
        """One non-blocking ``XREAD COUNT limit`` over the owned streams."""
        import redis

        try:
            reply = self.__dict__["_client"].xread(dict(offsets), count=limit)
        except redis.RedisError as exc:
            raise SourceError(f"RedisStreamSpout cannot read {list(offsets)} at "
                              f"{self.url}: {exc}") from exc
        out: list[tuple[Any, SplitRecord]] = []
        for stream, entries in reply or ():
            for entry_id, kv in entries:
                ms = float(entry_id.split("-", 1)[0])
                values = [self._decode(kv.get(f)) for f in self.fields]
                out.append((stream, SplitRecord((*values, stream, entry_id, ms), entry_id, ms)))
        return out

    def release_offsets(self, offsets: Mapping[Any, Any]) -> None:
        """Write a completed checkpoint's offsets to ``jstorm:offsets:<topology>:<component>``."""
        import redis

        if not offsets:
            return
        try:
            self.__dict__["_client"].hset(self.__dict__["_offsets_key"], mapping=dict(offsets))
        except redis.RedisError as exc:  # monitoring only: the checkpoint holds the truth
            _log.warning("RedisStreamSpout could not record offsets: %s", exc)

    def close(self) -> None:
        """Close the connection."""
        client = self.__dict__.pop("_client", None)
        if client is not None:
            client.close()


class RedisStreamSink(TwoPhaseCommitSink):
    """Append every input tuple as one entry of ``stream``, exactly once.

    Args:
        url: ``redis://host:port/db``.
        stream: The stream key written.
        fields: Tuple fields written as entry fields (default: all of the input's fields).
        codec: ``"json"`` (values written as JSON text) or ``"text"`` (``str(value)``).
        maxlen: If set, trim the stream to about this many entries (``MAXLEN ~``).

    Example:
        >>> RedisStreamSink("redis://127.0.0.1:6379/0", "totals")  # doctest: +SKIP
    """

    def __init__(self, url: str, stream: str, fields: Sequence[str] | None = None,
                 codec: str = "json", maxlen: int | None = None) -> None:
        _check_codec(codec, "RedisStreamSink")
        if maxlen is not None and maxlen < 1:
            raise SinkError(f"RedisStreamSink maxlen={maxlen!r} must be >= 1 or None")
        self.url = url
        self.stream = stream
        self.fields = tuple(fields) if fields is not None else None
        self.codec = codec
        self.maxlen = maxlen

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for k in ("_client", "_scripts"):
            state.pop(k, None)
        return state

    def connect(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Connect and register the scripts."""
        client = _redis(self.url)
        self.__dict__["_client"] = client
        self.__dict__["_scripts"] = {name: client.register_script(body) for name, body in
                                     (("stage", _STAGE), ("finish", _FINISH),
                                      ("fence", _FENCE))}

    def _key(self, suffix: str) -> str:
        return f"jstorm:2pc:{self.topology}:{self.task_id}:{suffix}"

    def _fence_key(self) -> str:
        """The task's fencing token, per run (``fence_owner``): a new run's generations
        restart at 1 and must not meet an earlier run's token."""
        return f"jstorm:2pc:{self.fence_owner}:{self.task_id}:fence"

    def row_of(self, tup: Tuple) -> str:
        """The entry as JSON ``[field, value, field, value, ...]`` (values encoded)."""
        names = self.fields or tup.fields
        flat: list[str] = []
        try:
            for f in names:
                v = tup[f]
                flat += [f, json.dumps(v) if self.codec == "json" else str(v)]
        except KeyError as exc:
            raise SinkError(f"RedisStreamSink field {exc.args[0]!r} is not a field of the "
                            f"input stream {tup.fields}") from exc
        except TypeError as exc:
            raise SinkError(f"RedisStreamSink cannot encode a value as JSON: {exc}") from exc
        return json.dumps(flat, separators=(",", ":"))

    def _run(self, script: str, keys: list[str], args: list[Any], doing: str) -> Any:
        import redis

        try:
            return self.__dict__["_scripts"][script](keys=keys, args=args)
        except redis.ResponseError as exc:
            if str(exc).startswith("FENCED"):
                raise FencedError(f"RedisStreamSink task {self.task_id} generation "
                                  f"{self.generation} is fenced ({exc}): not {doing}") from exc
            raise SinkError(f"RedisStreamSink failed {doing} at {self.url}: {exc}") from exc
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise SinkUnavailableError(f"RedisStreamSink cannot reach {self.url} while "
                                       f"{doing}: {exc}") from exc
        except redis.RedisError as exc:
            raise SinkError(f"RedisStreamSink failed {doing} at {self.url}: {exc}") from exc

    def stage_transaction(self, checkpoint_id: int, rows: list[Any]) -> None:
        """Stage the entries under ``txn:<n>`` (fenced; an empty transaction stages nothing)."""
        if not rows:
            return
        self._run("stage", [self._fence_key(), self._key("staged"),
                            self._key(f"txn:{checkpoint_id}")],
                  [self.generation, checkpoint_id, *rows],
                  f"staging {self.transaction_name(checkpoint_id)}")

    def _abandoned_key(self, owner: str) -> str:
        """The set of transaction ids ``owner``'s recoveries discarded (a run:
        :attr:`fence_owner`)."""
        return f"jstorm:2pc:{owner}:{self.task_id}:abandoned"

    def _finish(self, checkpoint_id: int, verb: str) -> None:
        done = self._run("finish", [self._fence_key(), self._key("staged"),
                                    self._key(f"txn:{checkpoint_id}"), self.stream,
                                    self._abandoned_key(self.fence_owner),
                                    self._abandoned_key(self.abandoned_owner(checkpoint_id))],
                         [self.generation, checkpoint_id, verb, self.maxlen or ""],
                         f"{verb}ing {self.transaction_name(checkpoint_id)}")
        if done == -2:
            raise self.abandoned_error(checkpoint_id, f"stream {self.stream!r} at {self.url}")

    def commit_transaction(self, checkpoint_id: int) -> None:
        """Append staged ``n`` to the stream and forget it, atomically (no-op if not staged)."""
        self._finish(checkpoint_id, "commit")

    def abort_transaction(self, checkpoint_id: int) -> None:
        """Forget staged ``n`` (no-op if not staged)."""
        self._finish(checkpoint_id, "abort")

    def abandon_transaction(self, checkpoint_id: int) -> None:
        """Forget staged ``n`` and add it to this run's ``abandoned`` set, atomically."""
        self._finish(checkpoint_id, "abandon")

    def staged_transactions(self) -> list[int]:
        """Ids in this task's ``staged`` set."""
        import redis

        try:
            members = self.__dict__["_client"].smembers(self._key("staged"))
        except redis.ConnectionError as exc:
            raise SinkUnavailableError(f"RedisStreamSink cannot reach {self.url}: {exc}") \
                from exc
        return sorted(int(m) for m in members)

    def fence_installed(self) -> bool:
        """Whether this run's ``fence`` key exists (a recovery of this run fenced)."""
        import redis

        try:
            return bool(self.__dict__["_client"].exists(self._fence_key()))
        except redis.RedisError as exc:
            raise SinkUnavailableError(f"RedisStreamSink cannot reach {self.url}: {exc}") \
                from exc

    def install_fence(self) -> None:
        """Set the task's fencing token to this generation (refused if a newer one holds it)."""
        self._run("fence", [self._fence_key()], [self.generation], "installing the fence")

    def cleanup(self) -> None:
        """Close the connection."""
        client = self.__dict__.pop("_client", None)
        if client is not None:
            client.close()
