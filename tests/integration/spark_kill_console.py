"""Run by test_spark.py in its own process, so its console can be read as a user sees it:
a word count on Spark (``argv[1]`` master), worker ``argv[2]`` SIGKILLed mid-run, drained.
Prints ``=== KILLED <worker> <pid>`` before the kill and ``=== DONE <json>`` at the end on
stderr, around whatever Spark and the launcher print."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from jstormpy import Config
from jstormpy.deploy.spark import SparkCluster, create_session

from .spark_topologies import wordcount, write_corpus


def main() -> None:
    master, victim, tmp = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    write_corpus(tmp / "corpus", files=2)
    spark = create_session(master, app_name="jstormpy-console",
                           conf={"spark.ui.enabled": "false"})
    topo = wordcount(tmp / "out", tmp / "corpus", pause_s=0.02, name="spark-console")
    with SparkCluster(spark, home=tmp / "home") as cluster:
        handle = cluster.submit(topo, Config(workers=2, checkpoint_interval_ms=300))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            workers = handle.workers()
            if len(workers) == 2 and all(w.alive and w.pid for w in workers) \
                    and handle.last_completed_checkpoint() is not None:
                pid = next(w.pid for w in workers if w.id == victim)
                print(f"=== KILLED {victim} {pid}", file=sys.stderr, flush=True)
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        status = handle.wait(timeout=600)
    print(f"=== DONE {json.dumps({'restarts': status['restarts']})}", file=sys.stderr,
          flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
