"""Issue 28 item 2: emitting the wrong number of values is refused at ``emit``, naming the
component, the stream and its declared fields (before: silently ``{'n': 0}`` downstream, or
an ``IndexError`` deep in the engine)."""

from __future__ import annotations

from typing import Any

import pytest

from jstormpy.api.errors import TopologyError
from jstormpy.runtime.routing import OutputCollector, Route

STREAMS = {"default": ("n", "sq")}


def fused(kind: str) -> tuple[OutputCollector, list[Any]]:
    """A collector whose ``emit`` is the fused closure of ``kind`` (the worker's shape)."""
    sent: list[Any] = []
    key = (0,) if kind == "fields" else ()
    local = {"local_or_shuffle": [3], "local_two": [3, 4]}.get(kind, [])
    route = Route("local_or_shuffle" if kind == "local_two" else kind, "default", "next",
                  [3, 4], 1, lambda d, i: sent.append((d, i)), 1, key, None, local)
    coll = OutputCollector(1, "square", {"default": [route]}, [3, 4], route.send,
                           streams=STREAMS)
    assert coll.emit.__name__.startswith("emit_")
    return coll, sent


@pytest.mark.parametrize("kind", ["fields", "shuffle", "global", "local_or_shuffle",
                                  "local_two"])
@pytest.mark.parametrize("values", [(7,), (7, 49, 0), 7])
def test_fused_emit_refuses_wrong_arity_naming_component_stream_fields(kind, values):
    coll, sent = fused(kind)
    with pytest.raises(TopologyError) as err:
        coll.emit(values)
    msg = str(err.value)
    assert "'square'" in msg and "'default'" in msg and "('n', 'sq')" in msg
    assert sent == []  # nothing half-routed
    coll.emit((7, 49))  # the right arity still goes through
    assert len(sent) == 1


def test_generic_emit_and_emit_direct_refuse_wrong_arity():
    sent: list[Any] = []
    streams = {"default": ("n", "sq"), "late": ("n",)}
    routes = {"default": [Route("all", "default", "a", [2, 3], 1, lambda d, i: sent.append(i), 1),
                          Route("direct", "default", "d", [4], 1, lambda d, i: sent.append(i), 1)],
              "late": []}
    coll = OutputCollector(1, "square", routes, [2, 3, 4], lambda d, i: sent.append(i),
                           streams=streams)
    with pytest.raises(TopologyError, match=r"'late'.*\('n',\)"):
        coll.emit((1, 2), stream="late")
    with pytest.raises(TopologyError, match=r"1 value\(s\) \(1,\) on stream 'default'"):
        coll.emit((1,))
    with pytest.raises(TopologyError, match=r"'square'.*\('n', 'sq'\)"):
        coll.emit_direct(4, (1,))
    assert sent == []


def test_emit_batch_refuses_wrong_columns():
    sent: list[Any] = []
    route = Route("shuffle", "default", "a", [2], 1, lambda d, i: sent.append(i), 10)
    coll = OutputCollector(1, "square", {"default": [route]}, [2], route.send,
                           streams=STREAMS)
    with pytest.raises(TopologyError, match=r"unknown field\(s\) \['sqr'\]"):
        coll.emit_batch({"n": [1], "sqr": [1]})
    with pytest.raises(TopologyError, match=r"got 1 column\(s\) for 2 field\(s\)"):
        coll.emit_batch([[1, 2]])
    with pytest.raises(TopologyError, match=r"column 'sq' has 1 values"):
        coll.emit_batch({"n": [1, 2], "sq": [1]})
    assert sent == []

