"""Gray release with real processes: upgrade one of three workers of a running exactly-once
topology, roll back, survive a SIGKILL during the upgrade, refuse incompatible code.

The topology is SequenceSpout(3) -> RunningSum(3, fields on key) -> FileSink(3, fields on
key). With 3 workers and round-robin placement, a key's sum task and sink task share a
worker, so every record of the keys owned by the upgraded worker is written by new code
after the switch; v2's RunningSum appends the field ``code`` = "v2".
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from jstormpy import Config, LocalCluster, SequenceSpout, read_committed
from jstormpy.api.errors import JStormError
from jstormpy.cli.main import load_topology_file
from jstormpy.operations.codepkg import build_package, check_compatible, describe, migrate_snapshot
from jstormpy.testing.semantics import check_sequences
from tests.integration.paced_spout import release

TEMPLATE = '''
from jstormpy import Bolt, FileSink, SequenceSpout, TopologyBuilder
{spout_import}

class RunningSum(Bolt):
    outputs = {outputs!r}
{state_version}
    def prepare(self, conf, context):
        self.sums = self.state("sums")

    def execute(self, tup):
        key, seq, value = tup["key"], tup["seq"], tup["value"]
        total, count = self.sums.get(key, (0, 0))
        total += value
        count += 1
        self.sums[key] = (total, count)
        self.emit((key, seq, value, total, count){extra})
{migrate}

b = TopologyBuilder("upgrade-linear")
b.set_spout("events", {spout_call}keys={keys}, per_key={per_key}, rate_per_s={rate}),
            parallelism=3)
b.set_bolt("sum", RunningSum, parallelism={sum_par}).fields_grouping("events", ["key"])
b.set_bolt("out", FileSink({out!r}), parallelism=3).fields_grouping("sum", ["key"])
topology = b.build()
'''

BASE = ("key", "seq", "value", "sum", "count")


def write_version(path: Path, out: Path, *, v2: bool = False, keys: int = 30,
                  per_key: int = 2000, rate: float = 900.0, outputs=BASE, sum_par: int = 3,
                  state_version: int | None = None, migrate: bool = False,
                  release_file: Path | None = None) -> Path:
    """``release_file``: the spout runs at ``rate`` until the test releases it
    (tests/integration/paced_spout.py)."""
    if v2:
        outputs = (*BASE, "code")
    path.write_text(TEMPLATE.format(
        outputs=tuple(outputs), extra=' + ("v2",)' if v2 else "", keys=keys, per_key=per_key,
        rate=rate, out=str(out), sum_par=sum_par,
        spout_import="" if release_file is None else
        "from tests.integration.paced_spout import ReleasableSequenceSpout\n",
        spout_call="SequenceSpout(" if release_file is None else
        f"ReleasableSequenceSpout({str(release_file)!r}, ",
        state_version=f"    state_version = {state_version}\n" if state_version else "",
        migrate=("\n    def migrate_state(self, old_version, snapshot):\n"
                 "        return snapshot\n") if migrate else ""))
    return path


def config() -> Config:
    return Config(workers=3, guarantee="exactly_once", checkpoint_interval_ms=300,
                  worker_timeout_ms=5000)


def wait_for(cond, timeout: float, what: str, poll: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(poll)  # polling interval of a condition, not a stand-in for one
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def exactly_once_problems(out: Path, keys: int, per_key: int) -> str:
    records = read_committed(out)
    problems = []
    expected = {f"k{i}": per_key for i in range(keys)}
    rep = check_sequences(records, "key", "seq", expected)
    if not rep.ok:
        problems.append(rep.summary())
    counts: dict[str, list[int]] = defaultdict(list)
    sums: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r["key"]].append(r["count"])
        sums[r["key"]] += r["value"]
        if r["sum"] != sums[r["key"]]:
            problems.append(f"key {r['key']}: sum {r['sum']} != recomputed {sums[r['key']]}")
            break
    for key, n in expected.items():
        if counts[key] != list(range(1, n + 1)):
            problems.append(f"key {key}: counts are not 1..{n} in order")
        if sums[key] != sum(SequenceSpout.value_of(s) for s in range(n)):
            problems.append(f"key {key}: final state differs from batch recomputation")
    return "\n".join(problems[:10])


def code_runs(out: Path) -> dict[str, list[str]]:
    """Per key, the run-length sequence of code versions in committed order."""
    runs: dict[str, list[str]] = defaultdict(list)
    for r in read_committed(out):
        v = r.get("code", "v1")
        if not runs[r["key"]] or runs[r["key"]][-1] != v:
            runs[r["key"]].append(v)
    return runs


def pids(handle) -> dict[int, int]:
    return {w.id: w.pid for w in handle.workers()}


def running_with_checkpoint(handle) -> bool:
    st = handle.status()
    return st["state"] == "running" and st["last_completed_checkpoint"] is not None


@pytest.mark.slow
def test_upgrade_one_worker_then_rollback(tmp_path):
    out = tmp_path / "out"
    gate = tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, release_file=gate)))
    v2 = write_version(tmp_path / "v2.py", out, v2=True, release_file=gate)
    with LocalCluster() as cluster:
        handle = cluster.submit(v1.topology, config())
        wait_for(lambda: running_with_checkpoint(handle), 60, "a first checkpoint")
        before = pids(handle)
        state = handle.upgrade(str(v2), workers=[1])
        assert state["phase"] == "upgrading", state
        assert state["versions"] == {"0": "v1", "1": "v2", "2": "v1"}
        after = pids(handle)
        assert after[0] == before[0] and after[2] == before[2], (before, after)
        assert after[1] != before[1]
        codes = {w.id: w.code_version for w in handle.workers()}
        assert codes == {0: "v1", 1: "v2", 2: "v1"}
        switch = state["switches"][-1]
        assert switch["pause_ms"] > 0 and switch["total_ms"] >= switch["pause_ms"]
        assert handle.status()["generation"] == 1  # untouched workers kept their generation
        # new output comes from the new code
        wait_for(lambda: any("v2" in r for r in code_runs(out).values()), 60,
                 "committed records of v2")
        state = handle.upgrade(action="rollback")
        assert state["phase"] == "rolled_back", state
        assert set(state["versions"].values()) == {"v1"}
        final = pids(handle)
        assert final[0] == before[0] and final[2] == before[2]
        release(gate)  # the scenario is over: the rest at full speed
        status = handle.wait(timeout=180)
        assert status["generation"] == 1 and status["restarts"] == 0, status["recoveries"]
        metrics = handle.metrics()
        assert metrics["upgrade"]["last_pause_ms"] is not None
    assert not (problems := exactly_once_problems(out, 30, 2000)), problems
    runs = code_runs(out)
    upgraded = {k for k, r in runs.items() if "v2" in r}
    assert upgraded and len(upgraded) < len(runs), runs
    for key, r in runs.items():
        # v1 before the upgrade, v2 while upgraded, v1 again after the rollback
        assert r in (["v1"], ["v1", "v2", "v1"], ["v2", "v1"]), (key, r)
        if key in upgraded:
            assert r[-1] == "v1"


@pytest.mark.slow
def test_sigkill_of_upgraded_worker_rolls_back(tmp_path):
    out = tmp_path / "out"
    gate = tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, release_file=gate)))
    v2 = write_version(tmp_path / "v2.py", out, v2=True, release_file=gate)
    with LocalCluster() as cluster:
        handle = cluster.submit(v1.topology, config())
        wait_for(lambda: running_with_checkpoint(handle), 60, "a first checkpoint")
        before = pids(handle)
        handle.upgrade(str(v2), workers=[1], wait=False)

        def new_worker_up():
            w = {w.id: w for w in handle.workers()}[1]
            return w.pid if w.alive and w.code_version == "v2" else None

        pid = wait_for(new_worker_up, 60, "worker 1 running v2")
        os.kill(pid, signal.SIGKILL)
        state = wait_for(lambda: (s := handle.status()["upgrade"])["phase"] == "rolled_back"
                         and s, 60, "automatic rollback")
        assert "worker 1" in state["error"], state
        wait_for(lambda: {w.code_version for w in handle.workers() if w.alive} == {"v1"}
                 and len([w for w in handle.workers() if w.alive]) == 3, 60,
                 "every worker back on v1")
        release(gate)  # the scenario is over: the rest at full speed
        status = handle.wait(timeout=180)
        assert status["restarts"] >= 1
        final = pids(handle)
        assert final[0] == before[0] and final[2] == before[2]
    assert not (problems := exactly_once_problems(out, 30, 2000)), problems


def test_incompatible_code_is_refused(tmp_path):
    out, gate = tmp_path / "out", tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, per_key=600,
                                              rate=600.0, release_file=gate)))
    bad_fields = write_version(tmp_path / "bad1.py", out, outputs=("key", "seq", "sum", "count",
                                                                    "value"), release_file=gate)
    bad_par = write_version(tmp_path / "bad2.py", out, sum_par=2, release_file=gate)
    bad_state = write_version(tmp_path / "bad3.py", out, state_version=2, release_file=gate)
    with LocalCluster() as cluster:
        handle = cluster.submit(v1.topology, config())
        wait_for(lambda: running_with_checkpoint(handle), 60, "a first checkpoint")
        before = pids(handle)
        for path, needle in ((bad_fields, "may only be appended"),
                             (bad_par, "parallelism 3 -> 2"),
                             (bad_state, "migrate_state")):
            with pytest.raises(JStormError, match=needle):
                handle.upgrade(str(path), workers=[1])
        st = handle.status()
        assert st["upgrade"]["phase"] == "idle"
        assert set(st["upgrade"]["versions"].values()) == {"v1"}
        assert st["upgrade"]["packages"] == []  # refused code is not kept
        assert pids(handle) == before and st["generation"] == 1
        release(gate)  # the scenario is over: the rest at full speed
        status = handle.wait(timeout=120)
        assert status["restarts"] == 0
    assert not (problems := exactly_once_problems(out, 30, 600)), problems


# -- no processes -----------------------------------------------------------------------------
def test_compatibility_rules(tmp_path):
    out = tmp_path / "out"
    base = describe(load_topology_file(str(write_version(tmp_path / "a.py", out))).topology)
    new = describe(load_topology_file(str(write_version(tmp_path / "b.py", out,
                                                        v2=True))).topology)
    assert check_compatible(base, new) == []
    migr = describe(load_topology_file(str(write_version(
        tmp_path / "c.py", out, state_version=2, migrate=True))).topology)
    assert check_compatible(base, migr) == []
    nomig = describe(load_topology_file(str(write_version(
        tmp_path / "d.py", out, state_version=2))).topology)
    assert any("state_version None -> 2" in p for p in check_compatible(base, nomig))


def test_reordered_components_are_refused_by_name():
    """Task ids follow the declaration order: new code declaring two independent bolts
    the other way round would move their task ids under running workers."""
    from jstormpy import Bolt, TopologyBuilder

    class Echo(Bolt):
        outputs = ("key", "seq", "value")

        def execute(self, tup):
            self.emit(tup.values)

    def wired(first: str, second: str):
        b = TopologyBuilder("reorder")
        b.set_spout("events", SequenceSpout(keys=3, per_key=3), parallelism=2)
        b.set_bolt(first, Echo, parallelism=2).shuffle_grouping("events")
        b.set_bolt(second, Echo, parallelism=2).shuffle_grouping("events")
        return describe(b.build())

    old, same, swapped = wired("a", "b"), wired("a", "b"), wired("b", "a")
    assert check_compatible(old, same) == []
    problems = check_compatible(old, swapped)
    assert any("component 'a': task ids [3, 4] -> [5, 6]" in p for p in problems), problems
    assert any("component 'b'" in p and "declared in another order" in p for p in problems)
    # a rescaling upgrade compares the layout at the new parallelism itself, later
    # (master/rescale.py _check_same_tasks); this check leaves it alone
    assert check_compatible(old, swapped, allow_parallelism=True) == []


def test_build_package_forms(tmp_path):
    f = write_version(tmp_path / "topo.py", tmp_path / "out")
    data, entry = build_package(f)
    assert entry == "topo.py" and data[:2] == b"PK"
    d = tmp_path / "pkg"
    d.mkdir()
    (d / "topology.py").write_text(f.read_text())
    (d / "helper.py").write_text("X = 1\n")
    data2, entry2 = build_package(d)
    assert entry2 == "topology.py"
    z = tmp_path / "p.zip"
    z.write_bytes(data2)
    assert build_package(z)[1] == "topology.py"
    with pytest.raises(JStormError, match="does not exist"):
        build_package(tmp_path / "nope.zip")


def test_migrate_snapshot():
    class Old:
        state_version = None

    class New:
        state_version = 2

        def migrate_state(self, old, snap):
            assert old is None
            return {"states": {"sums": {k: v * 10 for k, v in snap["states"]["sums"].items()}}}

    snap = {"states": {"sums": {"a": 1}}, "finished": False}
    assert migrate_snapshot(Old(), snap) is snap
    got = migrate_snapshot(New(), snap)
    assert got["states"]["sums"] == {"a": 10} and got["state_version"] == 2
    assert got["finished"] is False


@pytest.mark.slow
def test_abandoned_upgrade_expires_and_rolls_back(tmp_path):
    out = tmp_path / "out"
    gate = tmp_path / "release"
    v1 = load_topology_file(str(write_version(tmp_path / "v1.py", out, release_file=gate)))
    v2 = write_version(tmp_path / "v2.py", out, v2=True, release_file=gate)
    with LocalCluster() as cluster:
        handle = cluster.submit(v1.topology, config().replace(upgrade_expiry_ms=4000))
        wait_for(lambda: running_with_checkpoint(handle), 60, "a first checkpoint")
        before = pids(handle)
        state = handle.upgrade(str(v2), workers=[2])
        assert state["phase"] == "upgrading", state
        # nobody continues, completes or rolls back: the upgrade expires
        state = wait_for(lambda: (s := handle.status()["upgrade"])["phase"] == "rolled_back"
                         and s, 60, "the abandoned upgrade to expire")
        assert "expired" in state["error"], state
        assert set(state["versions"].values()) == {"v1"}
        after = pids(handle)
        assert after[0] == before[0] and after[1] == before[1], (before, after)
        release(gate)  # the scenario is over: the rest at full speed
        handle.wait(timeout=180)
    assert not (problems := exactly_once_problems(out, 30, 2000)), problems
