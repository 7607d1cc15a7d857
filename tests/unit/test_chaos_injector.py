"""The chaos fault injector's parts: seeded scenarios, real-socket proxies, the checks, the
soak table. (The scenarios themselves run real topologies in tests/chaos.)"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jstormpy import faults
from jstormpy.testing.chaos import (
    FAULT_KINDS,
    TOPOLOGIES,
    ChaosNetwork,
    Scenario,
    ScenarioResult,
    Verdict,
    check_output,
    plan_scenarios,
    run_soak,
)
from jstormpy.testing.chaos.soak import format_summary, keeping_failed
from jstormpy.testing.chaos.topologies import KEYS, PER_KEY
from jstormpy.testing.servers.fault_proxy import FaultProxy
from tests.unit.test_transport import wait_until

pytestmark = pytest.mark.timeout(60)


# -- seeded scenarios -----------------------------------------------------------------------
def test_same_seed_same_scenario_and_every_class_covered() -> None:
    assert Scenario.draw(42) == Scenario.draw(42)
    assert {Scenario.draw(s).fault for s in range(20)} != {Scenario.draw(42).fault}
    plan = plan_scenarios(len(FAULT_KINDS) * 2, seed=5)
    assert [s.fault.kind for s in plan] == list(FAULT_KINDS) * 2
    assert [s.seed for s in plan] == list(range(5, 5 + len(plan)))
    plan = plan_scenarios(30)
    assert {s.topology for s in plan if s.fault.kind != "rescale_unkeyed_state"} == \
        set(TOPOLOGIES)
    assert {s.topology for s in plan if s.fault.kind == "rescale_unkeyed_state"} == \
        {"shuffled"}


def test_older_seeds_draw_the_same_parameters_as_before_issue_23() -> None:
    # what seed 113 drew when FAULT_KINDS had ten classes (tests/chaos runs it by name)
    f = Scenario.draw(113, kind="partition").fault
    assert (f.at_s, f.worker, f.on, f.duration_s) == (0.42, 2, "tm", 0.94)


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_drawn_parameters_fit_the_fault(kind: str) -> None:
    for seed in range(10):
        f = Scenario.draw(seed, kind=kind).fault
        assert f.kind == kind and f.describe().startswith(kind)
        if kind == "reset":
            assert f.worker != f.peer and f.on in ("data", "credit", "both")
        if kind == "stall":  # a zombie: frozen for longer than the worker timeout
            assert f.duration_s > 2.0
        if kind == "kill_during_drain":
            assert f.worker is not None


def test_unknown_fault_or_topology_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown fault kind 'flood'.*stall"):
        Scenario.draw(1, kind="flood")
    with pytest.raises(ValueError, match="unknown chaos topology 'join'.*windowed"):
        Scenario.draw(1, topology="join")


# -- the routing hook -----------------------------------------------------------------------
def test_chaos_route_maps_only_armed_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    faults._routes.cache_clear()
    monkeypatch.setenv(faults.ROUTES_ENV, json.dumps({"0>1": ["127.0.0.1", 4001],
                                                      "2>tm": ["127.0.0.1", 4002]}))
    try:
        assert faults.chaos_route(0, 1, ("h", 9)) == ("127.0.0.1", 4001)
        assert faults.chaos_route(1, 0, ("h", 9)) == ("h", 9)
        assert faults.chaos_route(2, "tm", ("h", 7)) == ("127.0.0.1", 4002)
    finally:
        faults._routes.cache_clear()
    monkeypatch.delenv(faults.ROUTES_ENV)
    assert faults.chaos_route(0, 1, ("h", 9)) == ("h", 9)
    faults._routes.cache_clear()


# -- real sockets -----------------------------------------------------------------------------
class Echo:
    """A TCP echo server standing in for a worker's data port."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        try:
            while data := conn.recv(4096):
                conn.sendall(data)
        except OSError:
            pass


