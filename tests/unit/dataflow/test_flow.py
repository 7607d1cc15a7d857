"""How a dataflow compiles: fused chains, names, groupings, parallelism, sinks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from jstormpy import FileSink, LocalCluster  # noqa: F401 - the public API the flow feeds
from jstormpy.api.errors import TopologyError
from jstormpy.connectors.sources import SequenceSpout
from jstormpy.dataflow import Dataflow, JoinResult, KeyedValue, WindowResult
from jstormpy.dataflow.fusion import ChainBolt
from jstormpy.dataflow.records import RecordTuples, as_record, record_tuple
from jstormpy.window import Count, TumblingWindows

from .drive import prepare, raw_tuple


def _flow() -> tuple[Dataflow, object]:
    flow = Dataflow("f")
    return flow, flow.source("src", SequenceSpout(keys=2, per_key=3), parallelism=2)


def test_consecutive_steps_fuse_into_one_bolt_named_after_the_first(tmp_path):
    flow, src = _flow()
    src.map(lambda r: r["value"], name="parse").filter(lambda v: v > 2) \
        .flat_map(lambda v: [v, v]).sink("out", FileSink(tmp_path))
    topo = flow.build()
    assert list(topo.components) == ["src", "parse", "out"]
    bolt = topo.components["parse"].obj
    assert isinstance(bolt, ChainBolt) and len(bolt.steps) == 3
    col = prepare(bolt, component="parse")
    for value in (1, 5):
        bolt.execute(raw_tuple(("k", 0, value)))
    assert col.stream() == [(5,), (5,)]  # one execute ran map, filter and flat_map


def test_default_names_come_from_position_and_function():
    flow, src = _flow()

    def parse(r):
        return r

    src.map(parse).key_by(lambda r: r["key"]).reduce(max).sink("out", FileSink("/tmp/x"))
    topo = flow.build()
    # map+key_by fused (named after the map); reduce named after its position and function
    assert list(topo.components) == ["src", "map-2-parse", "reduce-4-max", "out"]
    keyed_input = topo.components["reduce-4-max"].inputs[0]
    assert (keyed_input.kind, keyed_input.fields) == ("fields", ("_key",))
    assert topo.components["map-2-parse"].inputs[0].kind == "local_or_shuffle"


def test_a_duplicate_operator_name_is_refused_by_name():
    flow, src = _flow()
    src.map(str, name="same")
    with pytest.raises(TopologyError, match="two operators are named 'same'"):
        src.filter(bool, name="same")


def test_a_step_with_another_parallelism_starts_a_new_bolt(tmp_path):
    flow, src = _flow()
    src.map(str, name="a").map(str, name="b", parallelism=4).filter(bool, name="c") \
        .sink("out", FileSink(tmp_path))
    topo = flow.build()
    assert [(n, c.parallelism) for n, c in topo.components.items()] == \
        [("src", 2), ("a", 2), ("b", 4), ("out", 1)]
    assert topo.components["b"].inputs[0].kind == "shuffle"


def test_a_branched_stream_is_computed_once_and_read_by_both_branches(tmp_path):
    flow, src = _flow()
    words = src.flat_map(lambda r: [r["key"]] * 2, name="split")
    words.key_by(lambda w: w).reduce(lambda a, b: a + b, name="r").sink("a", FileSink(tmp_path))
    words.map(str.upper, name="up").sink("b", FileSink(tmp_path / "b"))
    topo = flow.build()
    assert sorted(topo.components) == ["a", "b", "key_by-3-lambda", "r", "split", "src", "up"]
    assert [g.source for g in topo.components["key_by-3-lambda"].inputs] == ["split"]
    assert [g.source for g in topo.components["up"].inputs] == ["split"]


def test_union_reads_every_stream(tmp_path):
    flow = Dataflow("u")
    a = flow.source("a", SequenceSpout(keys=1, per_key=1))
    b = flow.source("b", SequenceSpout(keys=1, per_key=1), parallelism=3)
    a.union(b.map(str, name="m")).map(len, name="n").sink("out", FileSink(tmp_path))
    topo = flow.build()
    assert sorted(g.source for g in topo.components["n"].inputs) == ["a", "m"]
    assert topo.components["n"].parallelism == 3


def test_a_window_and_its_late_stream_compile_to_one_windowed_bolt(tmp_path):
    flow, src = _flow()
    w = src.key_by(lambda r: r["key"]).window(TumblingWindows(size_ms=10),
                                               timestamp=lambda r: r["seq"])
    w.aggregate(Count(), name="counts").sink("out", FileSink(tmp_path))
    w.late().sink("late", FileSink(tmp_path / "late"))
    topo = flow.build()
    assert [(g.source, g.stream) for g in topo.components["late"].inputs] == \
        [("counts", "late")]


def test_bad_settings_are_refused_when_the_operator_is_declared():
    flow, src = _flow()
    keyed = src.key_by(lambda r: r["key"])
    with pytest.raises(TopologyError, match="timestamp"):
        keyed.window(TumblingWindows(size_ms=10))
    with pytest.raises(TopologyError, match="how='sideways'"):
        keyed.join(src.key_by(len), window=TumblingWindows(size_ms=10),
                   timestamp=(len, len), how="sideways")
    with pytest.raises(TopologyError, match="lower_ms <= upper_ms"):
        keyed.interval_join(src.key_by(len), 5, 1, timestamp=(len, len))
    with pytest.raises(TopologyError, match="no sink"):
        flow.build()


def test_sinks_write_dicts_namedtuples_and_other_values_as_records():
    assert as_record({"a": 1}) == {"a": 1}
    assert as_record(KeyedValue("k", 2)) == {"key": "k", "value": 2}
    assert as_record(WindowResult("k", 0, 10, 3, "on_time")) == \
        {"key": "k", "start": 0, "end": 10, "value": 3, "kind": "on_time"}
    assert as_record(JoinResult("k", {"x": 1}, None)) == {"key": "k", "left": {"x": 1},
                                                          "right": None}
    assert as_record([1, 2]) == {"value": [1, 2]}


class _Custom:
    pass


def test_the_sinks_fast_record_tuples_equal_the_reference_records():
    """RecordTuples (the sink adapter's cached Tuple classes) builds the same tuples as
    record_tuple(as_record(item)), for every kind of item, past its shape cache too."""
    import collections

    custom = _Custom()
    items = [{"a": 1, "b": [2]}, {"b": 1}, KeyedValue("k", 2),
             WindowResult("k", 0, 10, 3, "on_time"), JoinResult("k", {"x": 1}, None),
             ("w", 3), [1, 2], "s", 7, 1.5, None, True, b"x", custom,
             collections.OrderedDict(z=1, y=2)]
    records = RecordTuples()
    records.MAX_SHAPES = 2  # type: ignore[misc]  # the uncached path too
    for source, task in (("s1", 1), ("s2", 4)):
        record = records.channel(source, task)
        for item in items * 2:
            got, want = record(item), record_tuple(as_record(item), source, task)
            assert (got.as_dict(), got.fields, got.source, got.task, got.stream) == \
                (want.as_dict(), want.fields, want.source, want.task, want.stream)
    assert cloudpickle.loads(cloudpickle.dumps(records)).channels == {}


def test_a_bolt_with_a_closure_runs_in_another_interpreter(tmp_path):
    flow, src = _flow()
    offset = 41
    src.map(lambda r: r["value"] + offset, name="add").sink("out", FileSink(tmp_path))
    blob = cloudpickle.dumps(flow.build().components["add"].obj)
    script = (
        "import sys, pickle\n"
        "from tests.unit.dataflow.drive import prepare, raw_tuple\n"
        "bolt = pickle.loads(sys.stdin.buffer.read())\n"
        "col = prepare(bolt)\n"
        "bolt.execute(raw_tuple(('k', 0, 1)))\n"
        "print(col.stream())\n")
    done = subprocess.run([sys.executable, "-c", script], input=blob, capture_output=True,
                          check=True, timeout=60, cwd=Path(__file__).parents[3])
    assert done.stdout.decode().strip() == "[(42,)]"
