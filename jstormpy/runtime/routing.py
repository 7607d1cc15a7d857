"""Output side of a task: groupings compiled into routes, per-channel batches, markers.

``emit`` appends the values to a per-(route, target) batch; a batch is sent when it
reaches ``batch_size`` or when the executor flushes (linger expired / input idle /
before a barrier or watermark). Per-tuple work here is one routing decision and a list
append: everything else is per batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Any

from jstormpy.api.batch import rows_from_columns
from jstormpy.api.component import Tuple
from jstormpy.api.errors import JStormError, TopologyError
from jstormpy.keygroups import KeyRouter, default_max_parallelism
from jstormpy.runtime.channel_plan import output_targets
from jstormpy.runtime.combine import CombiningAggregation, PartialBuffers


class MessageKind(IntEnum):
    """What an item on a channel is: every item is ``(src_task, kind, stream, payload)``.

    Not a frame type: a transport DATA frame (:class:`jstormpy.runtime.frames.FrameType`)
    carries one item of any kind. Items carry the plain ``int`` value: marshal, the data
    plane's fast codec, encodes exact ints only (an enum member would send every batch
    through pickle), and compares against a plain int are the cheapest per item.
    """

    DATA = 0
    BARRIER = 1
    WATERMARK = 2
    END_OF_STREAM = 3


_DATA = int(MessageKind.DATA)
COMBINE_KEYS_PER_ROW = 8
"""A combining route sends a target's partials on its own once they hold this many
times ``batch_size`` keys (a partial stands for many records; the linger, barriers,
watermarks and the end of the stream send them sooner)."""



def raise_arity_error(component: str, stream: str, fields: Sequence[str], values: Any) -> None:
    """Raise the error for an emit whose values do not match the stream's declared fields
    (called only once a check found the mismatch: the per-tuple check is an inline
    ``len``)."""
    try:
        got = f"{len(values)} value(s)"
    except TypeError:
        got = f"a {type(values).__name__}, not a sequence of values,"
    shown = repr(values)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    raise TopologyError(f"component {component!r} emitted {got} {shown} on stream {stream!r}, "
                        f"which declares {len(fields)} field(s) {tuple(fields)}: emit one "
                        f"value per declared field, in order (or change `outputs`)")


class QuiescentBarrier(int):
    """The payload of the barrier of a gray release's quiescent checkpoint: the
    checkpoint id (an ``int`` everywhere), marking that no task may emit on its own after
    it (spouts stop, ticks pause) until ``ResumeSpouts``. Forwarded as received."""

    __slots__ = ()


SendFn = Callable[[int, tuple[Any, ...]], None]


class Route:
    """One consumer subscription of one stream, seen from one emitting task."""

    __slots__ = ("kind", "stream", "targets", "buffers", "rr", "n", "key_index", "custom",
                 "src", "batch_size", "send", "local_targets", "local_rr", "consumer",
                 "target_pos", "add", "key_pos", "rows_out", "partials")

    def __init__(self, kind: str, stream: str, consumer: str, targets: Sequence[int],
                 src: int, send: SendFn, batch_size: int, key_index: tuple[int, ...] = (),
                 custom: Any = None, local_targets: Sequence[int] = (),
                 max_parallelism: int = 0,
                 combine: CombiningAggregation | None = None,
                 make_tuple: Callable[[Any], Any] | None = None,
                 ts_index: int | None = None) -> None:
        self.kind = kind
        self.stream = stream
        self.consumer = consumer
        self.targets = list(targets)
        self.n = len(self.targets)
        self.buffers: list[list[Any]] = [[] for _ in self.targets]
        self.rr = src % max(self.n, 1)
        self.key_index = key_index
        self.custom = custom
        self.src = src
        self.batch_size = batch_size
        self.send = send
        self.rows_out = 0
        """Rows this route has sent (its buffers hold the rest of what entered it)."""
        self.target_pos = {t: i for i, t in enumerate(self.targets)}
        self.local_targets = [self.target_pos[t] for t in local_targets]
        self.local_rr = itertools.cycle(self.local_targets) if self.local_targets else None
        # fields grouping: key -> key group -> task index (jstormpy/keygroups.py)
        self.key_pos = KeyRouter(max_parallelism or default_max_parallelism(self.n),
                                 max(self.n, 1))
        self.partials: PartialBuffers | None = None
        """Combining before the shuffle (``runtime/combine.py``): the per-target partial
        accumulators of a fields route whose consumer accepts them; its batches of
        records go to them (``self.send``), the partials to ``send``."""
        if combine is not None and kind == "fields" and make_tuple is not None:
            self.partials = PartialBuffers(combine, self.targets, (src, _DATA, stream),
                                           key_index, make_tuple,
                                           batch_size * COMBINE_KEYS_PER_ROW, send,
                                           ts_index)
            self.send = self.partials.send
        self.add = self._compile()

    def _compile(self) -> Callable[[Any], None]:
        """The per-tuple routing function, specialised once for the common groupings."""
        bufs = self.buffers
        targets = self.targets
        send = self.send
        n = self.n
        bs = self.batch_size
        head = (self.src, _DATA, self.stream)
        if self.kind == "fields" and len(self.key_index) == 1:
            k = self.key_index[0]
            kget, kmiss = self.key_pos.cache.get, self.key_pos.miss

            def add_fields(values: Any) -> None:
                i = kget(values[k])
                if i is None:
                    i = kmiss(values[k])
                buf = bufs[i]
                buf.append(values)
                if len(buf) >= bs:
                    bufs[i] = []
                    self.rows_out += len(buf)
                    send(targets[i], (*head, buf))

            return add_fields
        if self.kind in ("shuffle", "none") or (self.kind == "local_or_shuffle"
                                                 and not self.local_targets):
            def add_shuffle(values: Any) -> None:
                self.rr = i = (self.rr + 1) % n
                buf = bufs[i]
                buf.append(values)
                if len(buf) >= bs:
                    bufs[i] = []
                    self.rows_out += len(buf)
                    send(targets[i], (*head, buf))

            return add_shuffle
        if self.kind == "global":
            def add_global(values: Any) -> None:
                buf = bufs[0]
                buf.append(values)
                if len(buf) >= bs:
                    bufs[0] = []
                    self.rows_out += len(buf)
                    send(targets[0], (*head, buf))

            return add_global
        return self.add_generic

    def add_generic(self, values: Any) -> None:
        """Route one tuple's values into the right batch(es) (any grouping)."""
        for i in self.choose(values):
            self._append(i, values)

    def add_tracked(self, values: Any) -> list[int]:
        """Route one tuple like :meth:`add` and return the task ids it went to (Storm's
        ``emit`` return value; the multilang protocol's ``need_task_ids``)."""
        chosen = self.choose(values)
        for i in chosen:
            self._append(i, values)
        return [self.targets[i] for i in chosen]

    def choose(self, values: Any) -> list[int]:
        """The target positions of one tuple (advances the round robin of shuffles)."""
        kind = self.kind
        if kind == "fields":
            ki = self.key_index
            key = values[ki[0]] if len(ki) == 1 else tuple(values[i] for i in ki)
            return [self.key_pos(key)]
        if kind in ("shuffle", "none") or (kind == "local_or_shuffle"
                                            and self.local_rr is None):
            self.rr = i = (self.rr + 1) % self.n
            return [i]
        if kind == "local_or_shuffle":
            assert self.local_rr is not None
            return [next(self.local_rr)]
        if kind == "global":
            return [0]
        if kind == "all":
            return list(range(self.n))
        if kind == "custom":
            chosen = []
            for task in self.custom.choose_tasks(self.src, values):
                pos = self.target_pos.get(task)
                if pos is None:
                    raise JStormError(f"custom grouping {type(self.custom).__name__} chose task "
                                      f"{task}, which is not a task of {self.consumer!r} "
                                      f"(tasks {self.targets})")
                chosen.append(pos)
            return chosen
        return []  # direct: only emit_direct routes to it

    def add_direct(self, task: int, values: Any) -> None:
        """Route to one chosen task (direct grouping)."""
        pos = self.target_pos.get(task)
        if pos is None:
            raise JStormError(f"emit_direct to task {task}, which is not a task of "
                              f"{self.consumer!r} (tasks {self.targets})")
        self._append(pos, values)

    def add_rows(self, rows: Sequence[Any]) -> None:
        """Route a whole batch of rows in one pass (the batch API's ``emit_batch``).

        Fields grouping partitions the batch by key hash into one part per target;
        shuffle-like groupings hand ``batch_size`` chunks round-robin to targets; rows go
        into the same per-target buffers as single emits, so mixing keeps order.
        """
        kind = self.kind
        n = self.n
        if kind == "fields":
            parts: list[list[Any]] = [[] for _ in range(n)]
            put = [p.append for p in parts]
            ki = self.key_index
            pos = self.key_pos
            if len(ki) == 1:
                k = ki[0]
                kget, kmiss = pos.cache.get, pos.miss  # the memo inline, as in emit
                for r in rows:
                    i = kget(r[k])
                    put[kmiss(r[k]) if i is None else i](r)
            else:
                for r in rows:
                    put[pos(tuple(r[i] for i in ki))](r)
            for i, part in enumerate(parts):
                if part:
                    self._extend(i, part)
        elif kind in ("shuffle", "none", "local_or_shuffle"):
            bs = self.batch_size
            for start in range(0, len(rows), bs):
                if self.local_rr is not None:
                    i = next(self.local_rr)
                else:
                    self.rr = i = (self.rr + 1) % n
                self._extend(i, rows[start:start + bs])
        elif kind == "global":
            self._extend(0, rows)
        elif kind == "all":
            for i in range(n):
                self._extend(i, rows)
        else:  # custom (per-row choice); direct is only reached through emit_direct
            for r in rows:
                self.add_generic(r)

    def _extend(self, i: int, rows: Sequence[Any]) -> None:
        buf = self.buffers[i]
        buf.extend(rows)
        bs = self.batch_size
        if len(buf) >= bs:
            self.buffers[i] = []
            self.rows_out += len(buf)
            head = (self.src, _DATA, self.stream)
            target = self.targets[i]
            for start in range(0, len(buf), bs):
                self.send(target, (*head, buf[start:start + bs] if start or len(buf) > bs
                                   else buf))

    def _append(self, i: int, values: Any) -> None:
        buf = self.buffers[i]
        buf.append(values)
        if len(buf) >= self.batch_size:
            self.buffers[i] = []
            self.rows_out += len(buf)
            self.send(self.targets[i], (self.src, _DATA, self.stream, buf))

    def flush(self) -> None:
        """Send every non-empty batch (a combining route: fold them, then send the
        partials)."""
        bufs = self.buffers
        for i, buf in enumerate(bufs):
            if buf:
                bufs[i] = []
                self.rows_out += len(buf)
                self.send(self.targets[i], (self.src, _DATA, self.stream, buf))
        if self.partials is not None:
            self.partials.flush()