def roundtrip(port: int, payload: bytes = b"ping", timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        return s.recv(64)


@pytest.fixture
def network(tmp_path: Path) -> Iterator[tuple[ChaosNetwork, list[Echo]]]:
    workers = [Echo(), Echo(), Echo()]
    tm = Echo()
    (tmp_path / "master.port").write_text(str(tm.port))
    net = ChaosNetwork(3, tmp_path / "master.port",
                       lambda w: ("127.0.0.1", workers[w].port))
    yield net, workers
    net.close()


def test_network_forwards_each_pair_and_the_tm(network: tuple[ChaosNetwork, list[Echo]]) -> None:
    net, _ = network
    routes = json.loads(net.environment()[faults.ROUTES_ENV])
    assert set(routes) == {f"{a}>{b}" for a in range(3) for b in range(3) if a != b} | \
        {f"{a}>tm" for a in range(3)}
    for _name, (_host, port) in routes.items():
        assert roundtrip(port) == b"ping"


def test_reset_cuts_the_chosen_direction_only(network: tuple[ChaosNetwork, list[Echo]]) -> None:
    net = network[0]
    conns = {}
    for pair in ((0, 1), (1, 0)):
        s = socket.create_connection(("127.0.0.1", net.pairs[pair].port), timeout=5)
        s.sendall(b"x")
        assert s.recv(1) == b"x"
        conns[pair] = s
    assert net.reset(0, 1, on="credit") == 1  # worker 1's connection back to worker 0
    with pytest.raises(OSError):
        conns[(1, 0)].sendall(b"y")
        if not conns[(1, 0)].recv(1):
            raise ConnectionResetError("closed")
    conns[(0, 1)].sendall(b"z")
    assert conns[(0, 1)].recv(1) == b"z"  # the data direction still flows
    assert net.reset(0, 1, on="data") == 1
    for s in conns.values():
        s.close()
    with pytest.raises(ValueError, match="on='frames'"):
        net.reset(0, 1, on="frames")


def test_partition_refuses_then_heals(network: tuple[ChaosNetwork, list[Echo]]) -> None:
    net = network[0]
    net.partition(2, from_="tm")
    assert roundtrip(net.pairs[(2, 0)].port) == b"ping"  # peers still reachable
    with pytest.raises(OSError):
        roundtrip(net.to_tm[2].port, timeout=2)
        raise ConnectionResetError("no answer")
    net.heal()
    assert roundtrip(net.to_tm[2].port) == b"ping"


def test_hang_accepts_but_answers_after_heal_and_delay_slows() -> None:
    echo = Echo()
    proxy = FaultProxy(("127.0.0.1", echo.port))
    port = proxy.start()
    try:
        proxy.hang()
        s = socket.create_connection(("127.0.0.1", port), timeout=5)  # accepted
        s.sendall(b"hello")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(5)  # a hung server answers nothing
        proxy.heal()
        s.settimeout(5)
        assert s.recv(5) == b"hello"
        s.close()
        proxy.delay_s = 0.2
        t0 = time.monotonic()
        assert roundtrip(port) == b"ping"
        assert time.monotonic() - t0 >= 0.4  # one chunk each way, each 0.2 s late
    finally:
        proxy.close()


def test_upstream_callable_follows_a_moved_peer() -> None:
    first, second = Echo(), Echo()
    where = {"port": first.port}
    proxy = FaultProxy(lambda: ("127.0.0.1", where["port"]))
    port = proxy.start()
    try:
        assert roundtrip(port) == b"ping"
        first.server.close()
        where["port"] = second.port

        def answers() -> bool:
            try:
                return roundtrip(port) == b"ping"
            except OSError:
                return False

        wait_until(answers, what="the proxy to follow the moved peer")
    finally:
        proxy.close()


# -- the exactly-once checks fail when they should ------------------------------------------
def _write_part(out: Path, records: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records)
    (out / "part-0000000001-00001.jsonl").write_text(text)


def _stateful_records() -> list[dict]:
    from jstormpy import SequenceSpout

    out = []
    for k in range(KEYS):
        total = 0
        for s in range(PER_KEY):
            total += SequenceSpout.value_of(s)
            out.append({"key": f"k{k}", "seq": s, "value": SequenceSpout.value_of(s),
                        "sum": total, "count": s + 1})
    return out


def test_stateful_check_counts_lost_duplicated_reordered(tmp_path: Path) -> None:
    records = _stateful_records()
    _write_part(tmp_path / "good" / "out", records)
    assert check_output("stateful", tmp_path / "good") == Verdict()
    bad = list(records)
    bad.insert(10, dict(bad[3]))          # a duplicate
    del bad[500]                          # a loss
    bad[20], bad[21] = bad[21], bad[20]   # same key? k0 seq 20/21 -> reordered
    _write_part(tmp_path / "bad" / "out", bad)
    v = check_output("stateful", tmp_path / "bad")
    assert (v.lost, v.duplicated, v.reordered) == (1, 1, 1)
    assert v.state_problems and not v.ok


def test_windowed_check_finds_a_missing_window(tmp_path: Path) -> None:
    from jstormpy.testing.chaos.topologies import READINGS, SENSORS, WINDOW_MS, reading

    windows: dict[tuple[str, int], list[int]] = {}
    for i in range(SENSORS * READINGS):
        sensor, ts, value = reading(i)
        windows.setdefault((sensor, ts // WINDOW_MS * WINDOW_MS), []).append(value)
    rows = [{"key": k, "window_start": w, "window_end": w + WINDOW_MS, "kind": "on_time",
             "result": {"sum": sum(v), "n": len(v)}} for (k, w), v in sorted(windows.items())]
    _write_part(tmp_path / "good" / "out", rows)
    assert check_output("windowed", tmp_path / "good").ok
    rows[3]["result"] = {"sum": 0, "n": 0}
    _write_part(tmp_path / "bad" / "out", rows[:-1])
    v = check_output("windowed", tmp_path / "bad")
    assert v.lost == 1 and len(v.state_problems) == 1


def test_shuffled_check_orders_per_key_and_task_and_adds_partial_counts(
        tmp_path: Path) -> None:
    from jstormpy.testing.chaos.topologies import SHUFFLED_KEYS

    rows, counts = [], {}
    for s in range(PER_KEY):  # the two shuffle targets interleave: not a reordering
        for k in range(SHUFFLED_KEYS):
            task = (s * 7 + k) % 2
            counts[(k, task)] = counts.get((k, task), 0) + 1
            rows.append({"key": f"k{k}", "seq": s, "task": task,
                         "partial": counts[(k, task)]})
    _write_part(tmp_path / "good" / "out", rows)
    assert check_output("shuffled", tmp_path / "good") == Verdict()
    bad = [dict(r) for r in rows]
    bad[40]["partial"] += 1                 # a task's count skips
    del bad[-1]                             # a loss: that key's counts add up short
    bad.insert(7, dict(bad[0]))             # a duplicate (its count repeats)
    same = [i for i, r in enumerate(bad) if (r["key"], r["task"]) == ("k3", 1)]
    bad[same[5]], bad[same[6]] = bad[same[6]], bad[same[5]]  # one task's order swapped
    _write_part(tmp_path / "bad" / "out", bad)
    v = check_output("shuffled", tmp_path / "bad")
    assert (v.lost, v.duplicated, v.reordered) == (1, 1, 1)
    assert any("partial count 1 after 1" in p for p in v.state_problems), v.state_problems
    assert any("add up to" in p for p in v.state_problems), v.state_problems


# -- the soak table -----------------------------------------------------------------------------
def test_soak_prints_a_row_per_scenario_and_totals_per_class() -> None:
    plan = plan_scenarios(len(FAULT_KINDS), seed=1)

    def fake_run(s: Scenario) -> ScenarioResult:
        lost = 3 if s.fault.kind == "stall" else 0
        return ScenarioResult(s, Verdict(lost=lost), drained=True, fired=True,
                              recovery_s=1.5 if lost else 0.5, restarts=1, seconds=4.0)

    buf = io.StringIO()
    results = run_soak(plan, out=buf, run=fake_run)
    text = buf.getvalue()
    assert [r.ok for r in results].count(False) == 1
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["seed", "topology", "fault", "lost"]
    assert sum(1 for line in lines if "@" in line or "kill_during_drain" in line) >= \
        len(FAULT_KINDS)
    assert f"total: {len(FAULT_KINDS)} scenarios, 3 lost, 0 duplicated, 0 reordered" in text
    stall = next(line for line in lines if line.startswith("stall "))
    assert stall.split()[1:] == ["1", "1", "1.50s", "1.50s"]


def test_summary_gives_recovery_median_and_max_per_fault_class() -> None:
    times = {"kill": [3.0, 1.0, 2.0, None], "reset": [0.25, 0.75]}
    results = [ScenarioResult(Scenario.draw(i, kind=kind), Verdict(duplicated=int(kind == "reset")),
                              drained=True, fired=t is not None, recovery_s=t, restarts=0,
                              seconds=1.0)
               for kind, ts in times.items() for i, t in enumerate(ts)]
    lines = format_summary(results)
    assert lines[0].startswith("total: 6 scenarios, 0 lost, 2 duplicated")
    assert lines[0].endswith("1 where the fault did not fire")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {"kill": ["4", "0", "2.00s", "3.00s"],  # a fault that never fired: no time
                    "reset": ["2", "2", "0.50s", "0.75s"]}


def test_keep_leaves_only_the_failed_scenarios_directories(tmp_path: Path) -> None:
    def fake_run(s: Scenario, workdir: Path) -> ScenarioResult:
        (workdir / "logs").mkdir(parents=True)
        return ScenarioResult(s, Verdict(lost=s.seed % 2), drained=True, fired=True,
                              recovery_s=0.1, restarts=0, seconds=1.0, workdir=str(workdir))

    buf = io.StringIO()
    run_soak(plan_scenarios(4, seed=1), out=buf, run=keeping_failed(tmp_path, fake_run))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed-1", "seed-3"]
    assert f"kept: {tmp_path / 'seed-1'}" in buf.getvalue()
    assert "seed-2" not in buf.getvalue()


def test_the_fresh_run_into_used_crash_goes_to_a_worker_holding_a_kafka_sink(
        tmp_path: Path) -> None:
    """``fresh_run_into_used``: the second run's armed crash (``sink_before_commit@2``) is
    on the worker of the first Kafka sink task, whose commit log a recovery reads (hole
    3); only that class, and only when the job writes outside its FileSink directory."""
    from jstormpy.testing.chaos.brokers import BrokerOutputs
    from jstormpy.testing.chaos.reuse import second_run_environment
    from jstormpy.testing.chaos.topologies import build_topology

    brokers = BrokerOutputs("redis://127.0.0.1:1/0", "127.0.0.1:1")
    # tasks: events 1-2, sum 3-4, out 5-6, pg 7-8, redis 9-10, kafka 11-12; 3 workers
    # round-robin, so task 11 is on worker 1 (without PostgreSQL: kafka 9-10, worker 2)
    full = build_topology("stateful", tmp_path, pg_dsn="postgresql://x/y", brokers=brokers)
    env = second_run_environment("fresh_run_into_used", tmp_path, full, 3)
    assert env["JSTORM_FAULTS"] == "sink_before_commit@2@1"
    assert Path(env["JSTORM_FAULT_DIR"]).is_dir()
    no_pg = build_topology("stateful", tmp_path, brokers=brokers)
    assert second_run_environment("fresh_run_into_used", tmp_path, no_pg, 3)[
        "JSTORM_FAULTS"] == "sink_before_commit@2@2"
    assert second_run_environment("savepoint_into_used", tmp_path, full, 3) == {}
    assert second_run_environment("fresh_run_into_used", tmp_path,
                                  build_topology("stateful", tmp_path), 3) == {}
