"""The heronpy API shipped with jstormpy (heronpy/, jstormpy.heron): the class DSL and the
builder as jstormpy topologies (every grouping, streams, parallelism, config), the submit
captured, tick tuples, a stateful component's state through a snapshot and a restore, and
the errors a bad topology gets."""

from __future__ import annotations

import pytest

from heronpy.api import api_constants as constants
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.custom_grouping import ICustomGrouping
from heronpy.api.spout.spout import Spout
from heronpy.api.state.state import HashMapState
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping, Stream
from heronpy.api.topology import Topology, TopologyBuilder, capture_submissions
from jstormpy.api.component import TopologyContext, bind_task
from jstormpy.api.errors import HeronError, TopologyError
from jstormpy.heron import HeronBolt, HeronSpout, topology_from_heron
from jstormpy.heron.topology import config_from_heron


class Words(Spout):
    outputs = ["word", Stream(fields=["line"], name="lines")]

    def next_tuple(self):
        self.emit(["cat"], tup_id=1)


class Count(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.config, self.context = config, context
        self.ticks = 0

    def process(self, tup):
        self.emit([tup.values[0], len(tup.values)])

    def process_tick(self, tup):
        assert self.is_tick(tup) and tup.component == "__system"
        self.ticks += 1


class Oddness(ICustomGrouping):
    def prepare(self, context, component, stream, target_tasks):
        self.targets = target_tasks

    def choose_tasks(self, values):
        return [self.targets[values[0] % 2]]


class AllGroupings(Topology):
    config = {"shared": "topology", "own": "topology"}
    words = Words.spec(par=3)
    shuffled = Count.spec(inputs=[words], par=2, config={"own": "bolt"})
    by_word = Count.spec(inputs={words: Grouping.fields("word")})
    everyone = Count.spec(inputs={words: Grouping.ALL})
    lowest = Count.spec(inputs={words["lines"]: Grouping.LOWEST})
    none = Count.spec(inputs={words: Grouping.NONE})
    custom = Count.spec(inputs={words: Grouping.custom(Oddness())})
    chained = Count.spec(inputs={by_word: Grouping.GLOBAL, words: Grouping.SHUFFLE})


def test_the_class_dsl_keeps_names_parallelism_streams_and_every_grouping():
    topo = topology_from_heron(AllGroupings)
    assert topo.name == "AllGroupings"
    comps = topo.components
    assert comps["words"].parallelism == 3 and comps["shuffled"].parallelism == 2
    assert comps["words"].streams == {"default": ("word",), "lines": ("line",)}
    kinds = {name: [(g.kind, g.source, g.stream, g.fields) for g in comps[name].inputs]
             for name in comps if name != "words"}
    assert kinds == {
        "shuffled": [("shuffle", "words", "default", ())],
        "by_word": [("fields", "words", "default", ("word",))],
        "everyone": [("all", "words", "default", ())],
        "lowest": [("global", "words", "lines", ())],
        "none": [("none", "words", "default", ())],
        "custom": [("custom", "words", "default", ())],
        "chained": [("global", "by_word", "default", ()), ("shuffle", "words", "default", ())],
    }
    grouping = comps["custom"].inputs[0].custom
    grouping.prepare("words", "default", [7, 8])
    assert grouping.choose_tasks(0, (3,)) == [8]
    # the topology's config, overridden per component by spec(config=...)
    assert comps["shuffled"].obj.heron_config["own"] == "bolt"
    assert comps["by_word"].obj.heron_config["own"] == "topology"


def test_build_and_submit_is_captured_by_jstorm_run_and_refused_outside_it():
    builder = TopologyBuilder("built")
    words = builder.add_spout("w", Words, par=1)
    builder.add_bolt("c", Count, par=2, inputs={words: Grouping.fields("word")},
                     config={constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 5})
    builder.set_config({constants.TOPOLOGY_RELIABILITY_MODE: "ATMOST_ONCE"})
    with capture_submissions() as submitted:
        builder.build_and_submit()
    assert [cls.topology_name for cls in submitted] == ["built"]
    assert config_from_heron(submitted[0]) == {"guarantee": "at_most_once"}
    topo = topology_from_heron(submitted[0])
    assert topo.components["c"].obj.tick_tuple_freq_s == 5.0
    with pytest.raises(TopologyError, match="run this file with `jstorm run FILE`"):
        builder.build_and_submit()


class Position(Spout, StatefulComponent):
    outputs = ["n"]

    def init_state(self, stateful_state):
        self.state = stateful_state

    def pre_save(self, checkpoint_id):
        self.state.put("next", self.next)
        self.state.put("saved_at", checkpoint_id)

    def initialize(self, config, context):
        self.next = self.state.get("next") or 0

    def next_tuple(self):
        self.emit([self.next])
        self.next += 1


def _submitted(config, spout=Words):
    b = TopologyBuilder("t")
    b.add_spout("s", spout, par=1)
    b.set_config(config)
    return b.create_topology()


def test_the_reliability_mode_and_the_checkpoint_interval_become_the_config():
    assert config_from_heron(_submitted({})) == {"guarantee": "at_least_once"}
    assert config_from_heron(_submitted({}, Position)) == {"guarantee": "exactly_once"}
    assert config_from_heron(_submitted({
        constants.TOPOLOGY_RELIABILITY_MODE: "EFFECTIVELY_ONCE",
        constants.TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS: 2})) == {
        "guarantee": "exactly_once", "checkpoint_interval_ms": 2000}
    with pytest.raises(TopologyError, match="topology.reliability.mode is 'SOMETIMES'"):
        config_from_heron(_submitted({constants.TOPOLOGY_RELIABILITY_MODE: "SOMETIMES"}))


class Recorder:
    """An emitter that keeps what the task emitted."""

    def __init__(self):
        self.emitted = []

    def emit(self, values, stream="default"):
        self.emitted.append((stream, list(values)))

    def emit_direct(self, task, values, stream="default"):
        self.emitted.append((f"direct {task}", list(values)))


def _context(component="c"):
    return TopologyContext(topology="t", component=component, task_id=3, task_index=0,
                           worker_id=0, component_tasks={component: (3,)})


def _bound(component, emitter):
    bind_task(component, emitter, __import__("logging").getLogger("test"))
    return component


def test_a_bolt_gets_tuples_tick_tuples_and_its_config():
    rec = Recorder()
    bolt = _bound(HeronBolt(Count, {constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 0.01,
                                    "mine": 1}), rec)
    assert bolt.tick_interval_ms == 10.0  # the engine's on_tick often enough
    bolt.prepare({}, _context())
    from jstormpy.api.component import Tuple
    bolt.execute(Tuple(("cat", 9), {"word": 0, "n": 1}, "words", "default", 5))
    assert rec.emitted == [("default", ["cat", 2])]
    impl = bolt._impl
    assert impl.config["mine"] == 1 and impl.config["topology.name"] == "t"
    assert impl.context.get_task_id() == 3 and impl.context.get_component_id() == "c"
    bolt._last_tick -= 1.0
    bolt.on_tick(0.0)
    bolt.on_tick(0.0)  # not yet due again
    assert impl.ticks == 1


def test_a_failed_tuple_fails_the_task_naming_the_bolt():
    class Failing(Bolt):
        def process(self, tup):
            self.fail(tup)

    bolt = _bound(HeronBolt(Failing), Recorder())
    bolt.prepare({}, _context("picky"))
    from jstormpy.api.component import Tuple
    with pytest.raises(HeronError, match="heronpy bolt 'picky' failed a tuple from 'words'"):
        bolt.execute(Tuple(("x",), {"word": 0}, "words", "default", 5))


def test_a_stateful_spout_saves_its_state_at_the_barrier_and_resumes_from_it():
    rec = Recorder()
    spout = _bound(HeronSpout(Position), rec)
    spout.open({"guarantee": "exactly_once"}, _context("pos"))
    for _ in range(3):
        spout.next_tuple()
    spout.before_snapshot(7)  # the barrier: pre_save, then the snapshot
    snap = spout.snapshot()
    assert snap == {"next": 3, "saved_at": 7}
    spout.next_tuple()  # after the barrier: lost with the worker
    again = HeronSpout(Position)
    again.restore(snap)  # the engine restores a fresh instance before open
    rec2 = Recorder()
    _bound(again, rec2).open({"guarantee": "exactly_once"}, _context("pos"))
    again.next_tuple()
    assert [v for _, v in rec.emitted] == [[0], [1], [2], [3]]
    assert rec2.emitted == [("default", [3])]  # resumed at the checkpoint's position


def test_spout_acks_follow_the_completed_checkpoint():
    class Acked(Words):
        acked: list = []

        def ack(self, tup_id):
            self.acked.append(tup_id)

    spout = _bound(HeronSpout(Acked), Recorder())
    spout.open({"guarantee": "at_least_once", "checkpoints_retained": 2}, _context("w"))
    spout.next_tuple()
    spout.before_snapshot(1)
    spout.next_tuple()
    spout.before_snapshot(2)
    spout.on_checkpoint_complete(1)
    # a recovery could still fall back before checkpoint 1 (2 checkpoints retained)
    assert Acked.acked == []
    spout.on_checkpoint_complete(2)
    assert Acked.acked == [1]  # checkpoint 1 is the oldest retained; the second emit is 2's


def test_hash_map_state_reads_as_heron_documents_it():
    state = HashMapState()
    state.put("a", 1)
    assert state.get("a") == 1 and state.get("b") is None
    assert list(state.enumerate()) == [(0, "a")]
    state.clear()
    assert len(state) == 0


def _with_input(grouping):
    words = Words.spec()
    return type("T", (Topology,), {"w": words, "c": Count.spec(inputs={words: grouping})})


@pytest.mark.parametrize(("build", "message"), [
    (lambda: type("NoSpout", (Topology,), {"c": Count.spec(inputs=[])}), "has no spout"),
    (lambda: type("Orphan", (Topology,), {"w": Words.spec(), "c": Count.spec()}),
     r"bolt 'c' \(.*Count\) has no inputs"),
    (Grouping.fields, "needs at least one field name"),
    (lambda: Grouping.custom_object("com.example.G", []), "names a Java class"),
    (lambda: Words.spec(par=0), "par must be an int >= 1"),
    (lambda: Words.spec()["nope"], "declares no stream 'nope'"),
    (lambda: _with_input("BROADCAST"), "'BROADCAST' is not a Grouping"),
    (lambda: type("Bad", (Topology,), {"w": Words.spec(),
                                       "c": Count.spec(inputs={"w": Grouping.ALL})}),
     "an input must be a component spec"),
])
def test_a_bad_topology_gets_an_error_naming_the_problem(build, message):
    with pytest.raises(TopologyError, match=message):
        build()


def test_a_jstormpy_file_using_heronpy_components_runs_as_a_module_not_as_main(tmp_path):
    """Only a heronpy topology file (heronpy imports, no jstormpy ones) is run as
    ``heron submit`` runs it; a jstormpy file with heronpy components keeps its
    ``__main__`` block to itself."""
    from jstormpy.cli.main import load_topology_file

    file = tmp_path / "mixed.py"
    file.write_text(
        "from heronpy.api.bolt.bolt import Bolt\n"
        "from jstormpy import SequenceSpout, TopologyBuilder\n"
        "from jstormpy.heron import HeronBolt\n"
        "class Echo(Bolt):\n"
        "    outputs = ['key']\n"
        "    def process(self, tup):\n"
        "        self.emit([tup.values[0]])\n"
        "b = TopologyBuilder('mixed')\n"
        "b.set_spout('s', SequenceSpout(keys=2, per_key=3))\n"
        "b.set_bolt('e', HeronBolt(Echo)).shuffle_grouping('s')\n"
        "topology = b.build()\n"
        "if __name__ == '__main__':\n"
        "    raise SystemExit('the __main__ block ran')\n")
    module = load_topology_file(str(file))
    assert module.topology.name == "mixed"
    assert isinstance(module.topology.components["e"].obj, HeronBolt)


@pytest.mark.parametrize("component", [HeronBolt, HeronSpout])
def test_a_stateless_heronpy_component_rescales_and_a_stateful_one_is_refused(component):
    from jstormpy.api.errors import JStormError
    from jstormpy.keygroups import redistribute, redistribution_hook

    hook = redistribution_hook(component, 128)

    def snaps(custom):
        return [{"states": {}, "custom": custom, "max_parallelism": 128} for _ in range(2)]

    moved = redistribute("c", snaps(None), 3, 128, hook)
    assert [s["custom"] for s in moved] == [None, None, None]
    with pytest.raises(JStormError, match="stateful heronpy component"):
        redistribute("c", snaps({"next": 4}), 3, 128, hook)


def test_the_examples_in_the_docstrings_run():
    import doctest
    import importlib

    for name in ("heronpy.api.stream", "heronpy.api.state.state", "heronpy.api.metrics",
                 "heronpy.api.bolt.bolt", "heronpy.api.spout.spout", "jstormpy.heron",
                 "jstormpy.heron.components"):
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted > 0 and result.failed == 0, name
