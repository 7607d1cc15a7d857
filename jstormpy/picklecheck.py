"""Name what cannot be pickled: a component attribute at submit, a state value at a snapshot.

Components travel to the workers pickled (cloudpickle) and state is pickled into every
checkpoint. When something in them cannot be pickled (a ``threading.Lock``, an open
socket or file, a database connection), pickle's own message names only a type
(``cannot pickle '_thread.lock' object``). These helpers search the object for the
smallest part that fails and build a :mod:`jstormpy.api.errors` exception naming the
component, the attribute or state (and key), and the fix: create such things in
``prepare()`` / ``open()``, which run in the worker, and keep them out of state.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle

from jstormpy.api.errors import CheckpointError, TopologyError

HINT_COMPONENT = ("create it in prepare() (bolts) or open() (spouts), which run in the "
                  "worker after the component arrived there, instead of in __init__ or at "
                  "class level")
HINT_STATE = ("keep only plain data (numbers, strings, tuples, lists, dicts, dataclasses) "
              "in state; create locks, connections, files and clients in prepare() / "
              "open() as ordinary attributes")

_MAX_DEPTH = 4
_MAX_ITEMS = 2000


def _fails(obj: Any, dumps: Callable[[Any], bytes]) -> BaseException | None:
    try:
        dumps(obj)
    except Exception as exc:  # pickle raises TypeError, PicklingError, AttributeError, ...
        return exc
    return None


def _parts(obj: Any) -> Iterator[tuple[str, Any]]:
    """(path suffix, part) of the things ``obj`` holds, for the search."""
    if isinstance(obj, dict):
        for i, (k, v) in enumerate(obj.items()):
            if i >= _MAX_ITEMS:
                return
            yield f"[{k!r}]", v
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for i, v in enumerate(obj):
            if i >= _MAX_ITEMS:
                return
            yield f"[{i}]", v
    else:
        attrs = getattr(obj, "__dict__", None)
        if isinstance(obj, type) and attrs is not None:  # class attributes
            attrs = {k: v for k, v in attrs.items() if not k.startswith("__")}
        if isinstance(attrs, dict):
            for k, v in attrs.items():
                if not k.startswith("_jstorm"):
                    yield f".{k}", v


def find_unpicklable(obj: Any, dumps: Callable[[Any], bytes] = cloudpickle.dumps
                     ) -> tuple[str, Any, BaseException] | None:
    """The path (``.attr``, ``['key']``, ``[3]``, joined) to the innermost part of ``obj``
    that ``dumps`` refuses, that part, and the exception; None if ``obj`` pickles."""
    exc = _fails(obj, dumps)
    if exc is None:
        return None
    path = ""
    for _ in range(_MAX_DEPTH):
        for suffix, part in _parts(obj):
            inner = _fails(part, dumps)
            if inner is not None:
                path, obj, exc = path + suffix, part, inner
                break
        else:
            break
    return path, obj, exc


def _what(part: Any, exc: BaseException) -> str:
    return f"a {type(part).__module__}.{type(part).__qualname__} ({type(exc).__name__}: {exc})"


def component_pickle_error(name: str, obj: Any, exc: BaseException) -> TopologyError:
    """The error for a component ``name`` (class or configured instance) that cannot be
    pickled for the workers; ``exc`` is what pickling the topology raised."""
    found = find_unpicklable(obj)
    kind = "class" if isinstance(obj, type) else "instance of"
    cls = obj if isinstance(obj, type) else type(obj)
    if found is None:  # pickles alone: report the original error
        return TopologyError(f"component {name!r} ({kind} {cls.__qualname__}) cannot be sent "
                             f"to the workers: {type(exc).__name__}: {exc}; "
                             f"{HINT_COMPONENT}")
    path, part, inner = found
    where = f"attribute {path.lstrip('.')!r}" if path else "it"
    return TopologyError(f"component {name!r} ({kind} {cls.__qualname__}) cannot be sent to "
                         f"the workers: {where} holds {_what(part, inner)}; "
                         f"{HINT_COMPONENT}")


def dump_topology(topology: Any,
                  dumps: Callable[[Any], bytes] = cloudpickle.dumps) -> bytes:
    """``dumps(topology)``; if that fails, a :class:`TopologyError` naming the component and
    attribute that cannot be pickled."""
    try:
        return dumps(topology)
    except Exception as exc:
        for spec in topology.components.values():
            if _fails(spec.obj, cloudpickle.dumps) is not None:
                raise component_pickle_error(spec.name, spec.obj, exc) from exc
        raise


def snapshot_pickle_error(component: str, task_id: int, snap: dict[str, Any],
                          exc: BaseException) -> CheckpointError:
    """The error for a snapshot of ``component``'s task that ``pickle`` refused: names the
    managed state and key (``self.state(NAME)``) or the custom ``snapshot()`` part."""
    dumps = pickle.dumps
    where = ""
    found = None
    for name, d in (snap.get("states") or {}).items():
        found = find_unpicklable(d, dumps)
        if found is not None:
            where = f"state {name!r} (self.state({name!r}))"
            break
    if found is None and "custom" in snap:
        found = find_unpicklable(snap["custom"], dumps)
        where = "the value its snapshot() returned"
    if found is None:
        return CheckpointError(f"component {component!r}, task {task_id}: its snapshot "
                               f"cannot be pickled ({type(exc).__name__}: {exc}); "
                               f"{HINT_STATE}")
    path, part, inner = found
    at = f" at {path}" if path else ""
    return CheckpointError(f"component {component!r}, task {task_id}: {where} cannot be "
                           f"checkpointed: it holds{at} {_what(part, inner)}; {HINT_STATE}")
