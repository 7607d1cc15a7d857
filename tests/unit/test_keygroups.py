"""Key groups: stable hashing, ranges, routing/state agreement, redistribution on rescale."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from jstormpy import Config, keygroups
from jstormpy.api.errors import ConfigError, JStormError
from jstormpy.keygroups import (
    KeyRouter,
    default_max_parallelism,
    key_group,
    key_group_range,
    key_hash,
    redistribute,
    resolve_max_parallelism,
    split_by_key_group,
    task_index_for_key_group,
)
from jstormpy.runtime.routing import MessageKind, OutputCollector, Route

KEYS: list[Any] = ["apple", "pear", "", "é", 0, 1, -7, 2**70, 1.5, b"raw", None,
                   ("a", 1), ("a", (2, "b"))]


def test_key_hash_is_the_same_in_processes_with_other_hash_seeds() -> None:
    code = ("from jstormpy.keygroups import key_hash\n"
            f"print([key_hash(k) for k in {KEYS!r}])")
    outs = set()
    for seed in ("1", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, check=True).stdout.strip())
    assert outs == {str([key_hash(k) for k in KEYS])}


def test_keys_equal_in_a_dict_share_a_key_group() -> None:
    assert key_hash(1) == key_hash(1.0) == key_hash(True)
    assert key_hash("1") != key_hash(1)
    assert key_hash(("a", "b")) != key_hash("ab")


def test_key_groups_spread_keys_evenly() -> None:
    counts = Counter(key_group(f"word-{i}", 128) for i in range(12800))
    assert len(counts) == 128
    assert max(counts.values()) < 2 * 100 and min(counts.values()) > 100 // 2


@pytest.mark.parametrize("p, want", [(1, 128), (2, 128), (85, 128), (86, 256),
                                     (1000, 2048), (100_000, 32768)])
def test_default_max_parallelism_follows_flinks_rule(p: int, want: int) -> None:
    assert default_max_parallelism(p) == want


def test_ranges_are_contiguous_and_cover_every_key_group_once() -> None:
    for max_p in (128, 7):
        for n in range(1, max_p + 1):
            seen = []
            for i in range(n):
                r = key_group_range(max_p, n, i)
                assert len(r) >= 1
                assert all(task_index_for_key_group(max_p, n, g) == i for g in r)
                seen.extend(r)
            assert seen == list(range(max_p))


def test_config_max_parallelism_is_validated() -> None:
    assert Config().max_parallelism == 0
    with pytest.raises(ConfigError, match="max_parallelism"):
        Config(max_parallelism=-1)
    with pytest.raises(ConfigError, match="max_parallelism=4 is below"):
        resolve_max_parallelism(4, [2, 8])
    assert resolve_max_parallelism(0, [2, 200]) == 512
    # as many key groups as the largest parallelism: one each, accepted
    assert resolve_max_parallelism(8, [2, 8]) == 8


def _routed(max_p: int, n: int, keys: list[Any], batch: bool) -> dict[Any, int]:
    sent: list[tuple[int, tuple[Any, ...]]] = []
    targets = list(range(100, 100 + n))
    route = Route("fields", "default", "count", targets, 1,
                  lambda d, item: sent.append((d, item)), 4, (0,), max_parallelism=max_p)
    coll = OutputCollector(1, "src", {"default": [route]}, targets, route.send,
                           streams={"default": ("word",)})
    if batch:
        coll.emit_batch({"word": keys})
    else:
        for k in keys:
            coll.emit([k])
    coll.flush()
    out: dict[Any, int] = {}
    for dst, (_src, kind, _s, rows) in sent:
        assert kind == MessageKind.DATA
        for (k,) in rows:
            assert out.setdefault(k, dst - 100) == dst - 100
    return out


@pytest.mark.parametrize("batch", [False, True])
def test_fields_grouping_sends_each_key_to_the_task_owning_its_key_group(batch: bool) -> None:
    keys = [f"k{i}" for i in range(500)] + list(range(300))
    routed = _routed(64, 3, keys * 2, batch)
    assert set(routed) == set(keys)
    for k, i in routed.items():
        assert key_group(k, 64) in key_group_range(64, 3, i)


def _snapshots(n: int, max_p: int, counts: dict[str, int]) -> list[dict[str, Any]]:
    snaps = [{"states": {"counts": {}}, "max_parallelism": max_p, "state_version": 1}
             for _ in range(n)]
    for k, v in counts.items():
        snaps[task_index_for_key_group(max_p, n, key_group(k, max_p))]["states"]["counts"][k] = v
    return snaps


def test_a_fields_grouping_hashes_each_key_once_while_its_memo_has_room(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fields-grouped route remembers the task of every key it routed (a bounded memo):
    the keys of a stream come again and again, and routing one it saw is a dict lookup,
    not another hash of the key."""
    route = KeyRouter(default_max_parallelism(4), 4)
    keys = [f"user-{i}" for i in range(1000)]
    first = [route(k) for k in keys]
    assert first == [task_index_for_key_group(route.max_parallelism, 4,
                                              key_group(k, route.max_parallelism))
                     for k in keys]

    def hashed_again(key: Any) -> int:
        raise AssertionError(f"{key!r} was hashed again")

    monkeypatch.setattr(keygroups, "key_hash", hashed_again)
    assert [route(k) for k in keys] == first


