"""The tuples a ShellBolt has sent its subprocess and not yet seen answered.

ShellBolt numbers the tuples it sends 1, 2, 3, ... (the multilang ids are those numbers as
strings), a received batch's consecutively, and our pystorm runner answers a frame's
auto-acks with one range: so the outstanding numbers are kept as ranges, and a batch sent
or a range acked costs the same whatever its size (no id string or set entry per tuple).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Any


def tuple_number(tuple_id: Any) -> int | None:
    """The number of a tuple id as ShellBolt sends it (``"17"`` -> 17, the id compared as
    a string); None for an id it never sends (a heartbeat's, a component's own).

    Example:
        >>> tuple_number("17"), tuple_number(17), tuple_number("017"), tuple_number("hb-1")
        (17, 17, None, None)
    """
    text = tuple_id if type(tuple_id) is str else str(tuple_id)
    if text.isascii() and text.isdigit() and (text[0] != "0" or text == "0"):
        return int(text)
    return None


class InFlight:
    """Outstanding tuple numbers as sorted, disjoint, half-open ranges.

    Numbers are added in increasing order (as ShellBolt gives them); any of them may be
    answered in any order, more than once, or never sent (an answer for a number not
    outstanding changes nothing).

    Example:
        >>> f = InFlight()
        >>> f.add_range(1, 6)
        >>> f.discard_range(1, 3)
        >>> f.discard_id("4")
        >>> len(f), f.ranges()
        (2, [(3, 4), (5, 6)])
    """

    __slots__ = ("_count", "_starts", "_stops")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._stops: list[int] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def ranges(self) -> list[tuple[int, int]]:
        """The outstanding numbers, ``(first, stop)`` each."""
        return list(zip(self._starts, self._stops, strict=True))

    def add_range(self, first: int, stop: int) -> None:
        """Tuples ``first`` up to (not including) ``stop`` sent.

        Raises:
            ValueError: ``first`` is below a number already added.
        """
        if first >= stop:
            return
        stops = self._stops
        if stops and first < stops[-1]:
            raise ValueError(f"tuple numbers must increase: {first} after {stops[-1] - 1}")
        if stops and stops[-1] == first:
            stops[-1] = stop
        else:
            self._starts.append(first)
            stops.append(stop)
        self._count += stop - first

    def discard_range(self, first: int, stop: int) -> None:
        """Tuples ``first`` up to (not including) ``stop`` answered."""
        starts, stops = self._starts, self._stops
        if not starts or first >= stop:
            return
        if starts[0] == first and stop <= stops[0]:  # the oldest first: the common case
            self._count -= stop - first
            if stop == stops[0]:
                del starts[0]
                del stops[0]
            else:
                starts[0] = stop
            return
        i = bisect_right(stops, first)  # the first range that ends past ``first``
        j = i
        kept_starts: list[int] = []
        kept_stops: list[int] = []
        removed = 0
        while j < len(starts) and starts[j] < stop:
            s, e = starts[j], stops[j]
            removed += min(e, stop) - max(s, first)
            if s < first:
                kept_starts.append(s)
                kept_stops.append(first)
            if e > stop:
                kept_starts.append(stop)
                kept_stops.append(e)
            j += 1
        starts[i:j] = kept_starts
        stops[i:j] = kept_stops
        self._count -= removed

    def discard_id(self, tuple_id: Any) -> None:
        """The tuple with multilang id ``tuple_id`` answered."""
        n = tuple_number(tuple_id)
        if n is not None:
            self.discard_range(n, n + 1)

    def discard_ids(self, tuple_ids: Iterable[Any]) -> None:
        """Each of ``tuple_ids`` answered."""
        for tuple_id in tuple_ids:
            self.discard_id(tuple_id)