class OutputCollector:
    """What ``Component.emit`` talks to: routes per stream, flushing, in-band markers."""

    def __init__(self, task_id: int, component: str, routes: dict[str, list[Route]],
                 channels: Sequence[int], send: SendFn,
                 streams: dict[str, tuple[str, ...]] | None = None) -> None:
        self.task_id = task_id
        self.streams = streams or {}
        self.component = component
        self.routes = routes
        self.all_routes = [r for rs in routes.values() for r in rs]
        self.fast = {stream: rs[0].add for stream, rs in routes.items() if len(rs) == 1}
        self.channels = sorted(set(channels))
        self.send = send
        self._emitted = 0  # emits not counted by the fused route
        self.last_watermark = float("-inf")
        self.forwarded = float("-inf")
        """The highest watermark this task has sent, before a restore too
        (:meth:`restore_forwarded`; snapshotted): event-time combining folds only records
        on time under it (``runtime/combine.py``)."""
        self._partials = [r.partials for r in self.all_routes if r.partials is not None]
        self._dirty = False
        self._fused: Route | None = None
        fused = self._fuse_emit()
        if fused is not None:
            self.emit = fused  # type: ignore[method-assign]

    @property
    def emitted(self) -> int:
        """Tuples emitted so far (the fused ``emit`` keeps no per-tuple counter: its
        route's sent rows plus the rows it still buffers)."""
        route = self._fused
        if route is None:
            return self._emitted
        return self._emitted + route.rows_out + sum(map(len, route.buffers))

    @property
    def dirty(self) -> bool:
        """Whether some batch holds tuples not sent yet."""
        if self._dirty:
            return True
        route = self._fused
        return route is not None and (any(route.buffers) or (
            route.partials is not None and route.partials.holding))

    def _fuse_emit(self) -> Callable[..., None] | None:
        """One closure doing ``emit`` + fields/shuffle routing for a one-route stream.

        The common shape (one declared stream read by one consumer) then costs one Python
        call per emitted tuple instead of two; other shapes use the generic ``emit``. It
        keeps no per-tuple counter or flag: ``emitted`` and ``dirty`` are read off the
        route (every tuple of such a collector goes through that one route).
        """
        if len(self.routes) != 1:
            return None
        ((only, rs),) = self.routes.items()
        if len(rs) != 1 or rs[0].kind not in ("fields", "shuffle", "none", "global",
                                              "local_or_shuffle") or \
                (rs[0].kind == "fields" and len(rs[0].key_index) != 1):
            return None
        declared = self.streams.get(only)
        if declared is None:  # arity unknown (collectors built without ``streams``)
            return None
        route = rs[0]
        bufs, targets, send, n, bs = (route.buffers, route.targets, route.send, route.n,
                                      route.batch_size)
        head = (route.src, _DATA, route.stream)
        generic = OutputCollector.emit.__get__(self)
        nf = len(declared)
        component = self.component

        def arity_error(values: Any) -> None:
            raise_arity_error(component, only, declared, values)
        if route.kind == "fields":
            k = route.key_index[0]
            kget, kmiss = route.key_pos.cache.get, route.key_pos.miss

            def emit_fields(values: Sequence[Any], stream: str = "default") -> None:
                if stream != only:
                    generic(values, stream)
                    return
                try:  # a try costs nothing on Python >= 3.11 unless it raises
                    if len(values) != nf:
                        arity_error(values)
                except TypeError:  # not a sequence (e.g. emit(5))
                    arity_error(values)
                i = kget(values[k])
                if i is None:
                    i = kmiss(values[k])
                buf = bufs[i]
                buf.append(values)
                if len(buf) >= bs:
                    bufs[i] = []
                    route.rows_out += len(buf)
                    send(targets[i], (*head, buf))

            self._fused = route
            return emit_fields
        one = 0 if route.kind == "global" else (
            route.local_targets[0] if route.kind == "local_or_shuffle"
            and len(route.local_targets) == 1 else -1)
        if one >= 0:  # one possible target (global, or one local task): no choice per emit
            def emit_one(values: Sequence[Any], stream: str = "default") -> None:
                if stream != only:
                    generic(values, stream)
                    return
                try:  # a try costs nothing on Python >= 3.11 unless it raises
                    if len(values) != nf:
                        arity_error(values)
                except TypeError:  # not a sequence (e.g. emit(5))
                    arity_error(values)
                buf = bufs[one]
                buf.append(values)
                if len(buf) >= bs:
                    bufs[one] = []
                    route.rows_out += len(buf)
                    send(targets[one], (*head, buf))

            self._fused = route
            return emit_one
        if route.kind == "local_or_shuffle" and route.local_rr:
            pick = route.local_rr.__next__

            def emit_fixed(values: Sequence[Any], stream: str = "default") -> None:
                if stream != only:
                    generic(values, stream)
                    return
                try:  # a try costs nothing on Python >= 3.11 unless it raises
                    if len(values) != nf:
                        arity_error(values)
                except TypeError:  # not a sequence (e.g. emit(5))
                    arity_error(values)
                i = pick()
                buf = bufs[i]
                buf.append(values)
                if len(buf) >= bs:
                    bufs[i] = []
                    route.rows_out += len(buf)
                    send(targets[i], (*head, buf))

            self._fused = route
            return emit_fixed

        def emit_shuffle(values: Sequence[Any], stream: str = "default") -> None:
            if stream != only:
                generic(values, stream)
                return
            try:  # a try costs nothing on Python >= 3.11 unless it raises
                if len(values) != nf:
                    arity_error(values)
            except TypeError:  # not a sequence (e.g. emit(5))
                arity_error(values)
            route.rr = i = (route.rr + 1) % n
            buf = bufs[i]
            buf.append(values)
            if len(buf) >= bs:
                bufs[i] = []
                route.rows_out += len(buf)
                send(targets[i], (*head, buf))

        self._fused = route
        return emit_shuffle

    def emit(self, values: Sequence[Any], stream: str = "default") -> None:
        """Route one tuple to every subscriber of ``stream``."""
        fields = self.streams.get(stream)
        if fields is not None and (not hasattr(values, "__len__")
                                   or len(values) != len(fields)):
            raise_arity_error(self.component, stream, fields, values)
        add = self.fast.get(stream)
        if add is not None:
            self._emitted += 1
            self._dirty = True
            add(values)
            return
        try:
            routes = self.routes[stream]
        except KeyError:
            raise TopologyError(f"component {self.component!r} emitted on stream {stream!r}, "
                                f"which it does not declare in `outputs` "
                                f"(declared: {sorted(self.routes)})") from None
        self._emitted += 1
        self._dirty = True
        for r in routes:
            r.add(values)

    def emit_tracked(self, values: Sequence[Any], stream: str = "default") -> list[int]:
        """Like :meth:`emit`, returning the task ids the tuple went to (the multilang
        protocol's ``need_task_ids``; slower than ``emit``)."""
        fields = self.streams.get(stream)
        if fields is not None and (not hasattr(values, "__len__")
                                   or len(values) != len(fields)):
            raise_arity_error(self.component, stream, fields, values)
        if stream not in self.routes:
            if stream in self.streams:  # declared, nobody subscribes
                return []
            raise TopologyError(f"component {self.component!r} emitted on stream {stream!r}, "
                                f"which it does not declare in `outputs` "
                                f"(declared: {sorted(self.streams)})")
        if self._fused is None:  # a fused collector counts its route's rows instead
            self._emitted += 1
        self._dirty = True
        tasks: list[int] = []
        for r in self.routes[stream]:
            tasks.extend(r.add_tracked(values))
        return tasks

    def emit_batch(self, data: Any, stream: str = "default") -> None:
        """Route a batch given as columns (``{field: column}`` or sequences in field
        order, see :func:`jstormpy.api.batch.rows_from_columns`) to every subscriber."""
        try:
            routes = self.routes[stream]
        except KeyError:
            raise TopologyError(f"component {self.component!r} emitted on stream {stream!r}, "
                                f"which it does not declare in `outputs` "
                                f"(declared: {sorted(self.routes)})") from None
        fields = self.streams.get(stream)
        if fields is None:
            fields = tuple(data) if isinstance(data, dict) else ()
        rows = rows_from_columns(data, fields, self.component, stream)
        if not rows:
            return
        if self._fused is None:  # a fused collector's route counts its rows itself
            self._emitted += len(rows)
        self._dirty = True
        for r in routes:
            r.add_rows(rows)

    def emit_direct(self, task: int, values: Sequence[Any], stream: str = "default") -> None:
        """Send to one task of the direct-grouped subscriber(s) of ``stream``."""
        routes = [r for r in self.routes.get(stream, ()) if r.kind == "direct"]
        if not routes:
            raise TopologyError(f"component {self.component!r}: emit_direct on stream "
                                f"{stream!r}, which no bolt reads with direct_grouping")
        fields = self.streams.get(stream)
        if fields is not None and (not hasattr(values, "__len__")
                                   or len(values) != len(fields)):
            raise_arity_error(self.component, stream, fields, values)
        self._emitted += 1
        self._dirty = True
        for r in routes:
            r.add_direct(task, values)

    def emit_watermark(self, watermark_ms: float) -> None:
        """Send a watermark on every output channel (only if it advances)."""
        if watermark_ms <= self.last_watermark:
            return
        self.last_watermark = watermark_ms
        self.flush()
        if watermark_ms > self.forwarded:  # partials folded under the old bound went first
            self.restore_forwarded(watermark_ms)
        self.broadcast(MessageKind.WATERMARK, watermark_ms)

    def restore_forwarded(self, watermark_ms: float) -> None:
        """Raise :attr:`forwarded` (a restore: what the snapshot recorded)."""
        self.forwarded = max(self.forwarded, watermark_ms)
        for partials in self._partials:
            partials.raise_bound(self.forwarded)

    def flush(self) -> None:
        """Send every partly filled batch."""
        if self.dirty:
            self._dirty = False
            for r in self.all_routes:
                r.flush()

    def broadcast(self, kind: MessageKind, payload: Any) -> None:
        """Send a marker (barrier, watermark, end of stream) on every output channel."""
        item = (self.task_id, int(kind), "", payload)
        for dst in self.channels:
            self.send(dst, item)


