"""reduce and stateful_map against plain-Python references, including a restore and a
rescale of their managed state in the middle of the input."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.api.errors import TopologyError
from jstormpy.dataflow import KeyedValue
from jstormpy.dataflow.fusion import Step, StepKind
from jstormpy.dataflow.keyed import ReduceBolt, StatefulMapBolt
from jstormpy.dataflow.records import Wire
from jstormpy.keygroups import key_group, key_group_range

from .drive import keyed_tuple, prepare

INPUTS = {("up", "default"): Wire.KEYED}
events = st.lists(st.tuples(st.sampled_from(["a", "b", "c", 1, 2.5, None]),
                            st.integers(-50, 50)), max_size=60)


def _reduce_reference(evs):
    acc, out = {}, []
    for k, v in evs:
        acc[k] = acc[k] + v if k in acc else v
        out.append(KeyedValue(k, acc[k]))
    return out


def _run(bolt, evs, state=None):
    if state is not None:
        bolt.__dict__["_jstorm_states"] = copy.deepcopy(state)  # what a restore installs
    col = prepare(bolt)
    for k, v in evs:
        bolt.execute(keyed_tuple(k, v))
    return [v[0] for v in col.stream()], bolt.__dict__["_jstorm_states"]


@settings(max_examples=60, deadline=None)
@given(events, st.integers(0, 60))
def test_reduce_equals_the_reference_across_a_restore(evs, cut):
    add = lambda a, b: a + b  # noqa: E731 - a lambda, as users write it
    first, state = _run(ReduceBolt(INPUTS, add), evs[:cut])
    rest, final = _run(ReduceBolt(INPUTS, add), evs[cut:], state)
    assert first + rest == _reduce_reference(evs)
    # the state is one entry per key, keyed by the key itself (splittable by key group)
    assert final["reduce"] == {k: kv.value for kv in _reduce_reference(evs) for k in [kv.key]}


@settings(max_examples=40, deadline=None)
@given(events, st.integers(0, 60))
def test_reduce_state_split_by_key_group_continues_on_two_tasks(evs, cut):
    """A rescale 1 -> 2: each new task gets the keys of its key groups and the keys'
    later items (as fields grouping routes them); together they equal the reference."""
    add = lambda a, b: a + b  # noqa: E731
    _, state = _run(ReduceBolt(INPUTS, add), evs[:cut])
    out = []
    for index in range(2):
        groups = set(key_group_range(128, 2, index))
        mine = {name: {k: v for k, v in d.items() if key_group(k, 128) in groups}
                for name, d in state.items()}
        got, _ = _run(ReduceBolt(INPUTS, add),
                      [e for e in evs[cut:] if key_group(e[0], 128) in groups], mine)
        out += got
    want = _reduce_reference(evs)[cut:]
    assert sorted(map(repr, out)) == sorted(map(repr, want))


def _stateful_reference(evs):
    """Per key: a running count that resets (state deleted) after every multiple of 3;
    emits the count on odd values only."""
    states, out = {}, []
    for k, v in evs:
        n = states.get(k, 0) + 1
        if n % 3 == 0:
            states.pop(k, None)
        else:
            states[k] = n
        if v % 2:
            out.append((k, n))
    return out, states


@settings(max_examples=60, deadline=None)
@given(events, st.integers(0, 60))
def test_stateful_map_equals_the_reference_and_none_deletes_state(evs, cut):
    def count(state, item):
        key, value = item
        n = (state or 0) + 1
        return (None if n % 3 == 0 else n), ((key, n) if value % 2 else None)

    bolt_evs = [(k, (k, v)) for k, v in evs]
    first, state = _run(StatefulMapBolt(INPUTS, count), bolt_evs[:cut])
    rest, final = _run(StatefulMapBolt(INPUTS, count), bolt_evs[cut:], state)
    want, want_states = _stateful_reference(evs)
    assert first + rest == want
    assert final["stateful_map"] == want_states


def test_a_fused_tail_runs_on_what_the_keyed_operator_emits():
    bolt = ReduceBolt(INPUTS, max, steps=[Step(StepKind.MAP, lambda kv: kv.value * 10),
                                         Step(StepKind.FILTER, lambda v: v > 20)])
    col = prepare(bolt)
    for v in (1, 3, 2, 5):
        bolt.execute(keyed_tuple("k", v))
    assert col.stream() == [(30,), (30,), (50,)]


def test_stateful_map_with_a_fused_tail_and_a_bad_return_value():
    bolt = StatefulMapBolt(INPUTS, lambda s, v: ((s or 0) + v, (s or 0) + v),
                           steps=[Step(StepKind.FILTER, lambda total: total % 2 == 0)])
    col = prepare(bolt)
    for v in (1, 1, 3, 1):
        bolt.execute(keyed_tuple("k", v))
    assert col.stream() == [(2,), (6,)]  # running totals 1, 2, 5, 6: the even ones

    broken = StatefulMapBolt(INPUTS, lambda s, v: v)
    prepare(broken)
    with pytest.raises(TopologyError, match=r"must return \(state_or_None, out_or_None\)"):
        broken.execute(keyed_tuple("k", 3))


def _batch(rows):
    from jstormpy.api.batch import Batch
    from jstormpy.api.component import Tuple
    from jstormpy.dataflow.records import KEYED_FIELDS

    index = {f: i for i, f in enumerate(KEYED_FIELDS)}
    return Batch(list(rows), index, "up", "default", 1, Tuple.bound(index, "up", "default", 1))


@settings(max_examples=40, deadline=None)
@given(events, st.integers(1, 7))
def test_keyed_operators_give_the_same_output_and_state_through_execute_batch(evs, size):
    """The engine feeds keyed operators whole channel batches (``execute_batch``): same
    output and state as tuple by tuple."""
    def count(state, item):
        n = (state or 0) + 1
        return (None if n % 3 == 0 else n), ((item, n) if n % 2 else None)

    for make, name in ((lambda: ReduceBolt(INPUTS, lambda a, b: a + b), "reduce"),
                       (lambda: StatefulMapBolt(INPUTS, count), "stateful_map")):
        by_tuple, state = _run(make(), evs)
        bolt = make()
        col = prepare(bolt)
        for i in range(0, len(evs), size):
            bolt.execute_batch(_batch(evs[i:i + size]))
        assert [v[0] for v in col.stream()] == by_tuple
        assert bolt.__dict__["_jstorm_states"][name] == state[name]


def test_at_most_once_keeps_keyed_operators_per_tuple():
    """At-most-once skips only a failing tuple, so the batch path (which would skip the
    rest of its batch) is not offered there."""
    from jstormpy.api.component import TopologyContext, bind_task

    from .drive import Collector

    for guarantee, batched in (("at_most_once", False), ("exactly_once", True),
                               ("at_least_once", True)):
        bolt = StatefulMapBolt(INPUTS, lambda s, v: (v, v))
        bind_task(bolt, Collector(), None)
        bolt.prepare({"guarantee": guarantee},
                     TopologyContext("t", "op", 10, 0, 0, {"op": (10,)}, (1,)))
        assert callable(getattr(bolt, "execute_batch", None)) is batched, guarantee
