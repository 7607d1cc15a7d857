"""TopologyBuilder validation, groupings, Fields, task ids and the descriptor."""

from __future__ import annotations

import pytest

from jstormpy import (
    Bolt,
    Config,
    CustomStreamGrouping,
    Fields,
    FileSink,
    Spout,
    Topology,
    TopologyBuilder,
)
from jstormpy.api.errors import ConfigError, JStormError, TopologyError
from jstormpy.api.topology import assign_tasks


class Src(Spout):
    outputs = ("word", "n")


class Multi(Spout):
    outputs = {"default": ("word",), "late": ("word", "ts")}


class Pass(Bolt):
    outputs = ("word", "n")


class Sink(Bolt):
    """A bolt that emits nothing."""


class Pick(CustomStreamGrouping):
    def choose_tasks(self, task_id, values):
        return [task_id]


def simple() -> TopologyBuilder:
    b = TopologyBuilder("t")
    b.set_spout("src", Src)
    return b


# -- validation errors: each message names the problem -------------------------------------------

def test_unknown_component():
    b = simple()
    b.set_bolt("b", Pass).shuffle_grouping("nope")
    with pytest.raises(TopologyError, match=r"'b' subscribes to unknown component 'nope'"):
        b.build()


def test_unknown_component_message_lists_known_ones():
    b = simple()
    b.set_bolt("b", Pass).shuffle_grouping("srcc")
    with pytest.raises(TopologyError, match="known components: b, src"):
        b.build()


def test_duplicate_name():
    b = simple()
    with pytest.raises(TopologyError, match=r"duplicate component name 'src'"):
        b.set_bolt("src", Pass)
    with pytest.raises(TopologyError, match=r"duplicate component name 'src'"):
        b.set_spout("src", Src)


def test_cycle():
    b = simple()
    b.set_bolt("a", Pass).shuffle_grouping("src").shuffle_grouping("c")
    b.set_bolt("c", Pass).shuffle_grouping("a")
    with pytest.raises(TopologyError, match=r"cycle: .*a.*c.*a|cycle: .*c.*a.*c") as err:
        b.build()
    assert "cycle" in str(err.value)


def test_self_loop_is_a_cycle():
    b = simple()
    b.set_bolt("a", Pass).shuffle_grouping("src").shuffle_grouping("a")
    with pytest.raises(TopologyError, match=r"cycle: a -> a"):
        b.build()


def test_fields_grouping_on_undeclared_field():
    b = simple()
    b.set_bolt("b", Pass).fields_grouping("src", ["wrod"])
    with pytest.raises(TopologyError) as err:
        b.build()
    msg = str(err.value)
    assert "'wrod'" in msg and "does not declare" in msg and "'b'" in msg and "'src'" in msg
    assert "['word', 'n']" in msg  # what it does declare


def test_fields_grouping_without_fields():
    b = simple()
    b.set_bolt("b", Pass).fields_grouping("src", [])
    with pytest.raises(TopologyError, match="needs at least one field"):
        b.build()


def test_undeclared_stream():
    b = simple()
    b.set_bolt("b", Pass).shuffle_grouping("src", stream="late")
    with pytest.raises(TopologyError,
                       match=r"stream 'late' of 'src', which does not declare it "
                             r"\(declared streams: default\)"):
        b.build()


def test_subscribing_to_a_component_without_outputs():
    b = simple()
    b.set_bolt("sink", Sink).shuffle_grouping("src")
    b.set_bolt("after", Pass).shuffle_grouping("sink")
    with pytest.raises(TopologyError, match=r"declared streams: none"):
        b.build()


def test_fields_grouping_on_a_named_stream_checks_that_streams_fields():
    b = TopologyBuilder("t")
    b.set_spout("src", Multi)
    b.set_bolt("ok", Pass).fields_grouping("src", ["ts"], stream="late")
    b.build()
    b.set_bolt("bad", Pass).fields_grouping("src", ["ts"])  # default has no "ts"
    with pytest.raises(TopologyError, match=r"\['ts'\].*declared: \['word'\]"):
        b.build()


