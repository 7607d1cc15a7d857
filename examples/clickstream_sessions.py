"""Clickstream sessionisation with the dataflow API: clicks per user session (session
windows), exactly-once, with a worker SIGKILLed mid-run and the result verified.

    python examples/clickstream_sessions.py                # kill a worker, then verify
    jstorm run examples/clickstream_sessions.py --chaos 7  # the same through the CLI

Pipeline (``docs/dataflow.md``): clicks spout (replayable, a few clicks out of order)
→ ``key_by(user)`` → ``window(SessionWindows(gap_ms=5_000), timestamp=ts,
out_of_orderness_ms=2_000)`` → ``aggregate(Count())`` and the session's pages →
transactional file sink. A session ends after 5 s of event time without a click by that
user; sessions merge when a late-arriving click bridges two of them.

``verify`` recomputes every user's sessions in plain Python from the same clicks and
checks, from the committed files only, that each session was committed exactly once with
the right start, end and click count.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from jstormpy import Config, FileSink, Spout, read_committed
from jstormpy.dataflow import Dataflow
from jstormpy.window import Count, SessionWindows

USERS = 40
CLICKS = 12_000                 # one every 50 ms of event time: 10 minutes
GAP_MS = 5_000
PAGES = ("home", "search", "item", "cart", "checkout")


def click(i: int) -> tuple[str, str, int]:
    """The i-th click (deterministic): user, page, event time (ms)."""
    rng = random.Random(i)
    user = f"u{int(rng.random() ** 2 * USERS):02d}"   # a few users click a lot
    ts = i * 50 - (1_500 if i % 61 == 0 else 0)         # some out of order, within 2 s
    return user, PAGES[rng.randrange(len(PAGES))], ts


class Clicks(Spout):
    """Replayable source: its offset is the whole state."""

    outputs = ("user", "page", "ts")

    def __init__(self, per_call: int = 40) -> None:
        self.offset = 0
        self.per_call = per_call

    def next_tuple(self) -> None:
        end = min(self.offset + self.per_call, CLICKS)
        for i in range(self.offset, end):
            self.emit(click(i))
        self.offset = end
        if self.offset >= CLICKS:
            self.finish()
        time.sleep(0.01)  # a steady stream: the run lasts a few seconds, a kill lands mid-run

    def snapshot(self) -> int:
        return self.offset

    def restore(self, snap: int) -> None:
        self.offset = snap


def build(out: Path) -> Any:
    flow = Dataflow("clickstream-sessions")
    clicks = flow.source("clicks", Clicks())
    (clicks.key_by(lambda c: c["user"], name="by-user")
           .window(SessionWindows(gap_ms=GAP_MS), timestamp=lambda c: c["ts"],
                   out_of_orderness_ms=2_000)
           .aggregate(Count(), name="sessions", parallelism=2)
           .map(lambda w: {"user": w.key, "start": w.start, "end": w.end, "clicks": w.value,
                           "kind": w.kind}, name="as-row")
           .sink("out", FileSink(out)))
    return flow.build()


OUT = Path(tempfile.mkdtemp(prefix="clickstream-sessions-"))
topology = build(OUT)
config = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=300)


def reference() -> dict[tuple[str, int], tuple[int, int]]:
    """(user, start) -> (end, clicks): sessions computed from all clicks at once."""
    times: dict[str, list[int]] = defaultdict(list)
    for i in range(CLICKS):
        user, _, ts = click(i)
        times[user].append(ts)
    sessions: dict[tuple[str, int], tuple[int, int]] = {}
    for user, ts_list in times.items():
        ts_list.sort()
        start = prev = ts_list[0]
        n = 0
        for ts in ts_list:
            if ts - prev > GAP_MS:  # windows [t, t + gap) that touch merge (as in Flink)
                sessions[(user, start)] = (prev + GAP_MS, n)
                start, n = ts, 0
            prev, n = ts, n + 1
        sessions[(user, start)] = (prev + GAP_MS, n)
    return sessions


def verify(handle: Any = None, out: Path = OUT) -> bool:
    """Every reference session committed exactly once, with its end and click count."""
    rows = read_committed(out)
    want = reference()
    seen: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        seen[(r["user"], r["start"])].append(r)
    problems = [f"session {k}: committed {len(v)} times" for k, v in seen.items() if len(v) != 1]
    problems += [f"session {k}: missing" for k in want if k not in seen]
    problems += [f"session {k}: {v[0]['end']}, {v[0]['clicks']} clicks != {want[k]}"
                 for k, v in seen.items() if k in want and (v[0]["end"], v[0]["clicks"])
                 != want[k]]
    problems += [f"session {k}: not in the reference" for k in seen if k not in want]
    print(f"verify: {len(want)} sessions of {USERS} users, {len(rows)} committed rows, "
          f"read back from {out}; {len(problems) or 'no'} problems")
    for p in problems[:10]:
        print("  -", p)
    if not problems:
        print("verify: exactly once: every session committed once, with the start, end and "
              "click count of a recomputation over all clicks")
    return not problems


def main() -> int:
    from jstormpy.testing.chaos import ChaosSchedule, Kill, run_with_chaos

    schedule = ChaosSchedule(7, (Kill("worker", at_s=1.0, worker=1),))
    status, kills, _ = run_with_chaos(topology, config, schedule, timeout=300)
    print(f"drained: generation {status['generation']}, {status['restarts']} recoveries; "
          + "; ".join(kills))
    return 0 if status["state"] == "drained" and verify() else 1


if __name__ == "__main__":
    sys.exit(main())
