"""Fused chains, and the base every compiled dataflow bolt shares.

* :class:`DataflowBolt`: decodes its inputs (:mod:`~jstormpy.dataflow.records`), runs
  the steps fused after the operator and emits the items, keyed or not.
* :class:`ChainBolt`: consecutive ``map`` / ``filter`` / ``flat_map`` steps fused into
  one function per item (no tuple between them), optionally ending in a ``key_by``
  that adds the hidden key field the next keyed operator is fields-grouped on.
* :func:`bind_rows`: how a keyed operator binds its loop over input rows as its
  ``execute`` and ``execute_batch``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from itertools import compress
from operator import itemgetter
from types import FunctionType
from typing import Any, NamedTuple

from jstormpy.api.batch import mark_failed_record
from jstormpy.api.component import Bolt, TopologyContext, Tuple
from jstormpy.dataflow.records import (
    ITEM_FIELDS,
    KEYED_FIELDS,
    SELF_KEYED_FIELDS,
    Wire,
    decode_item,
)

InputKey = tuple[str, str]
"""``(source component, stream)`` of one subscription."""


class StepKind(Enum):
    """A stateless step that fuses into a chain."""

    MAP = "map"
    FILTER = "filter"
    FLAT_MAP = "flat_map"


class Step(NamedTuple):
    """One fused step: its kind and the user's function."""

    kind: StepKind
    fn: Callable[[Any], Any]


def chain_steps(steps: Sequence[Step], out: Callable[[Any], None]) -> Callable[[Any], None]:
    """One function running ``steps`` on an item and handing every result to ``out``.

    Example:
        >>> got = []
        >>> run = chain_steps([Step(StepKind.FLAT_MAP, lambda s: s.split()),
        ...                    Step(StepKind.FILTER, lambda w: w != "a"),
        ...                    Step(StepKind.MAP, str.upper)], got.append)
        >>> run("a cat a dog"); got
        ['CAT', 'DOG']
    """
    run = out
    for step in reversed(steps):
        run = _fuse(step, run)
    return run


def _fuse(step: Step, after: Callable[[Any], None]) -> Callable[[Any], None]:
    fn = step.fn
    if step.kind is StepKind.MAP:
        def run_map(item: Any) -> None:
            after(fn(item))
        return run_map
    if step.kind is StepKind.FILTER:
        def run_filter(item: Any) -> None:
            if fn(item):
                after(item)
        return run_filter

    def run_flat_map(item: Any) -> None:
        for each in fn(item):
            after(each)
    return run_flat_map


def chain_batch(steps: Sequence[Step]) -> Callable[[list[Any]], list[Any]]:
    """One function running ``steps`` over a list of items, a step at a time over the
    whole list (C-level ``map`` and ``compress`` passes for ``map`` and ``filter``): the
    same results, in the same order, as :func:`chain_steps` item by item. An error
    raised by a step's function is marked with the item that step was given
    (:func:`~jstormpy.api.batch.mark_failed_record`).

    Example:
        >>> run = chain_batch([Step(StepKind.FLAT_MAP, lambda s: s.split()),
        ...                    Step(StepKind.FILTER, lambda w: w != "a"),
        ...                    Step(StepKind.MAP, str.upper)])
        >>> run(["a cat", "a dog"])
        ['CAT', 'DOG']
    """
    passes = [_batch_step(step) for step in steps]

    def run(items: list[Any]) -> list[Any]:
        for each in passes:
            if not items:
                break
            items = each(items)
        return items
    return run


def _batch_step(step: Step) -> Callable[[list[Any]], list[Any]]:
    fn = step.fn
    if step.kind is StepKind.MAP:
        return lambda items: _map_marked(fn, items)
    if step.kind is StepKind.FILTER:
        return lambda items: list(compress(items, _map_marked(fn, items)))

    def flat_map(items: list[Any]) -> list[Any]:
        out: list[Any] = []
        extend = out.extend
        item = None
        try:
            for item in items:
                extend(fn(item))
        except Exception as exc:
            mark_failed_record(exc, item)
            raise
        return out
    return flat_map


