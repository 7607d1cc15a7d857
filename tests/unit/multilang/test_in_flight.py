"""ShellBolt's outstanding tuples as ranges (jstormpy.multilang.in_flight) against a plain
set of the same numbers, through random sends and answers."""

from __future__ import annotations

import doctest
import random

import pytest

from jstormpy.multilang import in_flight
from jstormpy.multilang.in_flight import InFlight


def test_doctests():
    assert doctest.testmod(in_flight).failed == 0


@pytest.mark.parametrize("seed", range(20))
def test_ranges_hold_exactly_what_a_set_would(seed):
    rng = random.Random(seed)
    ranges, plain = InFlight(), set()
    sent = 1
    for _ in range(400):
        op = rng.random()
        if op < 0.3:  # a batch (or one tuple) sent
            n = rng.choice((1, 1, 3, 50))
            ranges.add_range(sent, sent + n)
            plain.update(range(sent, sent + n))
            sent += n
        elif op < 0.6:  # an ack range: often the oldest, sometimes anywhere, past the end
            first = (min(plain) if plain and rng.random() < 0.6
                     else rng.randrange(0, sent + 5))
            stop = first + rng.randrange(0, 60)
            ranges.discard_range(first, stop)
            plain.difference_update(range(first, stop))
        else:  # single acks as the protocol carries them, unknown and repeated ones too
            tuple_id = rng.choice([str(rng.randrange(0, sent + 3)), rng.randrange(0, sent),
                                   "hb-5", "other-id", "07"])
            ranges.discard_id(tuple_id)
            n = in_flight.tuple_number(tuple_id)
            plain.discard(n)
        assert len(ranges) == len(plain)
        assert {n for s, e in ranges.ranges() for n in range(s, e)} == plain
        starts = [s for s, _ in ranges.ranges()]
        assert starts == sorted(starts) and all(s < e for s, e in ranges.ranges())


def test_numbers_must_increase():
    ranges = InFlight()
    ranges.add_range(5, 8)
    with pytest.raises(ValueError, match="tuple numbers must increase: 6 after 7"):
        ranges.add_range(6, 9)
