"""The batch API in-process: Batch views, emit_batch routing, executor dispatch, mixing."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pytest

from jstormpy import Batch, Bolt, Tuple
from jstormpy.api.component import bind_task
from jstormpy.api.errors import TopologyError
from jstormpy.api.topology import Grouping
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.routing import MessageKind, OutputCollector, build_routes
from tests.fake_task_host import FakeTaskHost
from tests.unit.test_routing import Sent


def make_collector(sent: Sent, kind: str = "fields", batch_size: int = 4) -> OutputCollector:
    streams = {"default": ("word", "n")}
    fields = ("word",) if kind == "fields" else ()
    consumers = [("a", Grouping(kind, "src", "default", fields))]
    tasks = {"src": (1,), "a": (2, 3, 4)}
    routes, channels = build_routes(1, "src", streams, consumers, tasks, {}, sent, batch_size)
    return OutputCollector(1, "src", routes, channels, sent, streams=streams)


def test_batch_columns_len_fields_and_tuples():
    b = Batch([("cat", 1), ("dog", 2), ("cat", 3)], {"word": 0, "n": 1}, "split", "default", 7)
    assert len(b) == 3 and b.fields == ("word", "n")
    assert b["word"] == ["cat", "dog", "cat"] and b[1] == [1, 2, 3]
    assert b["word"] is b["word"]  # a column is built once
    assert b.columns() == {"word": ["cat", "dog", "cat"], "n": [1, 2, 3]}
    tuples = list(b)
    assert all(isinstance(t, Tuple) for t in tuples)
    assert [(t["word"], t["n"], t.source, t.stream, t.task) for t in tuples] == [
        ("cat", 1, "split", "default", 7), ("dog", 2, "split", "default", 7),
        ("cat", 3, "split", "default", 7)]
    with pytest.raises(KeyError, match="has no field 'nope'"):
        b["nope"]


def test_channel_tuples_pickle_as_plain_tuples():
    cls = Tuple.bound({"word": 0}, "split", "default", 3)
    t = pickle.loads(pickle.dumps(cls(("cat",))))
    assert type(t) is Tuple and t["word"] == "cat" and t.task == 3 and t.source == "split"


def test_emit_batch_fields_grouping_matches_per_tuple_routing():
    words = [f"w{i % 37}" for i in range(500)]
    per_tuple, batched = Sent(), Sent()
    c1, c2 = make_collector(per_tuple), make_collector(batched)
    for i, w in enumerate(words):
        c1.emit((w, i))
    c1.flush()
    c2.emit_batch({"word": words, "n": list(range(500))})
    c2.flush()
    # same key -> same task, and per-task order kept
    assert sorted(per_tuple.data()) == sorted(batched.data())
    for dst in (2, 3, 4):
        assert [v for d, v in per_tuple.data() if d == dst] == \
            [v for d, v in batched.data() if d == dst]
    assert c2.emitted == 500
    assert all(len(item[3]) <= 4 for _, item in batched.items)  # chunks of batch_size


def test_emit_and_emit_batch_mix_in_order():
    sent = Sent()
    c = make_collector(sent, kind="global", batch_size=1000)
    c.emit(("a", 0))
    c.emit_batch([["b", "c"], [1, 2]])  # columns in declared order
    c.emit(("d", 3))
    c.flush()
    assert [v for _, v in sent.data()] == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]


def test_emit_batch_shuffle_spreads_whole_chunks():
    sent = Sent()
    c = make_collector(sent, kind="shuffle", batch_size=10)
    c.emit_batch({"word": ["x"] * 30, "n": list(range(30))})
    c.flush()
    assert Counter(d for d, _ in sent.data()) == {2: 10, 3: 10, 4: 10}


@pytest.mark.parametrize(("data", "message"), [
    ({"word": ["a"]}, r"missing field\(s\) \['n'\]"),
    ({"word": ["a"], "n": [1], "x": [2]}, r"unknown field\(s\) \['x'\]"),
    ({"word": ["a", "b"], "n": [1]}, "column 'n' has 1 values, column 'word' has 2"),
    ([["a"]], r"got 1 column\(s\) for 2 field\(s\)"),
    ("ab", "wants {field: column}"),
])
def test_emit_batch_bad_input_names_the_problem(data: Any, message: str):
    c = make_collector(Sent())
    with pytest.raises(TopologyError, match=message):
        c.emit_batch(data)
    with pytest.raises(TopologyError, match="which it does not declare"):
        c.emit_batch({"word": ["a"], "n": [1]}, stream="other")
    assert c.emitted == 0


class BatchCount(Bolt):
    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: Counter[str] = Counter()
        self.seen: list[int] = []

    def execute_batch(self, batch: Batch) -> None:
        self.seen.append(len(batch))
        out = []
        for w in batch["word"]:
            self.counts[w] += 1
            out.append(self.counts[w])
        self.emit_batch({"word": batch["word"], "count": out})


class TupleCount(Bolt):
    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: Counter[str] = Counter()

    def execute(self, tup: Tuple) -> None:
        if tup["word"] == "boom":
            raise ValueError("boom")
        self.counts[tup["word"]] += 1
        self.emit((tup["word"], self.counts[tup["word"]]))


def executor(comp: Bolt, sent: Sent, host: FakeTaskHost) -> TaskExecutor:
    streams = {"default": ("word", "count")}
    routes, channels = build_routes(5, "count", streams, [("out", Grouping("global", "count",
                                                                           "default"))],
                                    {"count": (5,), "out": (9,)}, {}, sent, 100)
    coll = OutputCollector(5, "count", routes, channels, sent, streams=streams)
    bind_task(comp, coll, None)
    comp.prepare({}, None)
    return TaskExecutor(5, "count", "bolt", comp, coll, host, input_channels=(1,),
                        source_index={(1, "default"): ("split", {"word": 0})})


def test_executor_calls_execute_batch_once_per_channel_batch():
    sent, host = Sent(), FakeTaskHost(guarantee="at_most_once", errors_fail=False)
    comp = BatchCount()
    ex = executor(comp, sent, host)
    ex._execute_batch(1, "default", [("a",), ("b",), ("a",)])
    ex._execute_batch(1, "default", [("a",)])
    ex.collector.flush()
    assert comp.seen == [3, 1] and ex.metrics.executed == 4
    assert [v for _, v in sent.data()] == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]


def test_per_tuple_bolt_error_resumes_with_the_next_tuple_at_most_once():
    sent, host = Sent(), FakeTaskHost(guarantee="at_most_once", errors_fail=False)
    comp = TupleCount()
    ex = executor(comp, sent, host)
    ex._execute_batch(1, "default", [("a",), ("boom",), ("a",)])
    ex.collector.flush()
    assert [v for _, v in sent.data()] == [("a", 1), ("a", 2)]
    assert len(host.errors) == 1 and host.errors[0][1]["word"] == "boom"


def test_a_batch_never_spans_a_barrier():
    """Two DATA items around a barrier reach execute_batch as two batches, and the barrier
    is forwarded after the first batch's output and before the second's."""
    sent, host = Sent(), FakeTaskHost(guarantee="at_most_once", errors_fail=False)
    comp = BatchCount()
    ex = executor(comp, sent, host)
    ex._execute_batch(1, "default", [("a",), ("b",)])
    ex._on_barrier(1, 1)
    ex._execute_batch(1, "default", [("c",)])
    ex.collector.flush()
    kinds = [(item[1], item[3] if item[1] == MessageKind.DATA else None) for _, item in sent.items]
    assert kinds == [(MessageKind.DATA, [("a", 1), ("b", 1)]), (MessageKind.BARRIER, None), (MessageKind.DATA, [("c", 1)])]
    assert comp.seen == [2, 1]


@pytest.mark.parametrize("kind", ["fields", "shuffle", "global", "local_or_shuffle"])
def test_fused_emit_routes_like_the_generic_path(kind: str):
    """One stream, one subscriber: emit is one fused closure; same choices, counts, errors."""
    fused_sent, generic_sent = Sent(), Sent()
    streams = {"default": ("word", "n")}
    fields = ("word",) if kind == "fields" else ()
    consumers = [("a", Grouping(kind, "src", "default", fields))]
    tasks = {"src": (1,), "a": (2, 3, 4)}
    workers = {1: 0, 2: 0, 3: 1, 4: 0}  # local_or_shuffle: tasks 2 and 4 are local
    routes, channels = build_routes(1, "src", streams, consumers, tasks, workers, fused_sent, 3)
    fused = OutputCollector(1, "src", routes, channels, fused_sent, streams=streams)
    assert fused.emit.__name__.startswith("emit_")  # the fused closure is in place
    routes2, _ = build_routes(1, "src", streams, consumers, tasks, workers, generic_sent, 3)
    route = routes2["default"][0]
    for i in range(50):
        fused.emit((f"w{i % 7}", i))
        route.add_generic((f"w{i % 7}", i))
    assert fused.emitted == 50 and fused.dirty
    fused.flush()
    route.flush()
    assert fused_sent.data() == generic_sent.data()
    if kind == "local_or_shuffle":
        assert {d for d, _ in fused_sent.data()} == {2, 4}
    with pytest.raises(TopologyError, match="which it does not declare"):
        fused.emit(("x", 1), stream="other")
    assert fused.emitted == 50
