"""Per-key count windows with pane-based incremental aggregation.

Elements are folded into panes of ``g = gcd(size, slide)`` elements, so a window over
the last ``size`` elements is the merge of ``size / g`` pane accumulators and no raw
element is ever stored.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from functools import reduce
from typing import Any


class CountWindowState:
    """The count-window state of one key."""

    __slots__ = ("cur", "cur_n", "n", "panes")

    def __init__(self, panes_kept: int) -> None:
        self.n = 0
        """Elements seen for this key."""
        self.panes: deque[Any] = deque(maxlen=panes_kept)
        """Accumulators of the most recent complete panes."""
        self.cur: Any = None
        """Accumulator of the pane being filled (None if empty)."""
        self.cur_n = 0

    def dump(self) -> tuple[int, list[Any], Any, int]:
        """Plain data for snapshots."""
        return (self.n, list(self.panes), self.cur, self.cur_n)

    @classmethod
    def load(cls, panes_kept: int, data: tuple[int, list[Any], Any, int]) -> CountWindowState:
        """Rebuild from :meth:`dump` output."""
        state = cls(panes_kept)
        state.n, panes, state.cur, state.cur_n = data
        state.panes.extend(panes)
        return state


class CountWindowLogic:
    """Adds elements to per-key count-window state and says when/what to fire."""

    __slots__ = ("_add", "_create", "_merge", "pane", "panes_kept", "size", "slide")

    def __init__(self, size: int, slide: int, create: Callable[[], Any],
                 add: Callable[[Any, Any], Any], merge: Callable[[Any, Any], Any]) -> None:
        self.size = size
        self.slide = slide
        self.pane = math.gcd(size, slide)
        self.panes_kept = size // self.pane
        self._create = create
        self._add = add
        self._merge = merge

    def new_state(self) -> CountWindowState:
        """Empty state for a new key."""
        return CountWindowState(self.panes_kept)

    def add(self, state: CountWindowState, record: Any) -> tuple[int, int, Any] | None:
        """Add one element; returns ``(start, end, acc)`` if a window completes."""
        state.cur = self._add(self._create() if state.cur is None else state.cur, record)
        state.cur_n += 1
        state.n += 1
        if state.cur_n == self.pane:
            state.panes.append(state.cur)
            state.cur = None
            state.cur_n = 0
        n = state.n
        if n % self.slide:
            return None
        return (max(0, n - self.size), n, reduce(self._merge, state.panes))

    def flush(self, state: CountWindowState) -> tuple[int, int, Any] | None:
        """The partly filled next window ``[max(0, n' - size), n)`` (n' = next multiple of
        slide), or None if the last element completed a window."""
        n = state.n
        if n == 0 or n % self.slide == 0:
            return None
        nxt = -(-n // self.slide) * self.slide
        start = max(0, nxt - self.size)
        complete_end = n - state.cur_n
        first_pane_start = complete_end - len(state.panes) * self.pane
        accs = [acc for i, acc in enumerate(state.panes)
                if first_pane_start + i * self.pane >= start]
        if state.cur is not None:
            accs.append(state.cur)
        return (start, n, reduce(self._merge, accs))
