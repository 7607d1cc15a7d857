"""Routes and the OutputCollector in-process: every grouping's choice, batching, flush."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from jstormpy import CustomStreamGrouping
from jstormpy.api.errors import JStormError, TopologyError
from jstormpy.api.topology import Grouping
from jstormpy.runtime.routing import (
    MessageKind,
    OutputCollector,
    Route,
    build_routes,
)

TARGETS = (10, 11, 12)


class Sent:
    """A send fn collecting ``(dst, item)``."""

    def __init__(self) -> None:
        self.items: list[tuple[int, tuple[Any, ...]]] = []

    def __call__(self, dst: int, item: tuple[Any, ...]) -> None:
        self.items.append((dst, item))

    def data(self) -> list[tuple[int, Any]]:
        """(dst, values) of every DATA tuple, in send order."""
        return [(dst, v) for dst, (_src, kind, _s, batch) in self.items if kind == MessageKind.DATA
                for v in batch]

    def per_target(self) -> Counter[int]:
        return Counter(dst for dst, _ in self.data())


def route(kind: str, sent: Sent, *, src: int = 1, batch_size: int = 1, targets=TARGETS,
          **kw: Any) -> Route:
    return Route(kind, "default", "consumer", targets, src, sent, batch_size, **kw)


@pytest.mark.parametrize("kind", ["shuffle", "none"])
def test_shuffle_spreads_evenly(kind):
    sent = Sent()
    r = route(kind, sent)
    for i in range(300):
        r.add((i,))
    assert sent.per_target() == {10: 100, 11: 100, 12: 100}
    # round robin: consecutive tuples go to different tasks
    dsts = [d for d, _ in sent.data()]
    assert all(a != b for a, b in zip(dsts, dsts[1:], strict=False))


def test_shuffle_emitters_start_at_different_tasks():
    firsts = set()
    for src in range(3):
        sent = Sent()
        route("shuffle", sent, src=src).add(("x",))
        firsts.add(sent.items[0][0])
    assert firsts == set(TARGETS)


def test_fields_same_key_same_task_and_spread():
    sent = Sent()
    r = route("fields", sent, key_index=(0,))
    keys = [f"k{i}" for i in range(60)]
    for _ in range(3):
        for k in keys:
            r.add((k, 1))
    task_of: dict[str, set[int]] = {}
    for dst, values in sent.data():
        task_of.setdefault(values[0], set()).add(dst)
    assert all(len(t) == 1 for t in task_of.values())
    assert {t for ts in task_of.values() for t in ts} == set(TARGETS)  # 60 keys use all 3
    # another emitter (same process, same hash seed) agrees
    other = Sent()
    r2 = route("fields", other, src=7, key_index=(0,))
    for k in keys:
        r2.add((k, 2))
    assert all(task_of[v[0]] == {d} for d, v in other.data())


def test_fields_multi_field_key():
    sent = Sent()
    r = route("fields", sent, key_index=(0, 2))
    for i in range(50):
        r.add(("a", i, "b"))  # the middle field is not part of the key
    assert len(sent.per_target()) == 1


def test_all_sends_to_every_task():
    sent = Sent()
    r = route("all", sent)
    for i in range(5):
        r.add((i,))
    assert sent.per_target() == {10: 5, 11: 5, 12: 5}


def test_global_goes_to_the_lowest_task():
    sent = Sent()
    r = route("global", sent, targets=(10, 11, 12))
    for i in range(5):
        r.add((i,))
    assert sent.per_target() == {10: 5}


def test_build_routes_sorts_targets_so_global_is_lowest():
    sent = Sent()
    routes, channels = build_routes(
        1, "src", {"default": ("n",)}, [("c", Grouping("global", "src"))],
        {"src": (1,), "c": (9, 4, 7)}, {1: 0, 4: 0, 7: 1, 9: 0}, sent, 1)
    routes["default"][0].add((1,))
    assert sent.items[0][0] == 4
    assert channels == [4, 7, 9]


def test_local_or_shuffle_prefers_tasks_of_the_same_worker():
    sent = Sent()
    r = route("local_or_shuffle", sent, local_targets=(10, 12))
    for i in range(100):
        r.add((i,))
    assert sent.per_target() == {10: 50, 12: 50}


def test_local_or_shuffle_without_local_tasks_shuffles_over_all():
    sent = Sent()
    r = route("local_or_shuffle", sent, local_targets=())
    for i in range(99):
        r.add((i,))
    assert sent.per_target() == {10: 33, 11: 33, 12: 33}


def test_build_routes_computes_local_targets_from_the_plan():
    sent = Sent()
    plan = {1: 0, 2: 1, 3: 0, 4: 1, 5: 0}  # task -> worker
    routes, _ = build_routes(2, "src", {"default": ("n",)},
                             [("c", Grouping("local_or_shuffle", "src"))],
                             {"src": (1, 2), "c": (3, 4, 5)}, plan, sent, 1)
    for i in range(10):
        routes["default"][0].add((i,))
    assert sent.per_target() == {4: 10}  # task 2 runs on worker 1, like task 4 only


def test_direct_only_via_emit_direct():
    sent = Sent()
    r = route("direct", sent)
    r.add((1,))  # a plain emit does not reach a direct subscriber
    assert sent.items == []
    r.add_direct(11, ("x",))
    r.add_direct(12, ("y",))
    assert sent.data() == [(11, ("x",)), (12, ("y",))]
    with pytest.raises(JStormError, match=r"emit_direct to task 99, which is not a task of "
                                          r"'consumer' \(tasks \[10, 11, 12\]\)"):
        r.add_direct(99, ("z",))


class LastDigit(CustomStreamGrouping):
    def prepare(self, source, stream, target_tasks):
        self.prepared = (source, stream, list(target_tasks))

    def choose_tasks(self, task_id, values):
        return [t for t in self.prepared[2] if t % 10 == values[0] % 10]


def test_custom_grouping_chooses():
    sent = Sent()
    g = LastDigit()
    g.prepare("src", "default", list(TARGETS))
    r = route("custom", sent, custom=g)
    for v in (0, 1, 2, 3, 12):
        r.add((v,))
    assert sent.data() == [(10, (0,)), (11, (1,)), (12, (2,)), (12, (12,))]  # 3 -> nobody


def test_custom_grouping_choosing_a_foreign_task_is_an_error():
    class Bad(CustomStreamGrouping):
        def choose_tasks(self, task_id, values):
            return [42]

    r = route("custom", Sent(), custom=Bad())
    with pytest.raises(JStormError, match="chose task 42, which is not a task of 'consumer'"):
        r.add((1,))


def test_build_routes_prepares_a_copy_of_the_custom_grouping_per_emitter():
    g = LastDigit()
    routes, _ = build_routes(1, "src", {"default": ("n",)}, [("c", Grouping("custom", "src",
                                                                       custom=g))],
                             {"src": (1,), "c": (10, 11)}, {}, Sent(), 1)
    copy = routes["default"][0].custom
    assert copy is not g and copy.prepared == ("src", "default", [10, 11])
    assert not hasattr(g, "prepared")


def test_custom_grouping_base_class_must_be_implemented():
    with pytest.raises(TopologyError, match="choose_tasks is not implemented"):
        CustomStreamGrouping().choose_tasks(1, (1,))


# -- batching ------------------------------------------------------------------------------------

def test_batches_are_sent_when_full():
    sent = Sent()
    r = route("global", sent, src=5, batch_size=4)
    for i in range(10):
        r.add((i,))
    assert [(dst, item[0], item[1], item[2], len(item[3])) for dst, item in sent.items] == [
        (10, 5, MessageKind.DATA, "default", 4), (10, 5, MessageKind.DATA, "default", 4)]
    r.flush()
    assert [len(item[3]) for _, item in sent.items] == [4, 4, 2]
    assert [v for _, v in sent.data()] == [(i,) for i in range(10)]  # order kept
    r.flush()  # nothing left: nothing sent
    assert len(sent.items) == 3


def test_batches_are_per_target():
    sent = Sent()
    r = route("shuffle", sent, batch_size=2)
    for i in range(6):
        r.add((i,))
    # 2 per target → exactly one full batch each, nothing left over
    assert sorted(dst for dst, _ in sent.items) == [10, 11, 12]
    assert all(len(item[3]) == 2 for _, item in sent.items)


# -- collector -----------------------------------------------------------------------------------

def collector(sent: Sent, batch_size: int = 100) -> OutputCollector:
    streams = {"default": ("word", "n"), "late": ("word",)}
    consumers = [("a", Grouping("fields", "src", "default", ("word",))),
                 ("b", Grouping("all", "src", "late")),
                 ("d", Grouping("direct", "src", "default"))]
    tasks = {"src": (1,), "a": (2, 3), "b": (4, 5), "d": (6,)}
    routes, channels = build_routes(1, "src", streams, consumers, tasks, {}, sent, batch_size)
    return OutputCollector(1, "src", routes, channels, sent)


def test_collector_routes_per_stream_and_flushes():
    sent = Sent()
    c = collector(sent)
    c.emit(("x", 1))
    c.emit(("y",), stream="late")
    assert sent.items == [] and c.dirty  # batched until flushed
    c.flush()
    got = sorted(sent.data())
    assert [d for d, v in got if v == ("y",)] == [4, 5]   # all grouping on "late"
    assert len([v for _, v in got if v == ("x", 1)]) == 1  # fields grouping on default
    assert c.emitted == 2 and not c.dirty
    c.flush()
    assert len(sent.items) == len(got)


def test_collector_emit_direct():
    sent = Sent()
    c = collector(sent)
    c.emit_direct(6, ("z", 0))
    c.flush()
    assert sent.data() == [(6, ("z", 0))]
    with pytest.raises(TopologyError, match="emit_direct on stream 'late', which no bolt reads "
                                            "with direct_grouping"):
        c.emit_direct(6, ("z",), stream="late")


def test_collector_undeclared_stream_is_an_error():
    c = collector(Sent())
    with pytest.raises(TopologyError, match=r"component 'src' emitted on stream 'nope', which "
                                            r"it does not declare in `outputs` \(declared: "
                                            r"\['default', 'late'\]\)"):
        c.emit(("x", 1), stream="nope")
    assert c.emitted == 0


def test_collector_markers_go_to_every_channel():
    sent = Sent()
    c = collector(sent)
    c.emit(("x", 1))
    c.broadcast(MessageKind.BARRIER, 7)
    # a marker does not flush by itself (the executor flushes before barriers)
    assert sorted(dst for dst, item in sent.items if item[1] == MessageKind.BARRIER) == [2, 3, 4, 5, 6]
    c.emit_watermark(100.0)
    marks = [(dst, item) for dst, item in sent.items if item[1] == MessageKind.WATERMARK]
    assert sorted(d for d, _ in marks) == [2, 3, 4, 5, 6]
    assert all(item == (1, MessageKind.WATERMARK, "", 100.0) for _, item in marks)
    # the watermark flushed the pending tuple first
    first_wm = next(i for i, (_, it) in enumerate(sent.items) if it[1] == MessageKind.WATERMARK)
    assert any(it[1] == MessageKind.DATA for _, it in sent.items[:first_wm])
    n = len(sent.items)
    c.emit_watermark(50.0)  # not advancing: nothing sent
    assert len(sent.items) == n
    c.broadcast(MessageKind.END_OF_STREAM, None)
    assert sum(1 for _, it in sent.items if it[1] == MessageKind.END_OF_STREAM) == 5


def test_items_carry_plain_int_kinds_that_the_fast_codec_takes():
    """An item's kind is the plain int of its MessageKind, so a batch of scalar rows and a
    barrier cross the transport with marshal (tag ``M``), not pickle."""
    from jstormpy.runtime.codec import MARSHAL, encode_item

    sent = Sent()
    c = collector(sent)
    c.emit(("x", 1))
    c.flush()
    c.broadcast(MessageKind.BARRIER, 7)
    assert {item[1] for _, item in sent.items} == {MessageKind.DATA, MessageKind.BARRIER}
    assert {type(item[1]) for _, item in sent.items} == {int}
    assert all(encode_item(dst, item)[:1] == MARSHAL for dst, item in sent.items)


@pytest.mark.parametrize(("kind", "kw"), [("shuffle", {}), ("fields", {"key_index": (0,)}),
                                          ("all", {}), ("global", {}),
                                          ("local_or_shuffle", {"local_targets": (11,)})])
def test_emit_tracked_returns_the_tasks_each_tuple_went_to(kind, kw):
    # the multilang protocol's need_task_ids: the answer must be where the tuple went
    sent = Sent()
    coll = OutputCollector(1, "c", {"default": [route(kind, sent, **kw)]}, TARGETS, sent,
                           streams={"default": ("k",)})
    answers = [coll.emit_tracked((f"key{i}",)) for i in range(30)]
    coll.flush()
    went: dict[str, list[int]] = {}
    for dst, values in sent.data():
        went.setdefault(values[0], []).append(dst)
    assert all(went[f"key{i}"] == answers[i] for i in range(30))
    assert coll.emitted == 30


def test_emit_tracked_on_a_declared_stream_nobody_reads_and_an_undeclared_one():
    sent = Sent()
    coll = OutputCollector(1, "c", {}, (), sent, streams={"default": ("k",)})
    assert coll.emit_tracked(("a",)) == []
    with pytest.raises(TopologyError, match="'late'"):
        coll.emit_tracked(("a",), stream="late")
