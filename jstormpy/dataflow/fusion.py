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
        run = self._df_out
        execute_batch: Callable[[Any], None] | None = None
        if wire is Wire.RAW:
            if len(steps) == 1 and steps[0].kind is StepKind.FLAT_MAP and key_fn is not None:
                fn = steps[0].fn

                def execute_batch(batch: Any) -> None:
                    item = None
                    try:
                        for item in raw_items(batch):
                            for each in fn(item):
                                emit((key_fn(each), each))
                    except Exception as exc:
                        mark_failed_record(exc, item)
                        raise
            else:
                def execute_batch(batch: Any) -> None:
                    item = None
                    try:
                        for item in raw_items(batch):
                            run(item)
                    except Exception as exc:
                        mark_failed_record(exc, item)
                        raise
        elif wire is Wire.ITEM:
            def execute_batch(batch: Any) -> None:
                row: Any = None
                try:
                    for row in batch.rows:
                        run(row[0])
                except Exception as exc:
                    mark_failed_record(exc, None if row is None else row[0])
                    raise
        elif wire is Wire.KEYED or wire is Wire.LATE:
            def execute_batch(batch: Any) -> None:
                row: Any = None
                try:
                    for row in batch.rows:
                        run(row[-1])
                except Exception as exc:
                    mark_failed_record(exc, None if row is None else row[-1])
                    raise
        if execute_batch is not None:
            self.__dict__["execute_batch"] = execute_batch

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
        return (dict(zip(names, row, strict=False))  # zip stops at a short row
                for row in batch.rows)
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
           "chain_steps", "is_identity", "key_function", "raw_items"]
