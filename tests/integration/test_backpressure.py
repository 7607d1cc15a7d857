"""Topology-level backpressure: a slow bolt throttles its upstream spouts by lease."""

from __future__ import annotations

import re
import time

import pytest

from jstormpy import Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder, read_committed
from jstormpy.cli_status import format_status
from jstormpy.testing.semantics import check_sequences
from tests.integration.bp_components import SlowPassThrough

KEYS, PER_KEY = 4, 3000


def _topology(out):
    b = TopologyBuilder("bp-slow")
    b.set_spout("events", SequenceSpout(keys=KEYS, per_key=PER_KEY, batch=200), parallelism=1)
    b.set_bolt("slow", SlowPassThrough, parallelism=1).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("slow")
    return b.build()


CONFIG = Config(workers=2, guarantee="exactly_once", checkpoint_interval_ms=300,
                queue_capacity=8, batch_size=32, heartbeat_interval_ms=100,
                send_buffer_bytes=16 * 1024,
                throttle_lease_ms=600, backpressure_high_watermark=0.75,
                backpressure_low_watermark=0.25)


def _run(tmp_path, env=None):
    out = tmp_path / "out"
    seen_throttled = set()
    throttled_text = ""
    with LocalCluster(env=env) as cluster:
        handle = cluster.submit(_topology(out), CONFIG)
        deadline = time.monotonic() + 120
        while True:
            status = handle.status()
            seen_throttled.update(status["backpressure"]["throttled_spouts"])
            if status["backpressure"]["throttled_spouts"] and not throttled_text:
                throttled_text = format_status(status)  # what `jstorm status` prints
            if status["state"] == "drained":
                break
            assert status["state"] in ("starting", "recovering", "running"), status["state"]
            assert time.monotonic() < deadline, "topology did not drain"
            time.sleep(0.05)  # polling interval of the observer, not a stand-in for a condition
    records = read_committed(out)
    report = check_sequences(records, "key", "seq", {f"k{i}": PER_KEY for i in range(KEYS)})
    return status, seen_throttled, report, throttled_text


@pytest.mark.slow
def test_slow_bolt_throttles_spout_and_loses_nothing(tmp_path):
    status, seen, report, text = _run(tmp_path)
    assert report.ok, report.summary()
    # the text form names the bottleneck, the throttled spouts and the reason
    assert "backpressure THROTTLING" in text, text
    assert re.search(r"throttled spouts\s+task \d+ \(events\)", text), text
    assert re.search(r"reason\s+input queue of task \d+ \(slow\)", text), text
    bp = status["backpressure"]
    assert bp["throttle_count"] >= 1, bp
    assert seen, "no spout was ever reported throttled"
    assert any(e["action"] == "congested" and e["component"] == "slow" for e in bp["events"]), bp
    completed = [c for c in status["checkpoints"] if c["status"] == "completed"]
    assert len(completed) >= 2, "checkpoints must keep completing under backpressure"
    assert all(c["duration_ms"] < CONFIG.checkpoint_timeout_ms for c in completed)


@pytest.mark.slow
def test_lost_release_spout_resumes_when_lease_expires(tmp_path):
    # the TM never sends a release: only lease expiry lets the spout run again
    status, seen, report, _text = _run(tmp_path, env={"JSTORM_FAULTS": "drop_throttle_release"})
    assert report.ok, report.summary()
    assert seen
    assert any(e["action"] == "release" for e in status["backpressure"]["events"])