def test_redistribute_up_and_down_keeps_every_key_at_its_new_owner() -> None:
    counts = {f"w{i}": i for i in range(2000)}
    snaps = _snapshots(2, 128, counts)
    for n in (4, 3, 1, 2):
        snaps = redistribute("count", snaps, n, 128)
        assert len(snaps) == n
        merged: dict[str, int] = {}
        for i, s in enumerate(snaps):
            part = s["states"].get("counts", {})
            assert all(key_group(k, 128) in key_group_range(128, n, i) for k in part)
            assert not set(merged) & set(part)
            merged.update(part)
        assert merged == counts


def test_split_by_key_group_lets_any_set_of_groups_be_restored() -> None:
    groups = split_by_key_group({"a": {"x": 1, "y": 2}, "b": {"x": 3}}, 16)
    assert {g for g in groups} == {key_group("x", 16), key_group("y", 16)}
    assert groups[key_group("x", 16)]["b"] == {"x": 3}


def test_custom_state_needs_a_hook_and_the_refusal_names_the_component() -> None:
    snaps = _snapshots(2, 128, {"a": 1})
    for s in snaps:
        s["custom"] = {"total": 5}
    with pytest.raises(JStormError, match="'dedup'.*redistribute_state"):
        redistribute("dedup", snaps, 3, 128)
    out = redistribute("dedup", snaps, 3, 128,
                       hook=lambda olds, n: [{"total": 10 if i == 0 else 0} for i in range(n)])
    assert [s["custom"] for s in out] == [{"total": 10}, {"total": 0}, {"total": 0}]


def test_state_written_with_other_max_parallelism_is_refused() -> None:
    snaps = _snapshots(2, 256, {"a": 1})
    with pytest.raises(JStormError, match="max_parallelism=256 but this run has "
                                          "max_parallelism=128"):
        redistribute("count", snaps, 4, 128)


def test_batched_key_groups_agree_with_key_hash_across_batches() -> None:
    """key_groups_of (inline encoding, finaliser over 64-bit lanes, batches of 65536)
    gives every key the group key_hash gives it, for any max_parallelism."""
    import random

    from jstormpy.keygroups import key_groups_of

    keys: list[Any] = [f"w{i}" for i in range(70000)] + KEYS + [
        True, 2.0, -2**40, "x" * 300, "ü" * 255, "y" * 256, "\ud800", (1, "a"),
        frozenset({1})]  # 255 and 256 characters: either side of the inline encoding's limit
    random.Random(3).shuffle(keys)
    for max_p in (128, 1000, 32768, 1, 3):
        assert key_groups_of(keys, max_p) == [key_hash(k) % max_p for k in keys], max_p
    assert key_groups_of(iter(keys[:10]), 128) == [key_group(k, 128) for k in keys[:10]]
    assert key_groups_of([], 128) == []


def test_key_group_of_one_key_agrees_with_key_hash() -> None:
    """key_group encodes str and int keys inline (one per state read); every key still
    gets the group key_hash gives it, for any max_parallelism."""
    import random

    rng = random.Random(5)
    keys: list[Any] = [rng.randrange(-2**70, 2**70) for _ in range(5000)] + [
        f"w{i}" for i in range(5000)] + KEYS + [
        True, False, 2.0, -2**63, 2**63, "x" * 300, "ü" * 255, "\ud800", (1, "a")]
    for max_p in (128, 1000, 32768, 1, 3):
        assert [key_group(k, max_p) for k in keys] == [key_hash(k) % max_p for k in keys]


def test_an_unchanged_parallelism_above_256_tasks_keeps_each_snapshot_as_it_is() -> None:
    """The same number of tasks is no rescale, however many there are: custom state with
    no redistribute hook stays with its task (CPython shares only the ints up to 256, so
    the check is an equality, not an identity)."""
    n = 300
    snaps = [{"custom": i, "max_parallelism": 1024, "states": {}} for i in range(n)]
    out = redistribute("wide", snaps, int(str(n)), 1024)
    assert [s["custom"] for s in out] == list(range(n))


class _WindowsByKey:
    """A component whose snapshot holds per-key state and splits it by key group, as a
    window operator does (``redistribute_keyed_state``)."""

    @staticmethod
    def redistribute_keyed_state(old_states: list[Any], new_parallelism: int,
                                 place: Any) -> list[dict[str, int]]:
        out: list[dict[str, int]] = [{} for _ in range(new_parallelism)]
        for state in old_states:
            for key, value in state.items():
                out[place(key)][key] = value
        return out


def test_a_keyed_custom_state_moves_each_key_to_the_task_that_owns_its_key_group() -> None:
    """A rescale of 2 tasks to 3 hands the hook a placement of the new layout: every key
    of the component's own snapshot lands in the new task that owns its key group (the
    task the fields grouping routes the key to after the rescale), none is lost."""
    keys = [f"user-{i}" for i in range(300)]
    old = [{k: i for i, k in enumerate(keys)
            if task_index_for_key_group(128, 2, key_group(k, 128)) == t} for t in range(2)]
    hook = keygroups.redistribution_hook(_WindowsByKey, 128)
    assert hook is not None
    new = hook(old, 3)
    assert len(new) == 3 and sum(len(part) for part in new) == len(keys)
    for t, part in enumerate(new):
        assert all(task_index_for_key_group(128, 3, key_group(k, 128)) == t for k in part)