@pytest.mark.parametrize("parallelism", [0, -1, 1.5, "2", True])
def test_parallelism_must_be_a_positive_int(parallelism):
    b = TopologyBuilder("t")
    with pytest.raises(TopologyError, match=r"'s': parallelism must be an int >= 1"):
        b.set_spout("s", Src, parallelism=parallelism)
    with pytest.raises(TopologyError, match=r"'b': parallelism must be an int >= 1"):
        b.set_bolt("b", Pass, parallelism=parallelism)


@pytest.mark.parametrize("workers", [0, -2])
def test_workers_must_be_at_least_one(workers):
    with pytest.raises(ConfigError, match=rf"Config.workers={workers} is invalid: must be >= 1"):
        Config(workers=workers)


def test_unknown_config_key():
    with pytest.raises(ConfigError, match=r"unknown Config key\(s\) 'wokers'") as err:
        Config.from_dict({"wokers": 2})
    assert "workers" in str(err.value)  # the known keys are listed


@pytest.mark.parametrize("obj", [Pass, Pass(), 3, "Src", object])
def test_set_spout_needs_a_spout(obj):
    with pytest.raises(TopologyError, match=r"'s': set_spout needs a Spout subclass or instance"):
        TopologyBuilder("t").set_spout("s", obj)


@pytest.mark.parametrize("obj", [Src, Src(), 3])
def test_set_bolt_needs_a_bolt(obj):
    with pytest.raises(TopologyError, match=r"'b': set_bolt needs a Bolt subclass or instance"):
        TopologyBuilder("t").set_bolt("b", obj)


def test_bolt_without_input():
    b = simple()
    b.set_bolt("lonely", Pass)
    with pytest.raises(TopologyError, match=r"bolt 'lonely' has no input"):
        b.build()


def test_no_spout():
    b = TopologyBuilder("t")
    with pytest.raises(TopologyError, match=r"topology 't' has no spout"):
        b.build()


@pytest.mark.parametrize("name", ["", "a b", "x/y", 3])
def test_bad_topology_name(name):
    with pytest.raises(TopologyError, match="invalid"):
        TopologyBuilder(name)


def test_bad_component_name():
    with pytest.raises(TopologyError, match="non-empty string"):
        TopologyBuilder("t").set_spout("", Src)


def test_grouping_needs_a_component_name():
    d = simple().set_bolt("b", Pass)
    with pytest.raises(TopologyError, match="needs the source component's name"):
        d.shuffle_grouping(Src)


def test_custom_grouping_needs_an_instance():
    b = simple()
    b.set_bolt("b", Pass).custom_grouping("src", Pick)  # the class, not an instance
    with pytest.raises(TopologyError, match="needs a CustomStreamGrouping instance"):
        b.build()


def test_errors_are_jstorm_errors():
    assert issubclass(TopologyError, JStormError)
    assert issubclass(ConfigError, JStormError)


# -- groupings ------------------------------------------------------------------------------------

def test_grouping_methods_chain_and_record_every_subscription():
    b = TopologyBuilder("t")
    b.set_spout("src", Multi)
    b.set_spout("src2", Src)
    d = b.set_bolt("b", Pass, parallelism=2)
    grouping = Pick()
    same = (d.shuffle_grouping("src")
            .shuffle_grouping("src", stream="late")
            .fields_grouping("src2", Fields("word"))
            .all_grouping("src2")
            .global_grouping("src2")
            .direct_grouping("src2")
            .local_or_shuffle_grouping("src2")
            .none_grouping("src2")
            .custom_grouping("src2", grouping))
    assert same is d
    topo = b.build()
    inputs = [(g.kind, g.source, g.stream, g.fields, g.custom) for g in topo.components["b"].inputs]
    assert inputs == [
        ("shuffle", "src", "default", (), None),
        ("shuffle", "src", "late", (), None),
        ("fields", "src2", "default", ("word",), None),
        ("all", "src2", "default", (), None),
        ("global", "src2", "default", (), None),
        ("direct", "src2", "default", (), None),
        ("local_or_shuffle", "src2", "default", (), None),
        ("none", "src2", "default", (), None),
        ("custom", "src2", "default", (), grouping),
    ]
    assert [c.name for c, _ in topo.consumers("src2")] == ["b"] * 7


