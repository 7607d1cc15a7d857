"""The fused one-route ``emit`` keeps no per-tuple counter: ``emitted`` (task metrics, the
spout loop's "did next_tuple emit") and ``dirty`` (flush before markers, linger) are read
off the route. They must still say exactly what was emitted and what is unsent."""

from __future__ import annotations

from typing import Any

import pytest

from jstormpy.runtime.routing import MessageKind, OutputCollector, Route


def make(kind: str, sent: list[tuple[int, Any]], batch_size: int = 4) -> OutputCollector:
    def send(dst: int, item: Any) -> None:
        sent.append((dst, item))

    key = (0,) if kind == "fields" else ()
    local = [3] if kind == "local_or_shuffle" else []
    route = Route(kind, "default", "next", [3, 4], 1, send, batch_size, key, None, local)
    coll = OutputCollector(1, "src", {"default": [route]}, [3, 4], send,
                           streams={"default": ("word", "n")})
    assert coll.emit.__name__.startswith("emit_")  # the fused closure is in use
    return coll


def rows_sent(sent: list[tuple[int, Any]]) -> list[Any]:
    return [v for _, (_s, kind, _st, batch) in sent if kind == MessageKind.DATA for v in batch]


@pytest.mark.parametrize("kind", ["fields", "shuffle", "global", "local_or_shuffle"])
def test_emitted_and_dirty_follow_every_path_of_a_fused_collector(kind: str) -> None:
    sent: list[tuple[int, Any]] = []
    coll = make(kind, sent)
    assert coll.emitted == 0 and not coll.dirty
    coll.emit(("a", 1))
    assert coll.emitted == 1 and coll.dirty and sent == []  # buffered, not sent
    for i in range(9):  # fills at least one batch of 4: sent from inside emit
        coll.emit((f"w{i % 3}", i))
    assert coll.emitted == 10
    assert 0 < len(rows_sent(sent)) < 10 and coll.dirty
    coll.emit_batch({"word": ["x", "y"], "n": [1, 2]})  # batch API on the same collector
    assert coll.emitted == 12
    coll.flush()
    assert not coll.dirty and coll.emitted == 12 and len(rows_sent(sent)) == 12
    if kind in ("global", "local_or_shuffle"):  # the one target / the one local task
        assert {dst for dst, item in sent} == {3}
    coll.flush()  # nothing left: nothing sent
    assert len(sent) == len({id(item) for _, item in sent})
    coll.emit(("z", 0))
    coll.emit_watermark(5.0)  # a marker flushes what is buffered first
    kinds = [item[1] for _, item in sent]
    assert kinds[-2:] == [MessageKind.WATERMARK, MessageKind.WATERMARK] and MessageKind.DATA in kinds[:-2]
    assert rows_sent(sent)[-1] == ("z", 0) and not coll.dirty and coll.emitted == 13


def test_undeclared_stream_on_a_fused_collector_counts_nothing() -> None:
    from jstormpy.api.errors import TopologyError

    coll = make("fields", [])
    with pytest.raises(TopologyError, match="does not declare"):
        coll.emit(("a", 1), stream="nope")
    assert coll.emitted == 0 and not coll.dirty