def _map_marked(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``list(map(fn, items))``; an error is marked with the item it was raised on (the
    list extended so far tells which: ``list.extend`` keeps what it appended)."""
    out: list[Any] = []
    try:
        out.extend(map(fn, items))
    except Exception as exc:
        mark_failed_record(exc, items[len(out)] if len(out) < len(items) else None)
        raise
    return out


class DataflowBolt(Bolt):
    """Base of the compiled bolts: decodes its inputs, runs its fused tail, emits items.

    ``inputs`` maps each subscription to the layout of what it carries; ``steps`` run on
    every item the operator produces; ``key_fn`` (a ``key_by``) makes the output keyed:
    a function of the item, or a field name (the key is ``item[field]``, read inline).
    """

    _df_execute: Callable[[Tuple], None]
    """A keyed operator's per-tuple function, bound at ``prepare`` (:func:`bind_rows`)."""

    def __init__(self, inputs: Mapping[InputKey, Wire], steps: Sequence[Step] = (),
                 key_fn: Callable[[Any], Any] | str | None = None) -> None:
        self.inputs = dict(inputs)
        self.steps = tuple(steps)
        self.key_fn = key_fn
        self.outputs = (  # type: ignore[misc]
            ITEM_FIELDS if key_fn is None else
            SELF_KEYED_FIELDS if is_identity(key_fn) else KEYED_FIELDS)

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Build the fused function that runs the tail steps and emits."""
        emit = self.emit
        # an identity key (the item is its key, decided at build: ``outputs``) emits
        # ``(item,)`` as an unkeyed step does
        self_keyed = tuple(self.outputs) == SELF_KEYED_FIELDS
        key_fn = None if self_keyed else key_function(self.key_fn)
        field = self.key_fn if isinstance(self.key_fn, str) else None
        steps = self.steps
        if steps and steps[-1].kind is StepKind.FLAT_MAP:
            # the usual tail (a split before a key_by): emit each result in the loop, one
            # call per result less than flat_map handing each to ``out``
            fn = steps[-1].fn
            if key_fn is None:
                def out(item: Any) -> None:
                    for each in fn(item):
                        emit((each,))
            elif field is not None:  # key_by("field"): a subscript, no call
                def out(item: Any) -> None:
                    for each in fn(item):
                        emit((each[field], each))
            else:
                def out(item: Any) -> None:
                    for each in fn(item):
                        emit((key_fn(each), each))
            steps = steps[:-1]
        elif key_fn is None:
            def out(item: Any) -> None:
                emit((item,))
        elif field is not None:
            def out(item: Any) -> None:
                emit((item[field], item))
        else:
            def out(item: Any) -> None:
                emit((key_fn(item), item))
        self._df_out = chain_steps(steps, out)

    def decode(self, tup: Tuple) -> Any:
        """The item ``tup`` carries."""
        return decode_item(self.inputs[(tup.source, tup.stream)], tup)


class ChainBolt(DataflowBolt):
    """Fused ``map`` / ``filter`` / ``flat_map`` steps (and a final ``key_by``)."""

    def prepare(self, conf: dict[str, Any], context: TopologyContext) -> None:
        """Build the fused function, and with one input, bind one per-tuple function
        that reads the item off the tuple and runs the chain (no decode dispatch per
        tuple); a lone ``flat_map`` (the usual split before a ``key_by``) runs in it."""
        super().prepare(conf, context)
        if len(self.inputs) != 1:
            return  # a union: each tuple's layout is looked up by its source
        (wire,) = self.inputs.values()
        execute = _read_then(wire, self._df_out)
        steps, key_fn, emit = self.steps, self.key_fn, self.emit
        if isinstance(key_fn, str) or tuple(self.outputs) == SELF_KEYED_FIELDS:
            key_fn = None  # key_by("field") or an identity key: ``_df_out`` emits
        if len(steps) == 1 and steps[0].kind is StepKind.FLAT_MAP and key_fn is not None:
            fn = steps[0].fn
            if wire is Wire.RAW:
                def execute(tup: Tuple) -> None:
                    for each in fn(tup.as_dict()):
                        emit((key_fn(each), each))
            elif wire is Wire.ITEM:
                def execute(tup: Tuple) -> None:
                    for each in fn(tup.values[0]):
                        emit((key_fn(each), each))
        if execute is not None:
            # the engine looks ``execute`` up on the instance: the bound function
            self.__dict__["execute"] = execute
        if conf.get("guarantee", "exactly_once") == "at_most_once":
            return  # per tuple: a user error skips only its tuple (see bind_rows)
        self.__dict__["execute_batch"] = self._batch_function(wire)

    def _batch_function(self, wire: Wire) -> Callable[[Any], None]:
        """The chain over a whole channel batch: each step over the batch's items at
        once (:func:`chain_batch`), the results emitted with one ``emit_batch``."""
        run = chain_batch(self.steps)
        emit_batch = self.emit_batch
        key_fn = (key_function(self.key_fn) if tuple(self.outputs) == KEYED_FIELDS
                  else None)

        def emit(out: list[Any]) -> None:
            if key_fn is None:
                emit_batch((out,))
            else:
                emit_batch((_map_marked(key_fn, out), out))

        if wire is Wire.RAW:
            def execute_batch(batch: Any) -> None:
                out = run(list(raw_items(batch)))
                if out:
                    emit(out)
        elif wire is Wire.ITEM or wire is Wire.KEYED or wire is Wire.LATE:
            pos = 0 if wire is Wire.ITEM else -1

            def execute_batch(batch: Any) -> None:
                out = run(batch[pos])
                if out:
                    emit(out)
        else:
            decode = self.decode

            def execute_batch(batch: Any) -> None:
                out = run([decode(tup) for tup in batch])
                if out:
                    emit(out)
        return execute_batch

    def execute(self, tup: Tuple) -> None:
        """Run the chain on the tuple's item."""
        self._df_out(self.decode(tup))


def _identity(item: Any) -> Any:
    return item


_IDENTITY_CODE = _identity.__code__.co_code


def is_identity(key: Any) -> bool:
    """Whether the ``key_by`` function returns its argument unchanged (``lambda w: w``):
    a plain function whose bytecode is this interpreter's ``return first_argument``.
    Its stream is sent as ``(item,)`` (:data:`~jstormpy.dataflow.records.SELF_KEYED_FIELDS`)
    and the function is never called: the key is the item.

    Example:
        >>> is_identity(lambda w: w), is_identity(lambda w: w.lower()), is_identity(str)
        (True, False, False)
    """
    code = getattr(key, "__code__", None)
    return (type(key) is FunctionType and code is not None  # not a bound method
            and code.co_argcount == 1 and code.co_code == _IDENTITY_CODE)


def key_function(key: Callable[[Any], Any] | str | None) -> Callable[[Any], Any] | None:
    """A ``key_by``'s key as a function of the item: the user's function, or for a field
    name ``operator.itemgetter(field)`` (C code: no Python call per record).

    Example:
        >>> key_function("user")({"user": "u1", "n": 2}), key_function(None)
        ('u1', None)
    """
    if isinstance(key, str):
        return itemgetter(key)
    return key


def raw_items(batch: Any) -> Iterable[dict[str, Any]]:
    """The items of a batch of a spout's own tuples: ``{field: value}`` per row, as
    ``Tuple.as_dict`` gives (a shorter row, from an older version, has fewer fields)."""
    index = batch.field_index
    names = tuple(index)
    if tuple(index.values()) == tuple(range(len(names))):
        rows = batch.rows
        try:  # a dict display per row: a sixth of dict(zip(...))'s cost
            if len(names) == 1:
                (n0,) = names
                return [{n0: row[0]} for row in rows]
            if len(names) == 2:
                n0, n1 = names
                return [{n0: row[0], n1: row[1]} for row in rows]
        except IndexError:  # a shorter row: the general way below
            pass
        return (dict(zip(names, row, strict=False))  # zip stops at a short row
                for row in rows)
    return (tup.as_dict() for tup in batch)


def _read_then(wire: Wire, run: Callable[[Any], None]) -> Callable[[Tuple], None] | None:
    """A per-tuple function reading the item of layout ``wire`` and calling ``run``."""
    if wire is Wire.ITEM:
        def item(tup: Tuple) -> None:
            run(tup.values[0])
        return item
    if wire is Wire.KEYED or wire is Wire.LATE:
        def keyed(tup: Tuple) -> None:
            run(tup.values[-1])
        return keyed
    if wire is Wire.RAW:
        def raw(tup: Tuple) -> None:
            run(tup.as_dict())
        return raw
    return None


def bind_rows(bolt: DataflowBolt, conf: Mapping[str, Any],
              run_rows: Callable[[Iterable[Sequence[Any]]], None]) -> None:
    """Bind a keyed operator's loop over input rows ``(key, item)`` as its ``execute``
    and, unless the run is at-most-once, as its ``execute_batch`` (one call per channel
    batch, no Tuple per record).

    At-most-once keeps the per-tuple path: there a user error skips only the failing
    tuple, while a failing ``execute_batch`` skips the rest of its batch. Under
    exactly-once and at-least-once both roll back and replay, so the output is the same.
    The engine looks both up on the instance (after ``prepare``): bound functions, no
    method dispatch per tuple.
    """
    def execute(tup: Tuple) -> None:
        run_rows((tup.values,))

    bolt.__dict__["_df_execute"] = bolt.__dict__["execute"] = execute
    if conf.get("guarantee", "exactly_once") != "at_most_once":
        def execute_batch(batch: Any) -> None:
            run_rows(batch.rows)

        bolt.__dict__["execute_batch"] = execute_batch


__all__ = ["ChainBolt", "DataflowBolt", "InputKey", "Step", "StepKind", "bind_rows",
           "chain_batch", "chain_steps", "is_identity", "key_function", "raw_items"]