def test_fields_grouping_accepts_a_single_name_or_fields():
    b = simple()
    b.set_bolt("a", Pass).fields_grouping("src", "word")
    b.set_bolt("b", Pass).fields_grouping("src", Fields("word", "n"))
    topo = b.build()
    assert topo.components["a"].inputs[0].fields == ("word",)
    assert topo.components["b"].inputs[0].fields == ("word", "n")


def test_fields():
    assert Fields("word") == ("word",)
    assert Fields("a", "b") == ("a", "b")
    assert Fields(["a", "b"]) == ("a", "b")
    assert Fields("a", ["b", "c"]) == ("a", "b", "c")
    assert Fields() == ()
    assert isinstance(Fields("a"), tuple)


# -- task ids, plan, descriptor --------------------------------------------------------------------

def chain() -> Topology:
    b = TopologyBuilder("wc")
    b.set_spout("src", Src, parallelism=2)
    b.set_bolt("mid", Pass, parallelism=3).fields_grouping("src", ["word"])
    b.set_bolt("out", FileSink("/tmp/never-written"), parallelism=1).global_grouping("mid")
    return b.build()


def test_task_ids_are_sequential_from_one():
    topo = chain()
    assert topo.task_ids() == {"src": (1, 2), "mid": (3, 4, 5), "out": (6,)}
    assert [s.name for s in topo.spouts()] == ["src"]


def test_task_ids_follow_data_flow_order_even_if_declared_out_of_order():
    b = TopologyBuilder("t")
    b.set_bolt("b", Pass, parallelism=2).shuffle_grouping("src")
    b.set_spout("src", Src, parallelism=2)
    topo = b.build()
    assert list(topo.components) == ["src", "b"]
    assert topo.task_ids() == {"src": (1, 2), "b": (3, 4)}


def test_assign_tasks_round_robin_over_workers():
    topo = chain()
    assert assign_tasks(topo.task_ids(), 2) == {1: 0, 2: 1, 3: 0, 4: 1, 5: 0, 6: 1}
    assert set(assign_tasks(topo.task_ids(), 1).values()) == {0}


def test_descriptor_is_plain_data():
    import json

    d = chain().descriptor()
    assert json.loads(json.dumps(d)) == d
    assert d["name"] == "wc"
    comps = {c["name"]: c for c in d["components"]}
    assert list(comps) == ["src", "mid", "out"]
    assert comps["src"] == {
        "name": "src", "kind": "spout", "parallelism": 2, "tasks": [1, 2], "is_sink": False,
        "class": f"{Src.__module__}.Src", "streams": {"default": ["word", "n"]}, "inputs": []}
    assert comps["mid"]["inputs"] == [
        {"source": "src", "stream": "default", "grouping": "fields", "fields": ["word"]}]
    assert comps["mid"]["tasks"] == [3, 4, 5]
    assert comps["out"]["is_sink"] is True
    assert comps["out"]["class"] == "jstormpy.connectors.sinks.FileSink"
    assert comps["out"]["inputs"][0]["grouping"] == "global"


def test_component_given_as_a_configured_instance():
    b = TopologyBuilder("t")
    spout = Src()
    b.set_spout("src", spout)
    b.set_bolt("b", Pass).shuffle_grouping("src")
    topo = b.build()
    assert topo.components["src"].obj is spout
    assert topo.components["src"].cls is Src
    assert topo.components["b"].streams == {"default": ("word", "n")}


def test_named_streams_are_resolved():
    b = TopologyBuilder("t")
    b.set_spout("src", Multi)
    b.set_bolt("b", Pass).shuffle_grouping("src", stream="late")
    topo = b.build()
    assert topo.components["src"].streams == {"default": ("word",), "late": ("word", "ts")}
