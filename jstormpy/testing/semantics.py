"""The exactly-once checker: find lost, duplicated and reordered events in a sink's output.

The idea is Flink's SemanticsCheck: a deterministic source emits, per key, the sequence
numbers ``0 .. n-1`` in order (see :class:`jstormpy.connectors.sources.SequenceSpout`);
after a run (with as many crashes as you like) the committed output must contain every
sequence number of every key exactly once, and — per key — in increasing order.

Example:
    >>> recs = [{"k": "a", "s": 0}, {"k": "a", "s": 2}, {"k": "a", "s": 2}]
    >>> report = check_sequences(recs, key="k", seq="s", expected={"a": 4})
    >>> report.ok, report.lost, report.duplicated
    (False, {'a': [1, 3]}, {'a': [2]})
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.errors import SemanticsError

__all__ = ["SemanticsReport", "check_running_totals", "check_sequences"]

_MAX_KEYS_SHOWN = 5
_MAX_ITEMS_SHOWN = 8


@dataclass(frozen=True)
class SemanticsReport:
    """What :func:`check_sequences` found. Every dict only holds keys with a problem.

    Attributes:
        lost: key → sequence numbers expected but never seen (sorted).
        duplicated: key → sequence numbers seen more than once (one entry per extra copy,
            in arrival order).
        reordered: key → ``(larger_seq_seen_before, seq)`` pairs: ``seq`` arrived after a
            larger sequence number of the same key (duplicates are not counted here).
        unexpected: key → sequence numbers outside ``0 .. expected[key] - 1``, or of a key
            not in ``expected`` at all.
    """

    lost: dict[Any, list[int]]
    duplicated: dict[Any, list[int]]
    reordered: dict[Any, list[tuple[int, int]]]
    unexpected: dict[Any, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True if nothing was lost, duplicated, reordered or unexpected."""
        return not (self.lost or self.duplicated or self.reordered or self.unexpected)

    def summary(self) -> str:
        """A readable one-paragraph account naming keys and counts.

        Example:
            >>> SemanticsReport(lost={"k1": [3, 4, 5]}, duplicated={}, reordered={}).summary()
            'exactly-once VIOLATED: lost 3 event(s) on 1 key(s): k1 [3-5]'
        """
        if self.ok:
            return "exactly-once OK: no event lost, duplicated, reordered or unexpected"
        sections: list[tuple[str, dict[Any, str], int]] = [
            (label, {k: _ranges(v) for k, v in per_key.items()},
             sum(len(v) for v in per_key.values()))
            for label, per_key in (("lost", self.lost), ("duplicated", self.duplicated),
                                   ("unexpected", self.unexpected))
        ]
        sections.insert(2, ("reordered", {k: _pairs(v) for k, v in self.reordered.items()},
                            sum(len(v) for v in self.reordered.values())))
        parts = []
        for label, shown_per_key, total in sections:
            if not shown_per_key:
                continue
            keys = list(shown_per_key)
            shown = "; ".join(f"{k} [{shown_per_key[k]}]" for k in keys[:_MAX_KEYS_SHOWN])
            if len(keys) > _MAX_KEYS_SHOWN:
                shown += f"; ... {len(keys) - _MAX_KEYS_SHOWN} more key(s)"
            parts.append(f"{label} {total} event(s) on {len(keys)} key(s): {shown}")
        return "exactly-once VIOLATED: " + " | ".join(parts)


def _ranges(values: list[int]) -> str:
    """``[1, 2, 3, 7, 7]`` → ``"1-3, 7, 7"`` (at most a few runs shown)."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:_MAX_ITEMS_SHOWN]]
    if len(runs) > _MAX_ITEMS_SHOWN:
        text.append(f"... {len(runs) - _MAX_ITEMS_SHOWN} more")
    return ", ".join(text)


def _pairs(values: list[tuple[int, int]]) -> str:
    text = [f"{s} after {m}" for m, s in values[:_MAX_ITEMS_SHOWN]]
    if len(values) > _MAX_ITEMS_SHOWN:
        text.append(f"... {len(values) - _MAX_ITEMS_SHOWN} more")
    return ", ".join(text)


def check_sequences(records: Iterable[Mapping[str, Any]], key: str, seq: str,
                    expected: Mapping[Any, int]) -> SemanticsReport:
    """Check that every key has each of its sequence numbers exactly once, in order.

    Args:
        records: The output records in committed order (e.g. from
            :func:`jstormpy.connectors.sinks.read_committed`).
        key: The record field holding the key.
        seq: The record field holding the sequence number (an int).
        expected: key → how many sequence numbers (``0 .. n-1``) the key must have.

    Returns:
        A :class:`SemanticsReport`; ``report.ok`` tells whether the run was exactly-once.

    Raises:
        SemanticsError: A record lacks the ``key`` or ``seq`` field, or its seq is not an int.
    """
    seen: dict[Any, set[int]] = {}
    highest: dict[Any, int] = {}
    duplicated: dict[Any, list[int]] = {}
    reordered: dict[Any, list[tuple[int, int]]] = {}
    unexpected: dict[Any, list[int]] = {}
    for position, record in enumerate(records):
        try:
            k = record[key]
            s = record[seq]
        except KeyError as exc:
            raise SemanticsError(f"record #{position} {dict(record)!r} has no field "
                                 f"{exc.args[0]!r} (key={key!r}, seq={seq!r})") from None
        if isinstance(s, bool) or not isinstance(s, int):
            raise SemanticsError(f"record #{position}: {seq!r} is {s!r}, not an int")
        if k not in expected or not 0 <= s < expected[k]:
            unexpected.setdefault(k, []).append(s)
            continue
        key_seen = seen.setdefault(k, set())
        if s in key_seen:
            duplicated.setdefault(k, []).append(s)
            continue
        key_seen.add(s)
        top = highest.get(k, -1)
        if s < top:
            reordered.setdefault(k, []).append((top, s))
        else:
            highest[k] = s
    lost: dict[Any, list[int]] = {}
    for k, n in expected.items():
        key_seen = seen.get(k, set())
        if len(key_seen) < n:
            lost[k] = [s for s in range(n) if s not in key_seen]
    return SemanticsReport(lost=lost, duplicated=duplicated, reordered=reordered,
                           unexpected=unexpected)


def check_running_totals(records: Iterable[Mapping[str, Any]], key: str, seq: str, total: str,
                         amount_of: Callable[[Any, int], int], limit: int = 5) -> list[str]:
    """Check a running total per key: exactly-once *state* as well as output.

    A record ``{key: k, seq: s, total: t}`` is right when ``t`` is the sum of
    ``amount_of(k, i)`` for ``i`` in ``0 .. s`` -- what a stateful bolt that adds each
    input to a per-key total emits when its state saw every input exactly once.

    Args:
        records: The output records (any order).
        key: The record field holding the key.
        seq: The record field holding the sequence number.
        total: The record field holding the running total.
        amount_of: ``(key, seq) -> amount`` the source gave that input.
        limit: Stop after this many problems.

    Returns:
        Problems found, one line each (empty: every total is right).
    """
    sums: dict[Any, list[int]] = {}
    problems: list[str] = []
    for r in records:
        k, s = r[key], int(r[seq])
        acc = sums.setdefault(k, [])
        while len(acc) <= s:
            acc.append((acc[-1] if acc else 0) + amount_of(k, len(acc)))
        if int(r[total]) != acc[s]:
            problems.append(f"{k!r} {seq} {s}: {total} {r[total]} != {acc[s]}")
            if len(problems) >= limit:
                break
    return problems
