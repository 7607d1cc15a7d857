"""A bug in user code, met as a user meets it: `jstorm run` and `handle.wait()` must fail
fast and say where (component, task, the user's file and line, the tuple, restarts, logs)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Bolt, Config, FileSink, LocalCluster, TopologyBuilder
from jstormpy.api.errors import JStormError
from jstormpy.api.restart import RestartStrategy

from .components import FailOn, NumberSpout
from .helpers import JSTORM

pytestmark = pytest.mark.timeout(180)


BUGGY = '''
from jstormpy import Bolt, Config, FileSink, Spout, TopologyBuilder


class Numbers(Spout):
    outputs = ("n",)

    def __init__(self):
        self.n = 0

    def next_tuple(self):
        if self.n < 200:
            self.emit((self.n,))
            self.n += 1

    def snapshot(self):
        return self.n

    def restore(self, snap):
        self.n = snap


class Double(Bolt):
    outputs = ("n", "double")

    def execute(self, tup):
        self.emit((tup["n"], tup["num"] * 2))  # BUG: the field is "n"


b = TopologyBuilder("user-bug")
b.set_spout("numbers", Numbers)
b.set_bolt("double", Double).shuffle_grouping("numbers")
b.set_bolt("out", FileSink({out!r})).global_grouping("double")
topology = b
config = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100)
'''


def _restarts(text: str) -> int:
    found = re.search(r"restarts:\s+(\d+)", text)
    assert found, f"no restart count in:\n{text}"
    return int(found.group(1))


def test_cli_run_names_the_bug_and_fails_fast(tmp_path: Path) -> None:
    script = tmp_path / "buggy_topology.py"
    script.write_text(BUGGY.format(out=str(tmp_path / "out")))
    bug_line = 1 + BUGGY.splitlines().index(
        '        self.emit((tup["n"], tup["num"] * 2))  # BUG: the field is "n"')
    res = subprocess.run([*JSTORM, "run", str(script)], capture_output=True, text=True,
                         timeout=150, check=False)
    console = res.stdout + res.stderr
    assert res.returncode != 0, console
    assert "KeyError: 'num'" in console, console
    assert "double" in console and "task" in console, console
    # the traceback goes through the user's own file and line, not <dynamic-code>
    assert f'{script}", line {bug_line}' in console, console
    assert "<dynamic-code>" not in console, console
    assert "deterministic" in console, console
    assert re.search(r"tuple:.*\b\d+\b", console), console  # the offending tuple
    assert "worker-0.log" in console, console
    assert _restarts(console) <= 2, console

    # jstorm status still answers for the failed topology, and says why
    st = subprocess.run([*JSTORM, "status", "user-bug"], capture_output=True, text=True,
                        timeout=60, check=False)
    assert "failed" in st.stdout + st.stderr, st.stdout + st.stderr


def test_wait_raises_with_component_tuple_and_traceback(tmp_path: Path) -> None:
    b = TopologyBuilder("wait-bug")
    b.set_spout("numbers", NumberSpout(300), 1)
    b.set_bolt("fails", FailOn(bad=117), 1).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(tmp_path / "out")), 1).global_grouping("fails")
    config = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100,
                    restart_strategy=RestartStrategy.fixed_delay(attempts=50, delay_ms=10))
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), config)
        with pytest.raises(JStormError) as info:
            handle.wait(timeout=120)
    text = str(info.value)
    assert "fails" in text and "ValueError: poisoned tuple seq=117" in text, text
    assert "components.py" in text, text  # the user's file in the traceback
    assert re.search(r"tuple:.*117", text), text
    assert _restarts(text) <= 2, text


UNREACHABLE = '''
from jstormpy import Config, FileSink, Spout, TopologyBuilder


class One(Spout):
    outputs = ("n",)

    def next_tuple(self):
        self.emit((1,))
        self.finish()

    def snapshot(self):
        return 0

    def restore(self, snap):
        pass


b = TopologyBuilder("no-backend")
b.set_spout("one", One)
b.set_bolt("out", FileSink({out!r})).global_grouping("one")
topology = b
config = Config(workers=1, state_backend="hdfs://127.0.0.1:1/chk",
                state_backend_timeout_ms=2000)
'''


def test_unreachable_state_backend_is_named_on_the_console(tmp_path: Path) -> None:
    script = tmp_path / "no_backend.py"
    script.write_text(UNREACHABLE.format(out=str(tmp_path / "out")))
    res = subprocess.run([*JSTORM, "run", str(script)], capture_output=True, text=True,
                         timeout=150, check=False)
    console = res.stdout + res.stderr
    assert res.returncode != 0, console
    # the clear message of master.log, not only "exited with code 1; see master.log"
    assert "state backend hdfs://127.0.0.1:1/chk unreachable" in console, console
    assert "master.log" in console, console


def test_dead_letters_route_the_failing_tuple_and_the_job_goes_on(tmp_path: Path) -> None:
    from jstormpy import read_committed

    n = 120
    b = TopologyBuilder("dead-letters")
    b.set_spout("numbers", NumberSpout(n), 1)
    b.set_bolt("work", FailOn(bad=17), 2).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(tmp_path / "out")), 1).global_grouping("work")
    b.set_bolt("dead", FileSink(str(tmp_path / "dead")), 1) \
        .shuffle_grouping("work", stream="errors")
    config = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100,
                    on_error="dead_letter")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), config)
        status = handle.wait(timeout=120)
        metrics = handle.metrics()
    assert status["state"] == "drained" and status["restarts"] == 0, status
    assert sorted(r["seq"] for r in read_committed(tmp_path / "out")) == \
        [s for s in range(n) if s != 17]
    (dead,) = read_committed(tmp_path / "dead")
    assert dead["component"] == "work" and dead["error"] == "ValueError: poisoned tuple seq=17"
    assert dead["tuple"][0] == 17 and "components.py" in dead["traceback"], dead
    assert metrics["components"]["work"]["errors"] == 1, metrics["components"]["work"]


def test_kafka_spout_with_no_broker_says_what_it_waits_for_and_gives_up(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from jstormpy.connectors import KafkaSpout

    b = TopologyBuilder("no-broker")
    b.set_spout("orders", KafkaSpout("orders", "127.0.0.1:1", connect_timeout_ms=1500), 1)
    b.set_bolt("out", FileSink(str(tmp_path / "out")), 1).global_grouping("orders")
    config = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100)
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), config)
        with pytest.raises(JStormError) as info:
            handle.wait(timeout=120)
        log = (handle.run_dir / "logs" / "worker-0.log").read_text()  # type: ignore[operator]
    text = str(info.value)
    assert "Kafka broker(s) 127.0.0.1:1 (topic 'orders')" in text, text
    assert "connect_timeout_ms=1500" in text, text
    assert "component: orders" in text and "worker-0.log" in text, text
    assert _restarts(text) == 0, text  # given up, not restarted over and over
    assert "waiting for KafkaSpout: Kafka broker(s) 127.0.0.1:1" in log, log[-3000:]


def test_redis_spout_with_no_server_gives_up_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    from jstormpy.connectors import RedisStreamSpout

    b = TopologyBuilder("no-redis")
    b.set_spout("orders", RedisStreamSpout("redis://127.0.0.1:1/0", "orders",
                                           connect_timeout_ms=1500), 1)
    b.set_bolt("out", FileSink(str(tmp_path / "out")), 1).global_grouping("orders")
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), Config(workers=1, heartbeat_interval_ms=100))
        with pytest.raises(JStormError) as info:
            handle.wait(timeout=120)
    text = str(info.value)
    assert "Redis at redis://127.0.0.1:1/0 (streams orders)" in text, text
    assert "connect_timeout_ms=1500" in text and _restarts(text) == 0, text


class Flaky(Bolt):
    """Raises on every tuple with a message that differs each time (not deterministic)."""

    outputs = ("seq", "key")

    def execute(self, tup: Any) -> None:
        raise RuntimeError(f"flaky at {time.monotonic_ns()}")


def test_max_restarts_still_bounds_the_default_strategy(tmp_path: Path) -> None:
    b = TopologyBuilder("flaky")
    b.set_spout("numbers", NumberSpout(50), 1)
    b.set_bolt("flaky", Flaky, 1).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(tmp_path / "out")), 1).global_grouping("flaky")
    config = Config(workers=1, heartbeat_interval_ms=100, max_restarts=2)
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), config)
        with pytest.raises(JStormError) as info:
            handle.wait(timeout=120)
    text = str(info.value)
    assert "2 restarts in a row used up the restart strategy" in text, text
    assert "RuntimeError: flaky at" in text and _restarts(text) == 2, text


def test_postgres_sink_with_no_server_gives_up_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    from jstormpy.connectors import PostgresSink

    b = TopologyBuilder("no-postgres")
    b.set_spout("numbers", NumberSpout(10_000, pause_s=0.01), 1)
    b.set_bolt("out", PostgresSink("host=127.0.0.1 port=1 dbname=shop", "totals",
                                   ["seq", "key"], unavailable_timeout_ms=1500), 1) \
        .global_grouping("numbers")
    config = Config(workers=1, checkpoint_interval_ms=200, heartbeat_interval_ms=100)
    with LocalCluster() as cluster:
        handle = cluster.submit(b.build(), config)
        with pytest.raises(JStormError) as info:
            handle.wait(timeout=120)
        log = (handle.run_dir / "logs" / "worker-0.log").read_text()  # type: ignore[operator]
    text = str(info.value)
    assert "PostgreSQL at 127.0.0.1:1/shop unreachable" in text, text
    assert "unavailable_timeout_ms=1500" in text and "component: out" in text, text
    assert "giving up in" in log, log[-3000:]
