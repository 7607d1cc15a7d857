"""A savepoint restore that a sink refuses fails the topology at once, saying what to do.

The refusal (docs/checkpointing.md, "A savepoint's pending transaction that its run
abandoned"): the savepoint of checkpoint ``c`` lists transaction ``c`` as pending, but the
run it was taken from discarded ``c`` in a recovery that fell back past it, so ``c``'s rows
are not in the output. Restoring into that output would silently lose them; the sink
raises ``RestoreRefusedError``, and since every restore of the savepoint would refuse
again, the Topology Master fails the job at once instead of retrying it through the
restart strategy (with the default exponential delay, minutes of identical failures).

Making a real run fall back past a savepoint's checkpoint takes a lost shared file at one
precise moment (the simulator's seed 11101 of ``--faults
savepoint_into_used,shared_file_loss,worker_crash``, and the sink-level contract tests, run
it through); here the first run is a real one whose savepoint is then restored, and the
fallback's trace in Redis -- ``c`` in that run's documented set of abandoned transactions
(docs/connectors.md) -- is written with a plain client, as that recovery writes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from jstormpy import Config, LocalCluster, SequenceSpout, TopologyBuilder
from jstormpy.api.errors import JStormError
from jstormpy.connectors import RedisStreamSink
from jstormpy.operations.savepoints import read_manifest
from jstormpy.testing.servers.redis_server import RedisServer, read_json_stream
from tests.connectors.contract import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

NAME = "refused-restore"


def _topology(url: str) -> object:
    b = TopologyBuilder(NAME)
    b.set_spout("events", SequenceSpout(keys=4, per_key=100_000, rate_per_s=400), 1)
    b.set_bolt("out", RedisStreamSink(url, "out"), 1).fields_grouping("events", ["key"])
    return b.build()


def test_a_savepoint_restore_into_output_that_lost_its_pending_transaction_fails_at_once(
        tmp_path: Path, redis_server: RedisServer) -> None:
    url = redis_server.url
    conf = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100)
    with LocalCluster(home=str(tmp_path / "home")) as cluster:
        handle = cluster.submit(_topology(url), conf)
        wait_for(lambda: len(read_json_stream(url, "out")) > 200, 60, "committed rows")
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    manifest = read_manifest(uri)
    c, job = int(manifest["checkpoint_id"]), manifest["run"]["job_id"]
    client = redis.Redis.from_url(url)
    fences = [k.decode() for k in client.scan_iter(f"jstorm:2pc:{NAME}@{job}:*:fence")]
    assert len(fences) == 1, fences  # the one sink task of the first run
    task = fences[0].split(":")[-2]
    client.sadd(f"jstorm:2pc:{NAME}@{job}:{task}:abandoned", c)  # the fallback past c
    before = read_json_stream(url, "out")

    with LocalCluster(home=str(tmp_path / "home")) as cluster:
        handle = cluster.submit(_topology(url), conf, from_savepoint=uri)
        with pytest.raises(JStormError) as info:
            handle.wait(timeout=120)
    text = str(info.value)
    assert f"the savepoint of checkpoint {c} lists transaction {c} as pending" in text, text
    assert "fresh output" in text and "older savepoint" in text, text  # what to do
    assert "every restore of it would refuse again" in text, text
    restarts = re.search(r"restarts:\s+(\d+)", text)
    assert restarts is not None and int(restarts.group(1)) == 0, text  # no retry loop
    assert "component: out" in text, text
    assert read_json_stream(url, "out") == before, "the refused restore wrote output"
