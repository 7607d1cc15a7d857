"""Rescale benchmark: a stateful bolt with many keys goes 2 -> 4 -> 2 tasks while a word
count runs in the same topology (docs/rescaling.md).

    .venv/bin/python -m bench.rescale_bench [--keys 1000000] [--per-key 4] [--json]
    .venv/bin/python -m bench.rescale_bench --keys 2000        # a quick functional run

Topology: ``events`` SequenceSpout(2, ``--keys`` keys x ``--per-key`` events) ->
``keyed`` KeyedTotals(2, fields on key; state key -> (sum, count)) -> ``totals``
FileSink(1); and ``sentences`` (2) -> ``split`` (2) -> ``count`` (2) -> ``report`` (1), the
word count, which the rescale does not touch. Once every key has state, ``keyed`` is
rescaled to 4, then back to 2. Reported per rescale:

* pause     — spouts stopped (quiescent barrier) -> new layout running (Topology Master)
* stall     — longest time the word count's ``count`` bolt made no progress around the
              rescale, as polled from outside (what the untouched branch sees)
* total     — rescale requested -> new layout running; and its steps (quiesce,
              redistribute, restart)

At the end every key's committed final (sum, count) is compared with a recomputation, and
the word count's total with the corpus. Do not quote figures from a loaded machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cloudpickle

from bench._common import (
    BenchCount,
    BenchReport,
    BenchSentences,
    BenchSplit,
    emit_json,
    read_results,
)
from jstormpy import Bolt, Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder
from jstormpy.api.topology import Topology
from jstormpy.connectors.sinks import read_committed


class KeyedTotals(Bolt):
    """Per key (managed keyed state): running (sum, count); emits the totals at the end."""

    outputs = ("key", "sum", "count")

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.totals = self.state("totals")

    def execute(self, tup: Any) -> None:
        key = tup.values[0]
        total, count = self.totals.get(key, (0, 0))
        self.totals[key] = (total + tup.values[2], count + 1)

    def on_inputs_finished(self) -> None:
        for key, (total, count) in self.totals.items():
            self.emit((key, total, count))


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def build(tmp: Path, keys: int, per_key: int, rate: float, sentences: int) -> Topology:
    b = TopologyBuilder("rescale-bench")
    b.set_spout("events", SequenceSpout(keys=keys, per_key=per_key, batch=500,
                                        rate_per_s=rate), parallelism=2)
    b.set_bolt("keyed", KeyedTotals, parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("totals", FileSink(str(tmp / "totals")), parallelism=1).global_grouping("keyed")
    b.set_spout("sentences", BenchSentences(sentences, str(tmp), rate=2000.0), parallelism=2)
    b.set_bolt("split", BenchSplit(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("count", BenchCount(str(tmp)), parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("report", BenchReport(str(tmp)), parallelism=1).global_grouping("count")
    return b.build()


def executed(handle: Any, component: str) -> int:
    """Tuples ``component`` executed (restarted tasks count from 0 again)."""
    return int(handle.metrics()["components"].get(component, {}).get("executed", 0))


def rescale_and_watch(handle: Any, parallelism: int, poll_s: float = 0.02) -> dict[str, Any]:
    """Rescale ``keyed``; poll the word count meanwhile for its longest stall (until it
    made progress again after the rescale)."""
    state = handle.rescale({"keyed": parallelism}, wait=False)
    last_value, last_change, stall = executed(handle, "count"), time.monotonic(), 0.0
    done_at = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = handle.status()
        value = executed(handle, "count")
        now = time.monotonic()
        if value != last_value:
            stall = max(stall, now - last_change)
            last_value, last_change = value, now
            if done_at is not None:
                break  # the word count moved again after the rescale
        rs = status["rescale"]
        if done_at is None and status["state"] == "running" and rs["phase"] == "idle" \
                and rs["done"] >= state["requested"]:
            done_at = now
        if done_at is not None and status["state"] != "running":
            break  # drained meanwhile
        time.sleep(poll_s)
    record: dict[str, Any] = handle.client.wait_rescale(int(state["requested"]),
                                                        {"keyed": parallelism})
    record["stall_ms"] = round(stall * 1000, 1)
    return record


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--per-key", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="keyed events/s per spout task (default: --keys / 10, so the "
                             "state fills in about 5 s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jstorm-rescale-bench-"))
    rate = args.rate or max(args.keys / 10, 50.0)
    run_s = args.keys * args.per_key / (2 * rate)
    sentences = int(2000 * (run_s + 20))  # the word count runs about as long
    conf = Config(workers=2, checkpoint_interval_ms=2000, log_level="WARNING",
                  state_backend=f"file://{tmp / 'ckpt'}")
    rows = []
    with LocalCluster(home=tmp / "home") as cluster:
        handle = cluster.submit(build(tmp, args.keys, args.per_key, rate, sentences), conf)
        t0 = time.monotonic()
        while executed(handle, "keyed") < args.keys:  # every key has state
            time.sleep(0.1)
        print(f"{args.keys} keys in state after {time.monotonic() - t0:.1f} s", flush=True)
        for parallelism in (4, 2):
            r = rescale_and_watch(handle, parallelism)
            if r.get("error"):
                raise SystemExit(f"rescale to {parallelism} failed: {r['error']}")
            rows.append({"to": parallelism, **r})
            print(f"keyed -> {parallelism}: pause {r['pause_ms']:.0f} ms, word count stall "
                  f"{r['stall_ms']:.0f} ms, total {r['total_ms']:.0f} ms (quiesce "
                  f"{r['quiesce_ms']:.0f}, redistribute {r['redistribute_ms']:.0f}, restart "
                  f"{r['restart_ms']:.0f})", flush=True)
        handle.wait(timeout=max(600.0, 4 * run_s))
        finals = read_committed(tmp / "totals")
    expected_sum = sum(SequenceSpout.value_of(s) for s in range(args.per_key))
    got = {r["key"]: (r["sum"], r["count"]) for r in finals}
    bad = [k for k in (f"k{i}" for i in range(args.keys))
           if got.get(k) != (expected_sum, args.per_key)]
    words = sum(r["words"] for r in read_results(str(tmp), "report"))
    ok = not bad and len(got) == args.keys == len(finals) and words == sentences * 10
    print(f"per-key state equals the recomputation: {not bad and len(got) == args.keys} "
          f"({len(bad)} wrong of {args.keys}); word count total {words} of "
          f"{sentences * 10}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        emit_json({"keys": args.keys, "per_key": args.per_key, "rescales": rows,
                   "per_key_equal": not bad, "wordcount_ok": words == sentences * 10})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
