"""The Spark launcher: workers inside barrier-mode Spark tasks, exactly-once under a worker
SIGKILL, a clear error when slots are missing, Parquet output read back by Spark, and
``jstorm verify``. Slow: each master starts a JVM (and local-cluster two executor JVMs)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Config, read_committed
from jstormpy.api.errors import ConfigError, JStormError
from jstormpy.deploy.spark_logs import QUIET_LOGGERS, _log4j, _own_level

from .spark_topologies import wordcount, write_corpus

pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# each test takes its masters by indirect parametrization of the module-scoped `spark`
# fixture; pytest groups the tests per master, so one session per master is started
MASTERS = ["local[4]", "local-cluster[2,1,1024]"]
QUIET_LOGGERS_TASKSET = "org.apache.spark.scheduler.TaskSetManager"  # logs "Lost task"


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One SparkSession per master (a process holds one SparkContext at a time)."""
    from jstormpy.deploy.spark import create_session

    session = create_session(request.param, app_name="jstormpy-test",
                             conf={"spark.ui.enabled": "false",
                                   "spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


def _kill_worker_mid_run(handle: Any, worker: int, deadline_s: float = 300.0) -> int:
    """SIGKILL a worker (the child process of a Spark task) once both workers run and a
    checkpoint completed; returns the pid killed."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        workers = handle.workers()
        if len(workers) == 2 and all(w.alive and w.pid for w in workers) \
                and handle.last_completed_checkpoint() is not None:
            assert handle.status()["state"] == "running", "drained before the kill"
            pid = next(w.pid for w in workers if w.id == worker)
            os.kill(pid, signal.SIGKILL)
            return pid
        time.sleep(0.05)
    raise AssertionError(f"workers not running with a checkpoint within {deadline_s} s")


def _final_counts(out: Path) -> tuple[dict[str, int], list[dict[str, Any]]]:
    records = read_committed(out)
    last: dict[str, int] = {}
    for r in records:
        last[r["word"]] = r["count"]
    return last, records


def _check_exactly_once(out: Path, expected: Counter[str]) -> None:
    last, records = _final_counts(out)
    assert last == dict(expected)
    assert len(records) == sum(expected.values()), "lost or duplicated records"
    per_word: dict[str, list[int]] = {}
    for r in records:
        per_word.setdefault(r["word"], []).append(r["count"])
    assert all(v == list(range(1, len(v) + 1)) for v in per_word.values())


@pytest.mark.parametrize("spark", MASTERS, indirect=True)
def test_kill_worker_exactly_once(spark: Any, tmp_path: Path) -> None:
    """FileSpout → split → count (managed state) → FileSink, one worker SIGKILLed inside
    its Spark task (worker 1 on local[4], worker 0 on local-cluster): the stage is
    resubmitted once, the TM rolls back once and records the killed worker as the reason
    (not the other worker the failed barrier stage took down), nothing lost or doubled."""
    from jstormpy.deploy.spark import SparkCluster
    from jstormpy.deploy.verify import verify_wordcount

    victim = 1 if spark.sparkContext.master == "local[4]" else 0
    log4j, _, _ = _log4j(spark.sparkContext)
    levels_before = {name: _own_level(log4j, name) for name in QUIET_LOGGERS}
    expected = write_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    topo = wordcount(out, tmp_path / "corpus", pause_s=0.02)
    t0 = time.monotonic()
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(topo, Config(workers=2, checkpoint_interval_ms=300))
        pid = _kill_worker_mid_run(handle, worker=victim)
        status = handle.wait(timeout=600)
        launcher = handle._launcher
        assert launcher is not None
        print(f"{spark.sparkContext.master}: killed pid {pid}; drained in "
              f"{time.monotonic() - t0:.1f} s, generation {status['generation']}, "
              f"job attempts {launcher.job_attempts}, job errors {launcher.job_errors}, "
              f"recoveries {status['recoveries']}")
        # one killed worker: one failed job, one resubmission, one restart
        assert status["restarts"] == 1, status["recoveries"]
        assert launcher.restarts == 1 and launcher.job_attempts == 2, launcher.job_errors
        assert len(launcher.job_errors) == 1
        assert launcher.job_errors[0].startswith(
            f"jstorm worker {victim} (pid {pid}) was killed by SIGKILL; log "), launcher.job_errors
        # status()["recoveries"]: one entry, naming the killed worker
        assert len(status["recoveries"]) == 1, status["recoveries"]
        assert status["recoveries"][0]["reason"].startswith(f"worker {victim} lost: "), \
            status["recoveries"]
        assert _own_level(log4j, QUIET_LOGGERS_TASKSET) == "ERROR"  # quiet while it runs
    # the session's Spark logging is as it was once the topology stopped
    assert {name: _own_level(log4j, name) for name in QUIET_LOGGERS} == levels_before
    _check_exactly_once(out, expected)

    # the PySpark recomputation agrees, in this session (on local-cluster: on the executors)
    report = verify_wordcount(spark, str(tmp_path / "corpus" / "*.txt"), str(out))
    assert report.ok, report.render()
    assert report.output_records == sum(expected.values())

    # ... and notices a tampered output: one duplicated record, one lost word
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    part = sorted(p for p in bad.iterdir() if p.name.startswith("part-"))[0]
    lines = part.read_text().splitlines()
    lost = json.loads(lines[-1])["word"]
    dup = next(ln for ln in lines if json.loads(ln)["word"] != lost)
    part.write_text("\n".join([dup, *lines]) + "\n")
    for p in bad.iterdir():
        if p.name.startswith("part-"):
            kept = [ln for ln in p.read_text().splitlines() if json.loads(ln)["word"] != lost]
            p.write_text("".join(f"{ln}\n" for ln in kept))
    report = verify_wordcount(spark, str(tmp_path / "corpus" / "*.txt"), str(bad))
    assert not report.ok
    assert report.counts["missing"] == 1 and report.missing[0][0] == lost
    assert report.counts["duplicates"] >= 1
    assert "missing" in report.render()

    if spark.sparkContext.master == "local[4]":
        # the CLI: `jstorm verify` in its own processes (both at once), exit code 0 / 1
        cli = [sys.executable, "-m", "jstormpy.cli.main", "verify", "wordcount", "--input",
               str(tmp_path / "corpus" / "*.txt"), "--spark-master", "local[1]", "--output"]
        procs = [subprocess.Popen([*cli, str(d)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for d in (out, bad)]
        (good_out, good_err), (bad_out, bad_err) = (p.communicate(timeout=600) for p in procs)
        assert procs[0].returncode == 0, good_out + good_err
        assert "OK" in good_out
        assert procs[1].returncode == 1, bad_out + bad_err
        assert f"missing     {lost!r}" in bad_out


def test_a_killed_worker_is_one_line_on_the_console(tmp_path: Path) -> None:
    """What a user sees on the driver's console when a worker is SIGKILLed: one line
    naming the worker, the signal and what the launcher does; no stack traces (Spark
    logs the failed task's exception and its stack traces up to three times otherwise)."""
    victim = 1
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.spark_kill_console", "local[2]",
         str(victim), str(tmp_path)], check=False, capture_output=True, text=True,
        timeout=800,
        cwd=Path(__file__).resolve().parents[2])
    err = proc.stderr
    assert proc.returncode == 0, err[-5000:]
    marker = next(ln for ln in err.splitlines() if ln.startswith("=== KILLED "))
    pid = int(marker.split()[3])
    after = err.split(marker, 1)[1].split("=== DONE ", 1)
    console, done = after[0], json.loads(after[1].splitlines()[0])
    assert done["restarts"] == 1
    assert "Traceback" not in console and "\tat org.apache" not in console, console
    lines = [ln for ln in console.splitlines() if ln.strip()]
    said = [ln for ln in lines if f"jstorm worker {victim} (pid {pid}) was killed by SIGKILL"
            in ln]
    assert len(said) == 1, console
    assert "resubmitting the workers' Spark job (restart 1 of max_restarts=" in said[0]
    assert len(lines) <= 3, console  # the one line, and at most a couple of Spark's own


@pytest.mark.parametrize("spark", MASTERS, indirect=True)
def test_parquet_output_read_by_spark(spark: Any, tmp_path: Path) -> None:
    """FileSink(format="parquet"): spark.read.parquet on the sink directory (staging
    folders start with '_' and are ignored) gives exactly the expected counts."""
    from pyspark.sql import functions as F  # noqa: N812

    from jstormpy.deploy.spark import SparkCluster
    from jstormpy.deploy.verify import verify_wordcount

    expected = write_corpus(tmp_path / "corpus", files=2, lines=400)
    out = tmp_path / "out"
    topo = wordcount(out, tmp_path / "corpus", fmt="parquet", pause_s=0.0)
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(topo, Config(workers=2, checkpoint_interval_ms=300))
        handle.wait(timeout=600)
    assert any(p.suffix == ".parquet" for p in out.iterdir())
    # create_session turns Spark's console progress bar off (it redraws for the whole run)
    assert spark.sparkContext.getConf().get("spark.ui.showConsoleProgress") == "false"
    df = spark.read.parquet(str(out))
    assert df.count() == sum(expected.values())
    got = {r["word"]: r["n"] for r in df.groupBy("word").agg(F.max("count").alias("n")).collect()}
    assert got == dict(expected)
    report = verify_wordcount(spark, str(tmp_path / "corpus" / "*.txt"), str(out))  # auto
    assert report.ok, report.render()


@pytest.mark.parametrize("spark", MASTERS[:1], indirect=True)
def test_a_storm_multilang_bolt_runs_in_spark_executors(spark: Any, tmp_path: Path) -> None:
    """A ShellBolt (a pystorm bolt subprocess) in workers inside Spark tasks: exact output."""
    from jstormpy import FileSink, SequenceSpout, TopologyBuilder
    from jstormpy.deploy.spark import SparkCluster
    from jstormpy.multilang import ShellBolt

    forward = Path(__file__).parents[1] / "chaos" / "multilang" / "forward_bolt.py"
    out = tmp_path / "out"
    b = TopologyBuilder("spark-multilang")
    b.set_spout("events", SequenceSpout(keys=4, per_key=200), parallelism=2)
    b.set_bolt("fwd", ShellBolt([sys.executable, str(forward)],
                                outputs=("key", "seq", "value")),
               parallelism=2).fields_grouping("events", ["key"])
    b.set_bolt("out", FileSink(str(out))).global_grouping("fwd")
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(b.build(), Config(workers=2, checkpoint_interval_ms=300))
        status = handle.wait(timeout=600)
    assert status["state"] == "drained"
    got = sorted((r["key"], r["seq"]) for r in read_committed(out))
    assert got == sorted((f"k{k}", s) for k in range(4) for s in range(200))


@pytest.mark.parametrize("spark", ["local[1]"], indirect=True)
def test_too_few_slots_fails_fast(spark: Any, tmp_path: Path) -> None:
    """workers=2 on local[1]: a clear error within seconds, not Spark's 10-minute wait."""
    from jstormpy.deploy.spark import SparkCluster

    write_corpus(tmp_path / "corpus", files=1, lines=10)
    topo = wordcount(tmp_path / "out", tmp_path / "corpus")
    t0 = time.monotonic()
    with SparkCluster(spark) as cluster, pytest.raises(ConfigError) as err:
        cluster.submit(topo, Config(workers=2))
    took = time.monotonic() - t0
    assert took < 30, took
    assert "1 task slot(s)" in str(err.value) and "workers=2" in str(err.value)
    # and Spark's own check (for a session where the up-front one passes wrongly) is fast
    # too: create_session sets maxConcurrentTasksCheck to 3 x 1 s
    t0 = time.monotonic()
    with pytest.raises(Exception, match="BarrierJobSlotsNumberCheckFailed|more slots"):
        spark.sparkContext.parallelize(range(2), 2).barrier().mapPartitions(lambda it: it) \
            .collect()
    assert time.monotonic() - t0 < 30
    assert isinstance(err.value, JStormError)


@pytest.mark.parametrize("spark", ["local[4]"], indirect=True)
def test_worker_that_cannot_start_gives_up(spark: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that die before registering (here: a Python that refuses to start, its
    PYTHONHASHSEED being invalid) fail every job attempt at once: the launcher gives up with
    the worker's error instead of resubmitting max_restarts times."""
    from jstormpy.deploy import spark as spark_launcher
    from jstormpy.deploy.spark import MAX_EARLY_FAILURES, SparkCluster

    spec = spark_launcher._SparkSupervisor._spec

    def broken_spec(self: Any) -> dict[str, Any]:
        return {**spec(self), "hash_seed": "not-a-number"}

    monkeypatch.setattr(spark_launcher._SparkSupervisor, "_spec", broken_spec)
    write_corpus(tmp_path / "corpus", files=1, lines=10)
    topo = wordcount(tmp_path / "out", tmp_path / "corpus")
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(topo, Config(workers=2))
        with pytest.raises(JStormError, match=f"failed {MAX_EARLY_FAILURES} times in a row"):
            handle.wait(timeout=300)
        launcher = handle._launcher
        assert launcher is not None and "exited with code 1" in launcher.gave_up


@pytest.mark.parametrize("spark", ["local[4]"], indirect=True)
def test_kill_stops_the_job(spark: Any, tmp_path: Path) -> None:
    """handle.kill() mid-run: the TM stops, the job group ends, no worker process is left."""
    import psutil

    from jstormpy.deploy.spark import SparkCluster

    write_corpus(tmp_path / "corpus")
    topo = wordcount(tmp_path / "out", tmp_path / "corpus", pause_s=0.2)  # runs for minutes
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(topo, Config(workers=2))
        deadline = time.monotonic() + 300
        while not (handle.status()["state"] == "running"
                   and all(w.alive and w.pid for w in handle.workers())):
            assert time.monotonic() < deadline, "never running"
            time.sleep(0.05)
        pids = [w.pid for w in handle.workers()]
        launcher = handle._launcher
        assert launcher is not None
        t0 = time.monotonic()
        handle.kill()
        deadline = time.monotonic() + 60
        def running(pid: int) -> bool:
            try:
                return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return False

        while launcher.job_thread.is_alive() or any(running(p) for p in pids):
            assert time.monotonic() < deadline, "job or workers still running after kill"
            time.sleep(0.05)
        assert time.monotonic() - t0 < 60
        assert not launcher.gave_up
    # the session is still usable for other jobs
    assert spark.sparkContext.parallelize(range(10), 2).sum() == 45


@pytest.mark.parametrize("spark", ["local[4]"], indirect=True)
def test_spark_submit_from_savepoint_at_another_parallelism(spark: Any, tmp_path: Path) -> None:
    """A savepoint of a local run continues on Spark at another parallelism, exactly once."""
    from jstormpy import LocalCluster
    from jstormpy.deploy.spark import SparkCluster
    from tests.chaos.topologies import check_keyed_sums
    from tests.integration.savepoint_components import linear

    out = tmp_path / "out"
    conf = Config(workers=2, checkpoint_interval_ms=300)
    with LocalCluster() as cluster:
        handle = cluster.submit(linear(out, 2, keys=6, per_key=600, rate=500), conf)
        deadline = time.monotonic() + 120
        while not (out.exists() and len(read_committed(out)) > 300):
            assert time.monotonic() < deadline, "no committed output"
            time.sleep(0.05)
        uri = handle.savepoint(f"file://{tmp_path / 'sp'}", stop=True)
    assert len(read_committed(out)) < 6 * 600, "the run ended before the savepoint"
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(linear(out, 3, keys=6, per_key=600, rate=None), conf,
                                from_savepoint=uri)
        handle.wait(timeout=600)
    assert check_keyed_sums(out, 6, 600) == ""


@pytest.mark.parametrize("spark", ["local[4]"], indirect=True)
def test_spark_rescale_in_place(spark: Any, tmp_path: Path) -> None:
    """handle.rescale on Spark: the workers restart inside their barrier tasks (exit 75 is
    not a task failure), keyed state follows its key groups, exactly once."""
    from jstormpy.deploy.spark import SparkCluster
    from tests.chaos.topologies import check_keyed_sums
    from tests.integration.savepoint_components import linear

    out = tmp_path / "out"
    with SparkCluster(spark) as cluster:
        handle = cluster.submit(linear(out, 2, keys=6, per_key=1200, rate=400),
                                Config(workers=2, checkpoint_interval_ms=300))
        deadline = time.monotonic() + 300
        while not (out.exists() and len(read_committed(out)) > 300):
            assert time.monotonic() < deadline, "no committed output"
            time.sleep(0.05)
        with pytest.raises(JStormError, match="cannot change the number of workers"):
            handle.rescale({"sum": 3}, workers=3)  # one barrier stage: a fixed count
        record = handle.rescale({"sum": 3})
        assert record["error"] == "" and handle.status()["restarts"] == 0
        assert len(read_committed(out)) < 6 * 1200, "the run ended before the rescale"
        handle.wait(timeout=600)
    assert check_keyed_sums(out, 6, 1200) == ""


def test_a_spark_run_prints_no_log4j_chatter(tmp_path: Path) -> None:
    """Issue 28 item 18: `jstorm run --spark-master` printed Spark's log4j banners, the
    native-hadoop notice and a DAGScheduler warning after `verify: OK`. The driver JVM now
    logs warnings and errors only (deploy/log4j2-quiet.properties)."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "jstormpy.cli.main", "run", str(root / "examples/wordcount.py"),
         "--spark-master", "local[2]", "--timeout", "300"], check=False, capture_output=True,
        text=True, timeout=400, cwd=tmp_path,
        env={**os.environ, "JSTORM_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "verify: OK" in proc.stdout
    for chatter in ("log4j", "NativeCodeLoader", "setLogLevel", "DAGScheduler",
                    "WARN Utils"):
        assert chatter not in out, f"{chatter!r} on the console:\n{out[-3000:]}"


def test_a_heronpy_topology_runs_unmodified_with_jstorm_run_spark_master(tmp_path: Path) -> None:
    """Issue 39: a heronpy topology file (tests/integration/heron_topologies/wordcount.py)
    with its workers inside Spark executors, through `jstorm run FILE --spark-master`."""
    from collections import Counter

    from .helpers import JSTORM, wait_until

    here = Path(__file__).parent / "heron_topologies"
    sys.path.insert(0, str(here))
    try:
        from wordcount import corpus  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(here))
    expected = Counter(corpus(2000))
    out = tmp_path / "counts"
    out.mkdir()
    env = {**os.environ, "JSTORM_HOME": str(tmp_path / "home"), "WORDCOUNT_OUT": str(out)}

    def counted() -> Counter:
        total: Counter = Counter()
        for f in out.glob("task-*.json"):
            try:
                total.update(json.loads(f.read_text()))
            except (json.JSONDecodeError, FileNotFoundError):
                pass
        return total

    run = subprocess.Popen([*JSTORM, "run", str(here / "wordcount.py"), "--spark-master",
                            "local[2]"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: counted() == expected, timeout=400,
                   what="every word counted in the Spark executors' workers")
        stop = subprocess.run([*JSTORM, "stop", "wordcount"], env=env, text=True,
                              capture_output=True, timeout=120, check=False)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output[-3000:]