def build_routes(task_id: int, component: str, streams: dict[str, tuple[str, ...]],
                 consumers: list[tuple[str, Any]], component_tasks: dict[str, tuple[int, ...]],
                 task_workers: dict[int, int], send: SendFn,
                 batch_size: int, max_parallelism: int = 0,
                 chained: Mapping[int, int] | None = None,
                 combine: Callable[[str, Any], CombiningAggregation | None] | None = None
                 ) -> tuple[dict[str, list[Route]], list[int]]:
    """Compile the groupings that read from ``component`` into routes for ``task_id``.

    ``consumers`` is ``[(consumer_name, Grouping), ...]``. Returns (routes by stream,
    every output channel's task id). ``max_parallelism`` is the topology's number of key
    groups (0: the default for each consumer's parallelism). ``chained``: consumer task →
    the task it runs chained into (``runtime/channel_plan.py``); such a subscription has
    a channel to the pair only. ``combine(consumer, grouping)``: the consumer's
    aggregation where the subscription may be combined before the shuffle
    (``runtime/combine.py``), else None.
    """
    import copy

    routes: dict[str, list[Route]] = {s: [] for s in streams}
    channels: set[int] = set()
    my_worker = task_workers.get(task_id)
    for consumer, g in consumers:
        targets = sorted(component_tasks[consumer])
        channels.update(output_targets(task_id, targets, chained or {}))
        key_index: tuple[int, ...] = ()
        if g.kind == "fields":
            fields = streams[g.stream]
            key_index = tuple(fields.index(f) for f in g.fields)
        custom = None
        if g.kind == "custom":
            custom = copy.deepcopy(g.custom)
            custom.prepare(component, g.stream, list(targets))
        local = [t for t in targets if task_workers.get(t) == my_worker]
        aggregation = combine(consumer, g) if combine is not None else None
        ts_index = None
        if aggregation is not None and aggregation.timestamp_field is not None:
            fields = streams[g.stream]  # event time: the sender reads the timestamp
            if aggregation.timestamp_field in fields:
                ts_index = fields.index(aggregation.timestamp_field)
            else:
                aggregation = None
        make_tuple = None
        if aggregation is not None:
            make_tuple = Tuple.bound({f: i for i, f in enumerate(streams[g.stream])},
                                     component, g.stream, task_id)
        route = Route(g.kind, g.stream, consumer, targets, task_id, send, batch_size,
                      key_index, custom, local, max_parallelism, aggregation, make_tuple,
                      ts_index)
        routes.setdefault(g.stream, []).append(route)
    return routes, sorted(channels)
