"""The Nexmark event generator, deterministic and seeded.

It follows the model that Beam's ``NexmarkGenerator`` (and Flink's copy of it in the
nexmark benchmark) implements:

* event ``n`` of every 50 is a person (1), an auction (3) or a bid (46);
* person and auction ids are numbered from 1000 in the order they are generated;
* an auction's seller is a *hot seller* (a person id rounded down to a multiple of 4)
  with probability 3/4 (``HOT_SELLER_RATIO``), else one of the last 1000 active people
  (or up to 10 beyond the newest: a seller that does not exist yet);
* a bid's auction is a *hot auction* (the newest auction id rounded down to a multiple of
  2) with probability 1/2, else one of the last 100 in-flight auctions (or up to 10
  beyond the newest); its bidder is a *hot bidder* (rounded down to a multiple of 4,
  plus 1) with probability 3/4, else an active person;
* an auction expires after a random length whose mean is the time that 100 further
  auctions take to be generated;
* event ``n``'s time is ``base + n * 1000 / rate`` ms (``rate`` events per second of
  event time);
* delivery is out of order, bounded: each event is delayed by a random ``0 .. delay_ms``
  and the events are written in order of ``time + delay``. So an event is never
  delivered after an event more than ``delay_ms`` newer than itself: a watermark of
  ``max time seen - delay_ms`` never makes a record late.

Same seed and parameters, same file, byte for byte.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
HOT_AUCTION_RATIO = 2
HOT_SELLER_RATIO = 4
HOT_BIDDER_RATIO = 4
AVG_PERSON_BYTES = 200
AVG_AUCTION_BYTES = 500
AVG_BID_BYTES = 100

BASE_TIME_MS = 1_700_000_000_000  # a round epoch (10 s aligned) for the first event
DEFAULT_RATE = 1000
DEFAULT_DELAY_MS = 1000

FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
             "Redmond", "Seattle", "Kent", "Cheyenne")
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")


@dataclass(frozen=True)
class GeneratorConfig:
    """What the events depend on: count, seed, event-time rate and delivery delay."""

    events: int
    seed: int = 0
    rate: int = DEFAULT_RATE          # events per second of event time
    delay_ms: int = DEFAULT_DELAY_MS  # out-of-order delivery bound

    def __post_init__(self) -> None:
        if self.events < 0 or self.rate <= 0 or self.delay_ms < 0:
            raise ValueError(f"bad generator config {self}: events >= 0, rate > 0 and "
                             "delay_ms >= 0 are needed")

    def timestamp(self, event_number: int) -> int:
        """Event time (epoch ms) of event ``event_number``."""
        return BASE_TIME_MS + (event_number * 1000) // self.rate


def last_base0_person_id(event_id: int) -> int:
    """The base-0 id of the newest person at or before event ``event_id``."""
    epoch, offset = divmod(event_id, PROPORTION_DENOMINATOR)
    offset = min(offset, PERSON_PROPORTION - 1)
    return epoch * PERSON_PROPORTION + offset


def last_base0_auction_id(event_id: int) -> int:
    """The base-0 id of the newest auction at or before event ``event_id``."""
    epoch, offset = divmod(event_id, PROPORTION_DENOMINATOR)
    if offset < PERSON_PROPORTION:
        epoch -= 1
        offset = AUCTION_PROPORTION - 1
    elif offset >= PERSON_PROPORTION + AUCTION_PROPORTION:
        offset = AUCTION_PROPORTION - 1
    else:
        offset -= PERSON_PROPORTION
    return epoch * AUCTION_PROPORTION + offset


def _next_base0_person_id(event_id: int, rnd: random.Random) -> int:
    num_people = last_base0_person_id(event_id) + 1
    active = min(num_people, NUM_ACTIVE_PEOPLE)
    return num_people - active + rnd.randrange(active + PERSON_ID_LEAD)


def _next_base0_auction_id(event_id: int, rnd: random.Random) -> int:
    max_auction = last_base0_auction_id(event_id)
    min_auction = max(max_auction - NUM_IN_FLIGHT_AUCTIONS, 0)
    return min_auction + rnd.randrange(max_auction - min_auction + 1 + AUCTION_ID_LEAD)


def _next_string(rnd: random.Random, max_length: int) -> str:
    n = 3 + rnd.randrange(max_length)
    return "".join(" " if rnd.randrange(13) == 0 else chr(ord("a") + rnd.randrange(26))
                   for _ in range(n)).strip() or "x"


def _next_exact_string(rnd: random.Random, length: int) -> str:
    return "".join(chr(ord("a") + rnd.randrange(26)) for _ in range(length))


def _next_extra(rnd: random.Random, current_size: int, desired_average: int) -> str:
    if current_size > desired_average:
        return ""
    avg = desired_average - current_size
    delta = max(avg // 5, 1)
    return _next_exact_string(rnd, avg - delta + rnd.randrange(2 * delta + 1))


def _next_price(rnd: random.Random) -> int:
    return round(10.0 ** (rnd.random() * 6.0) * 100.0)


def _auction_length_ms(cfg: GeneratorConfig, event_number: int, now: int,
                       rnd: random.Random) -> int:
    events_for_auctions = NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
    horizon = cfg.timestamp(event_number + events_for_auctions) - now
    return 1 + rnd.randrange(max(horizon * 2, 1))


def _person(event_id: int, now: int, rnd: random.Random) -> dict[str, Any]:
    pid = last_base0_person_id(event_id) + FIRST_PERSON_ID
    name = f"{rnd.choice(FIRST_NAMES)} {rnd.choice(LAST_NAMES)}"
    email = f"{_next_string(rnd, 7)}@{_next_string(rnd, 5)}.com"
    card = " ".join(f"{rnd.randrange(10000):04d}" for _ in range(4))
    city, state = rnd.choice(US_CITIES), rnd.choice(US_STATES)
    size = 8 + len(name) + len(email) + len(card) + len(city) + len(state)
    return {"type": "person", "id": pid, "name": name, "emailAddress": email,
            "creditCard": card, "city": city, "state": state, "dateTime": now,
            "extra": _next_extra(rnd, size, AVG_PERSON_BYTES)}


def _auction(cfg: GeneratorConfig, event_id: int, now: int,
             rnd: random.Random) -> dict[str, Any]:
    aid = last_base0_auction_id(event_id) + FIRST_AUCTION_ID
    if rnd.randrange(HOT_SELLER_RATIO) > 0:  # a hot seller
        seller = (last_base0_person_id(event_id) // HOT_SELLER_RATIO) * HOT_SELLER_RATIO
    else:
        seller = _next_base0_person_id(event_id, rnd)
    seller += FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + rnd.randrange(NUM_CATEGORIES)
    initial = _next_price(rnd)
    expires = now + _auction_length_ms(cfg, event_id, now, rnd)
    item, desc = _next_string(rnd, 20), _next_string(rnd, 100)
    reserve = initial + _next_price(rnd)
    size = 8 + len(item) + len(desc) + 8 + 8 + 8 + 8 + 8
    return {"type": "auction", "id": aid, "itemName": item, "description": desc,
            "initialBid": initial, "reserve": reserve, "dateTime": now, "expires": expires,
            "seller": seller, "category": category,
            "extra": _next_extra(rnd, size, AVG_AUCTION_BYTES)}


def _bid(event_id: int, now: int, rnd: random.Random) -> dict[str, Any]:
    if rnd.randrange(HOT_AUCTION_RATIO) > 0:  # a hot auction
        auction = (last_base0_auction_id(event_id) // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO
    else:
        auction = _next_base0_auction_id(event_id, rnd)
    auction += FIRST_AUCTION_ID
    if rnd.randrange(HOT_BIDDER_RATIO) > 0:  # a hot bidder
        bidder = (last_base0_person_id(event_id) // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1
    else:
        bidder = _next_base0_person_id(event_id, rnd)
    bidder += FIRST_PERSON_ID
    price = _next_price(rnd)
    channel = rnd.choice(CHANNELS)
    url = f"https://www.nexmark.com/{_next_exact_string(rnd, 5)}/item.htm?query=1"
    size = 8 * 4 + len(channel) + len(url)
    return {"type": "bid", "auction": auction, "bidder": bidder, "price": price,
            "channel": channel, "url": url, "dateTime": now,
            "extra": _next_extra(rnd, size, AVG_BID_BYTES)}


def events_in_time_order(cfg: GeneratorConfig) -> Iterator[dict[str, Any]]:
    """The events in event-time order (before the out-of-order delivery)."""
    rnd = random.Random(cfg.seed)
    for n in range(cfg.events):
        now = cfg.timestamp(n)
        rem = n % PROPORTION_DENOMINATOR
        if rem < PERSON_PROPORTION:
            yield _person(n, now, rnd)
        elif rem < PERSON_PROPORTION + AUCTION_PROPORTION:
            yield _auction(cfg, n, now, rnd)
        else:
            yield _bid(n, now, rnd)


def generate_events(cfg: GeneratorConfig) -> Iterator[dict[str, Any]]:
    """The events in delivery order: each delayed by at most ``cfg.delay_ms``."""
    delays = random.Random(cfg.seed ^ 0x5EED)
    pending: list[tuple[int, int, dict[str, Any]]] = []
    for n, event in enumerate(events_in_time_order(cfg)):
        now = event["dateTime"]
        while pending and pending[0][0] <= now:  # nothing later can be delivered earlier
            yield heapq.heappop(pending)[2]
        delay = delays.randrange(cfg.delay_ms + 1) if cfg.delay_ms else 0
        heapq.heappush(pending, (now + delay, n, event))
    while pending:
        yield heapq.heappop(pending)[2]


def write_events(cfg: GeneratorConfig, path: str) -> int:
    """Write the events file (JSON lines, delivery order); returns the number written."""
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        for event in generate_events(cfg):
            fh.write(json.dumps(event, separators=(",", ":")))
            fh.write("\n")
            count += 1
    return count


def read_events(path: str) -> Iterator[dict[str, Any]]:
    """The events of an events file, in file order."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)
