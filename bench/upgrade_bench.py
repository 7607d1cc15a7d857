"""Gray-release benchmark: the pause the untouched workers see and the total switch time
when one of three workers is upgraded (and rolled back), with 100k keys of managed state.

    .venv/bin/python bench/upgrade_bench.py [--keys 100000] [--rounds 3]

Topology: SequenceSpout(3) -> RunningSum(3, fields on key; state: key -> (sum, count))
-> FileSink(3). The state is filled (every key seen) before the first switch. Each round
upgrades worker 1 to v2 (a RunningSum that appends a field) and rolls it back; both are
switches of one worker. Figures are measured by the Topology Master (status()["upgrade"]):

* pause    — untouched workers' spouts stopped: quiescent barrier sent -> spouts resumed
* quiesce  — quiescent checkpoint (snapshot of all state) trigger -> complete
* restart  — worker told to exit -> new process registered on the new code
* restore  — partial Prepare (restore its tasks' state) -> Ready
* total    — switch requested -> resumed
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from test_upgrade import write_version  # noqa: E402

from jstormpy import Config, LocalCluster  # noqa: E402
from jstormpy.cli.main import load_topology_file  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=8000.0, help="events/s per spout task")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jstorm-upgrade-bench-"))
    out = tmp / "out"
    v1 = load_topology_file(str(write_version(tmp / "v1.py", out, keys=args.keys,
                                              per_key=1000, rate=args.rate)))
    v2 = write_version(tmp / "v2.py", out, v2=True, keys=args.keys, per_key=1000,
                       rate=args.rate)
    conf = Config(workers=3, checkpoint_interval_ms=1000, log_level="WARNING",
                  state_backend=f"file://{tmp / 'ckpt'}")
    rows = []
    with LocalCluster(home=tmp / "home") as cluster:
        handle = cluster.submit(v1.topology, conf)
        t0 = time.monotonic()
        while True:  # fill the state: every key seen once (events emitted >= keys)
            m = handle.metrics()
            done = m["components"].get("sum", {}).get("executed", 0)
            last = handle.status()["last_completed_checkpoint"]
            if done >= args.keys and last is not None:
                break
            time.sleep(0.2)
        print(f"state filled ({args.keys} keys) in {time.monotonic() - t0:.1f} s; last "
              f"checkpoint {last['size_bytes'] / 1e6:.1f} MB in {last['duration_ms']} ms")
        for _ in range(args.rounds):
            for action, code in (("start", str(v2)), ("rollback", None)):
                t = time.monotonic()
                state = handle.upgrade(code, action, workers=[1] if code else ())
                wall = (time.monotonic() - t) * 1000
                sw = state["switches"][-1]
                rows.append(sw)
                print(f"{sw['kind']:<8} w1 -> {sw['to']}: pause {sw['pause_ms']:7.0f} ms  "
                      f"total {sw['total_ms']:7.0f} ms  (quiesce {sw['quiesce_ms']:.0f}, "
                      f"restart {sw['restart_ms']:.0f}, restore {sw['restore_ms']:.0f}; "
                      f"client wall {wall:.0f} ms)", flush=True)
        st = handle.status()
        print(f"generation {st['generation']}, restarts {st['restarts']}")
    for key in ("pause_ms", "total_ms", "quiesce_ms", "restart_ms", "restore_ms"):
        vals = [r[key] for r in rows]
        print(f"{key:<11} median {statistics.median(vals):7.0f}  min {min(vals):7.0f}  "
              f"max {max(vals):7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
