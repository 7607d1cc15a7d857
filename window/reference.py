"""A brute-force reference of the window semantics, for tests only.

It keeps every accepted record and recomputes each window from them whenever it
fires, so it is slow but easy to check by eye. It models on-time and late firings and
late records (not early firings, which the tests check as properties). See
:mod:`jstormpy.window.operator` for the semantics.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from jstormpy.window.assigners import CountWindows, SessionWindows, WindowAssigner
from jstormpy.window.operator import Aggregator
from jstormpy.window.types import Firing, LateRecord, Window


class ReferenceWindows:
    """Same driving calls as WindowOperator (without processing time / early firing)."""

    def __init__(self, assigner: WindowAssigner, aggregator: Aggregator,
                 allowed_lateness_ms: float = 0) -> None:
        self.assigner = assigner
        self.agg = aggregator
        self.lateness = allowed_lateness_ms
        self.wm = -math.inf
        self.fired: set[tuple[Any, float, float]] = set()
        # time windows: (key, start, end) -> records accepted into that window
        self.contents: dict[tuple[Any, float, float], list[Any]] = {}
        # sessions: key -> live (not purged) [(ts, record)]
        self.live: dict[Any, list[tuple[float, Any]]] = {}
        # count windows: key -> every record
        self.elements: dict[Any, list[Any]] = {}

    def _fold(self, key: Any, start: float, end: float, records: list[Any]) -> Any:
        acc = self.agg.create()
        for rec in records:
            acc = self.agg.add(acc, rec)
        return self.agg.result(key, Window(start, end), acc)

    def _windows_of(self, ts: float) -> list[tuple[float, float]]:
        size = self.assigner.size_ms  # type: ignore[union-attr]
        slide = self.assigner.slide_ms  # type: ignore[union-attr]
        out = []
        k = math.floor((ts - size) / slide) - 1
        while k * slide <= ts:
            start = k * slide
            if start <= ts < start + size:
                out.append((start, start + size))
            k += 1
        return out

    def _sessions(self, key: Any) -> list[tuple[float, float, list[Any]]]:
        gap = self.assigner.gap_ms  # type: ignore[union-attr]
        out: list[tuple[float, float, list[Any]]] = []
        for ts, rec in sorted(self.live.get(key, []), key=lambda p: p[0]):
            if out and ts <= out[-1][1]:
                start, end, recs = out[-1]
                out[-1] = (start, max(end, ts + gap), [*recs, rec])
            else:
                out.append((ts, ts + gap, [rec]))
        return out

    def process(self, key: Hashable, ts: float, record: Any) -> list[Firing | LateRecord]:
        """Add one record; late firings or a LateRecord."""
        if isinstance(self.assigner, CountWindows):
            elems = self.elements.setdefault(key, [])
            elems.append(record)
            n, size, slide = len(elems), self.assigner.size, self.assigner.step
            if n % slide:
                return []
            start = max(0, n - size)
            return [Firing(key, start, n, self._fold(key, start, n, elems[start:n]), "on_time")]
        if isinstance(self.assigner, SessionWindows):
            self.live.setdefault(key, []).append((ts, record))
            # sessions cover disjoint timestamp ranges: exactly one holds ts
            start, end, recs = next(s for s in self._sessions(key) if s[0] <= ts < s[1])
            if self.wm >= end + self.lateness:
                self.live[key].pop()
                return [LateRecord(key, ts, record)]
            if end <= self.wm:  # a session is complete at its end (operator.py's docs)
                self.fired.add((key, start, end))
                return [Firing(key, start, end, self._fold(key, start, end, recs), "late")]
            return []
        out: list[Firing | LateRecord] = []
        for start, end in self._windows_of(ts):
            if self.wm >= end + self.lateness:
                continue
            recs = self.contents.setdefault((key, start, end), [])
            recs.append(record)
            if end - 1 <= self.wm:
                self.fired.add((key, start, end))
                out.append(Firing(key, start, end, self._fold(key, start, end, recs), "late"))
        if not any(self.wm < end + self.lateness for _, end in self._windows_of(ts)):
            return [LateRecord(key, ts, record)]
        return out

    def advance_watermark(self, wm: float) -> list[Firing]:
        """On-time firings of every unfired window the watermark passed."""
        if isinstance(self.assigner, CountWindows) or wm <= self.wm:
            return []
        self.wm = wm
        out = []
        if isinstance(self.assigner, SessionWindows):
            for key in list(self.live):
                for start, end, recs in self._sessions(key):
                    if end <= wm and (key, start, end) not in self.fired:
                        self.fired.add((key, start, end))
                        out.append(Firing(key, start, end, self._fold(key, start, end, recs),
                                          "on_time"))
                    if wm >= end + self.lateness:
                        self.live[key] = [p for p in self.live[key]
                                          if not start <= p[0] < end]
            return out
        for (key, start, end), recs in self.contents.items():
            if end - 1 <= wm and (key, start, end) not in self.fired:
                self.fired.add((key, start, end))
                out.append(Firing(key, start, end, self._fold(key, start, end, recs), "on_time"))
        return out

    def finish(self) -> list[Firing]:
        """Watermark to +inf (count windows: the partly filled next window)."""
        if not isinstance(self.assigner, CountWindows):
            return self.advance_watermark(math.inf)
        out = []
        size, slide = self.assigner.size, self.assigner.step
        for key, elems in self.elements.items():
            n = len(elems)
            if n % slide:
                nxt = -(-n // slide) * slide
                start = max(0, nxt - size)
                out.append(Firing(key, start, n, self._fold(key, start, n, elems[start:n]),
                                  "on_time"))
        return out
