"""How often the Topology Master's spout throttle switches with a tiny queue.

``queue_capacity=8`` and a bolt ~300x slower than its spout (the set-up of
``tests/integration/test_backpressure.py``): samples ``status()["backpressure"]`` every
0.2 s for ``--seconds`` and prints the share of samples with the spout throttled, the
on/off switches seen and the throttle count, and the bottleneck queue fill range.

    python bench/backpressure_cycles.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jstormpy import Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder  # noqa: E402
from tests.integration.bp_components import SlowPassThrough  # noqa: E402


def main() -> None:
    """Run the measurement and print one line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp()) / "out"
    b = TopologyBuilder("bp-cycles")
    b.set_spout("events", SequenceSpout(keys=4, per_key=10**6), parallelism=1)
    b.set_bolt("slow", SlowPassThrough, parallelism=1).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("slow")
    cfg = Config(workers=2, checkpoint_interval_ms=300, queue_capacity=8, batch_size=32,
                 heartbeat_interval_ms=100, send_buffer_bytes=16 * 1024,
                 throttle_lease_ms=600)
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), cfg)
        while handle.status()["state"] != "running":
            time.sleep(0.1)
        count0 = handle.status()["backpressure"]["throttle_count"]
        samples: list[tuple[bool, float]] = []
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            bp = handle.status()["backpressure"]
            samples.append((bool(bp["throttled_spouts"]), bp["bottleneck_fill"]))
            time.sleep(0.2)
        count1 = handle.status()["backpressure"]["throttle_count"]
        handle.kill()
    switches = sum(1 for a, b2 in zip(samples, samples[1:], strict=False) if a[0] != b2[0])
    fills = sorted(f for _t, f in samples)
    print(f"{len(samples)} samples: throttled in {sum(t for t, _f in samples)}, "
          f"{switches} on/off switches seen, {count1 - count0} throttles in "
          f"{args.seconds:.0f} s; bottleneck fill {fills[0]:.0%}..{fills[-1]:.0%} "
          f"(median {fills[len(fills) // 2]:.0%})")


if __name__ == "__main__":
    main()
