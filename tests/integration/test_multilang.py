"""Storm multilang components (jstormpy.multilang) on real processes: pystorm's own
component classes, a Node.js bolt, a subprocess that crashes, hangs or breaks the
protocol, and a reliable multilang spout through a worker SIGKILL (exactly once per key)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from jstormpy import FileSink, LocalCluster, TopologyBuilder, read_committed
from jstormpy.api.errors import TopologyError
from jstormpy.multilang import ShellBolt, ShellSpout

from .components import NumberSpout
from .helpers import fast_config, kill_now, wait_until

pytestmark = pytest.mark.timeout(180)

HERE = Path(__file__).parent / "multilang_components"
PY = sys.executable  # the test environment's python: it has pystorm


def through_bolt(name: str, out: Path, bolt: ShellBolt, n: int, **spout_kw) -> object:
    b = TopologyBuilder(name)
    b.set_spout("numbers", NumberSpout(n, **spout_kw), parallelism=2)
    b.set_bolt("shell", bolt, parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("shell")
    return b.build()


def test_pystorm_bolt_processes_every_tuple_exactly_once(tmp_path):
    n = 300
    out = tmp_path / "out"
    bolt = ShellBolt([PY, str(HERE / "pass_bolt.py")], outputs=("seq", "key"))
    topo = through_bolt("ml-pystorm-bolt", out, bolt, n, keys=5)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config())
        status = handle.wait(timeout=90)
    assert status["state"] == "drained", status["errors"]
    records = read_committed(out)
    assert sorted(r["seq"] for r in records) == list(range(n))
    assert {r["key"] for r in records} == {f"K{i}" for i in range(5)}


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_a_node_js_bolt_speaks_the_same_protocol(tmp_path):
    n = 200
    out = tmp_path / "out"
    bolt = ShellBolt(["node", str(HERE / "upper_bolt.js")], outputs=("seq", "key"))
    topo = through_bolt("ml-node-bolt", out, bolt, n, keys=3)
    with LocalCluster() as cluster:
        status = cluster.submit(topo, fast_config()).wait(timeout=90)
    assert status["state"] == "drained", status["errors"]
    records = read_committed(out)
    assert sorted(r["seq"] for r in records) == list(range(n))
    assert {r["key"] for r in records} == {"node:K0", "node:K1", "node:K2"}


@pytest.mark.parametrize(("mode", "reason", "runner"), [
    ("crash", "exit code 3", False),
    ("hang", "heartbeat timeout", False),
    ("malformed", "malformed message", False),
    ("huge", "over 100000 bytes", False),
    # the same class as `python -m streamparse.run`: our pystorm runner, binary frames (a
    # stray write to fd 1 reaches its stderr there, not the stream: no "malformed" case;
    # malformed frames are tests/unit/multilang/test_pystorm_runner.py's)
    ("crash", "exit code 3", True),
    ("hang", "heartbeat timeout", True),
    ("huge", "over 100000 bytes", True),
])
def test_a_broken_subprocess_fails_its_task_naming_it_with_its_stderr(tmp_path, mode, reason,
                                                                       runner):
    n = 200
    out = tmp_path / "out"
    marker = tmp_path / "misbehaved"
    command = ([PY, "-m", "streamparse.run", "faulty_bolt.FaultyBolt"] if runner
               else [PY, str(HERE / "faulty_bolt.py"), mode, str(marker)])
    bolt = ShellBolt(command, outputs=("seq", "key"), heartbeat_timeout_s=2.0,
                     max_message_bytes=100_000, cwd=str(HERE),
                     env={"FAULTY_ARGS": f"{mode} {marker}"})
    topo = through_bolt(f"ml-{mode}", out, bolt, n, per_call=2, pause_s=0.002)
    with LocalCluster() as cluster:
        status = cluster.submit(topo, fast_config()).wait(timeout=120)
    assert marker.exists()  # it did misbehave, once
    errors = [e for e in status["errors"] if "multilang component" in e["message"]]
    assert len(errors) == 1, status["errors"]
    message = errors[0]["message"]
    assert message.startswith("MultilangError: multilang component 'shell'"), message
    assert ("pystorm_runner.py" in message) == runner  # what ran it
    assert errors[0]["component"] == "shell"
    assert reason in message
    assert f"faulty bolt: about to {mode} at seq 50" in message  # its stderr's last lines
    # the restart strategy applied: rolled back, a fresh subprocess, exact output
    assert status["state"] == "drained"
    assert status["restarts"] >= 1
    assert sorted(r["seq"] for r in read_committed(out)) == list(range(n))


def keyed_spout_topology(name: str, out: Path, acks: Path, n: int, runner: bool = False):
    b = TopologyBuilder(name)
    if runner:  # the same classes as streamparse runs them: our pystorm runner
        spout = ShellSpout([PY, "-m", "streamparse.run", "keys_spout.KeysSpout"],
                           outputs=("seq", "key"), cwd=str(HERE),
                           env={"KEYS_ARGS": f"{acks} {n}"})
        bolt = ShellBolt([PY, "-m", "streamparse.run", "pass_bolt.UpperBolt"],
                         outputs=("seq", "key"), cwd=str(HERE))
    else:
        spout = ShellSpout([PY, str(HERE / "keys_spout.py"), str(acks), str(n)],
                           outputs=("seq", "key"))
        bolt = ShellBolt([PY, str(HERE / "pass_bolt.py")], outputs=("seq", "key"))
    b.set_spout("keys", spout, parallelism=2)
    b.set_bolt("shell", bolt, parallelism=2).fields_grouping("keys", ("key",))
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("shell")
    return b.build()


@pytest.mark.parametrize("runner", [False, True], ids=["json", "runner"])
def test_reliable_multilang_spout_is_exactly_once_through_a_worker_sigkill(tmp_path, runner):
    n = 3000
    out, acks = tmp_path / "out", tmp_path / "acks"
    acks.mkdir()
    topo = keyed_spout_topology("ml-kill", out, acks, n, runner)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config(checkpoint_interval_ms=300))
        wait_until(lambda: out.exists() and len(read_committed(out)) >= n // 5, timeout=60,
                   what="a fifth of the keys committed")
        kill_now(handle, "worker", 1)
        wait_until(lambda: handle.status()["restarts"] >= 1, timeout=60, what="the rollback")
        wait_until(lambda: len({r["seq"] for r in read_committed(out)}) == n, timeout=120,
                   what="every key committed")
        # one more completed checkpoint: a duplicate still in flight would be committed
        handle.checkpoint()
        last = handle.last_completed_checkpoint()
        wait_until(lambda: (handle.last_completed_checkpoint() or 0) > (last or 0) + 1,
                   timeout=30, what="two more checkpoints")
        status = handle.status()
        handle.kill()
    assert any("worker 1 lost" in r["reason"] for r in status["recoveries"]), \
        status["recoveries"]
    seqs = [r["seq"] for r in read_committed(out)]
    dupes = sorted({s for s in seqs if seqs.count(s) > 1})
    assert not dupes, f"{len(dupes)} keys committed twice: {dupes[:20]}"
    assert sorted(seqs) == list(range(n))
    assert all(r["key"] == f"K{r['seq']}" for r in read_committed(out))
    # the spouts were acked for every key, after the checkpoints that cover them
    acked = [int(x) for f in acks.glob("acked-*.txt") for x in f.read_text().split()]
    assert set(acked) <= set(range(n))
    # the surviving worker's spout subprocess was kept and told to replay what it had
    # emitted after the restored checkpoint
    failed = [int(x) for f in acks.glob("failed-*.log") for x in f.read_text().split()]
    assert failed, "no fail(id) reached a spout at the rollback"


def test_a_spout_declared_without_message_ids_is_refused_under_exactly_once(tmp_path):
    b = TopologyBuilder("ml-refused")
    b.set_spout("words", ShellSpout([PY, "words.py"], outputs=("word",), message_ids=False))
    b.set_bolt("out", FileSink(str(tmp_path / "out"))).shuffle_grouping("words")
    with LocalCluster() as cluster:
        with pytest.raises(TopologyError) as err:
            cluster.submit(b.build(), fast_config())
        assert cluster.handles == []
    msg = str(err.value)
    assert "'words'" in msg and "message_ids=False" in msg and "exactly_once" in msg
    assert "ShellSpout(..., at_least_once=True)" in msg  # how to opt in, for this spout


def unreliable_spout_topology(name: str, out: Path, **spout_kw):
    b = TopologyBuilder(name)
    b.set_spout("words", ShellSpout([PY, str(HERE / "words_spout.py")], outputs=("word",),
                                    **spout_kw))
    b.set_bolt("out", FileSink(str(out))).shuffle_grouping("words")
    return b.build()


def test_an_id_less_emit_under_exactly_once_fails_the_task_saying_how_to_opt_in(tmp_path):
    topo = unreliable_spout_topology("ml-no-ids", tmp_path / "out")
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config())
        errors = wait_until(lambda: [e for e in handle.status()["errors"]
                                     if "without a message id" in e["message"]],
                            timeout=60, what="the task failing on an id-less emit")
        handle.kill()
    msg = errors[0]["message"]
    assert errors[0]["component"] == "words"
    assert "'words'" in msg and "guarantee='exactly_once'" in msg
    assert "ShellSpout(..., at_least_once=True)" in msg


def test_an_id_less_spout_opted_into_at_least_once_runs(tmp_path):
    out = tmp_path / "out"
    topo = unreliable_spout_topology("ml-alo", out, message_ids=False, at_least_once=True)
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config())
        wait_until(lambda: out.exists() and len(read_committed(out)) == 100, timeout=60,
                   what="its 100 words committed")
        status = handle.status()
        handle.kill()
    assert status["errors"] == []
    assert sorted(r["word"] for r in read_committed(out)) == sorted(f"w{i}" for i in range(100))


def test_storm_tick_tuples_reach_the_bolts_process_tick(tmp_path):
    n = 300
    out = tmp_path / "out"
    bolt = ShellBolt([PY, str(HERE / "tick_bolt.py")], outputs=("seq", "key"),
                     tick_tuple_freq_s=0.2)
    topo = through_bolt("ml-tick", out, bolt, n, per_call=2, pause_s=0.01)
    with LocalCluster() as cluster:
        status = cluster.submit(topo, fast_config()).wait(timeout=90)
    assert status["state"] == "drained", status["errors"]
    records = read_committed(out)
    assert sorted(r["seq"] for r in records if r["seq"] >= 0) == list(range(n))
    assert [r for r in records if r["key"] == "tick"], "no tick tuple reached process_tick"


def test_a_bolt_answering_on_ticks_holds_many_tuples_in_flight_through_barriers(tmp_path):
    # the host sends tuples without waiting for each one's answer, and a checkpoint barrier
    # that finds tuples held in the subprocess waits for them with ticks still going out
    # (a tick-driven batching bolt answers nothing until its next tick)
    n = 400
    out, most = tmp_path / "out", tmp_path / "most"
    bolt = ShellBolt([PY, str(HERE / "tick_batching_bolt.py"), str(most)],
                     outputs=("seq", "key"), tick_tuple_freq_s=0.3, heartbeat_timeout_s=5)
    b = TopologyBuilder("ml-tick-batching")
    b.set_spout("numbers", NumberSpout(n, keys=3, per_call=4, pause_s=0.005), parallelism=1)
    b.set_bolt("shell", bolt, parallelism=1).shuffle_grouping("numbers")
    b.set_bolt("out", FileSink(str(out)), parallelism=1).global_grouping("shell")
    with LocalCluster() as cluster:
        status = cluster.submit(b.build(), fast_config(checkpoint_interval_ms=100)).wait(
            timeout=90)
    assert status["state"] == "drained", status["errors"]
    records = read_committed(out)
    assert sorted(r["seq"] for r in records) == list(range(n))
    assert {r["key"] for r in records} == {"K0", "K1", "K2"}
    assert int(most.read_text()) >= 20  # many tuples were in the subprocess at once
