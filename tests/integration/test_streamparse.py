"""streamparse projects, unmodified: `jstorm run topologies/x.py` in the project's root
(jstormpy.multilang.streamparse_topology)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamparse import Grouping, JavaBolt, Topology

from jstormpy import LocalCluster
from jstormpy.api.errors import TopologyError
from jstormpy.cli.main import load_topology_file
from jstormpy.multilang import ShellBolt, ShellSpout
from jstormpy.multilang.streamparse_topology import topology_from_streamparse

from .helpers import fast_config, wait_until

pytestmark = pytest.mark.timeout(180)

PROJECT = Path(__file__).parent / "streamparse_project"
JSTORM = str(Path(sys.executable).with_name("jstorm"))


@pytest.fixture
def in_project(monkeypatch):
    monkeypatch.chdir(PROJECT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for mod in ("parity_parts",):
        sys.modules.pop(mod, None)


def test_a_streamparse_topology_keeps_its_streams_groupings_par_and_config(in_project):
    topo = load_topology_file("topologies/parity.py").topology
    assert topo.name == "parity"
    numbers, parity, odd = (topo.components[n] for n in ("numbers", "parity", "odd"))
    assert isinstance(numbers.obj, ShellSpout) and isinstance(parity.obj, ShellBolt)
    assert (numbers.parallelism, parity.parallelism, odd.parallelism) == (1, 2, 2)
    assert parity.streams == {"default": ("n", "parity"), "odd": ("n",)}
    assert [(g.kind, g.source, g.stream) for g in parity.inputs] == [
        ("shuffle", "numbers", "default")]
    assert [(g.kind, g.source, g.stream, g.fields) for g in odd.inputs] == [
        ("fields", "parity", "odd", ("n",))]
    assert odd.obj.settings.command[1:] == ("-m", "streamparse.run", "parity_parts.OddLogger")
    assert odd.obj.settings.cwd == str(PROJECT / "src")
    assert odd.obj.settings.conf == {"numbers.limit": 500, "odd.verbose": True}


def test_the_streamparse_topology_runs_and_counts(in_project):
    topo = load_topology_file("topologies/parity.py").topology
    with LocalCluster() as cluster:
        handle = cluster.submit(topo, fast_config(guarantee="at_least_once"))
        wait_until(lambda: handle.metrics("parity")["topology"]["executed"] >= 500
                   and handle.metrics("odd")["topology"]["executed"] >= 250, timeout=60,
                   what="every number through parity and every odd one through odd")
        status = handle.status()
        parity_in = handle.metrics("parity")["topology"]["executed"]
        odd_in = handle.metrics("odd")["topology"]["executed"]
        handle.kill()
    assert status["errors"] == []
    assert (parity_in, odd_in) == (500, 250)


def test_a_file_asking_for_exactly_once_gets_spouts_that_need_ids(in_project):
    module = load_topology_file("topologies/parity_exactly_once.py")
    assert module.config.guarantee == "exactly_once"
    assert module.topology.components["numbers"].obj.at_least_once is False
    assert load_topology_file("topologies/parity.py").config.guarantee == "at_least_once"
    with LocalCluster() as cluster:
        handle = cluster.submit(module.topology, module.config)
        wait_until(lambda: handle.metrics("odd")["topology"]["executed"] >= 250, timeout=60,
                   what="every odd number through odd")
        status = handle.status()
        handle.kill()
    assert status["errors"] == []


def test_java_components_are_refused_naming_them():
    class WithJava(Topology):
        from streamparse import Spout

        class S(Spout):
            outputs = ["x"]

        s = S.spec()
        j = JavaBolt.spec(name="indexer", full_class_name="com.example.Indexer", args_list=[],
                          inputs={s: Grouping.SHUFFLE}, outputs=["y"])

    with pytest.raises(TopologyError, match="'indexer' is a Java component"):
        topology_from_streamparse(WithJava, "j", PROJECT)


def test_sparse_quickstart_runs_unmodified_with_jstorm_run_for(tmp_path):
    env = {**os.environ, "LEIN_ROOT": "1", "JSTORM_HOME": str(tmp_path / "home")}
    sparse = str(Path(sys.executable).with_name("sparse"))
    subprocess.run([sparse, "quickstart", "wordcount"], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=60)
    project = tmp_path / "wordcount"
    before = project_files(project)
    assert json.loads((project / "config.json").read_text())["topology_specs"] == "topologies/"
    run = subprocess.run([JSTORM, "run", "topologies/wordcount.py", "--for", "6"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ran for 6 s; stopped after checkpoint #" in run.stdout
    counters = {line.split()[0]: line.split() for line in run.stdout.splitlines()
                if line.startswith(("count_bolt ", "word_spout "))}
    assert set(counters) == {"count_bolt", "word_spout"}, run.stdout
    assert counters["count_bolt"][2] != "0", run.stdout  # executed: words were counted
    logs = (tmp_path / "home" / "runs" / "wordcount" / "logs" / "tasks")
    lines = [json.loads(line) for f in logs.glob("count_bolt-*.log")
             for line in f.read_text().splitlines()]
    counted = [x["message"] for x in lines if "counted [1,000] words" in x["message"]]
    assert counted, "no 'counted [1,000] words' line from the bolt in its task logs"
    assert project_files(project) == before  # run with no edit to its files


def project_files(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for p in project.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_jstorm_stop_ends_a_run_that_never_ends_cleanly(tmp_path):
    env = {**os.environ, "JSTORM_HOME": str(tmp_path / "home")}
    run = subprocess.Popen([JSTORM, "run", "topologies/parity.py"], cwd=PROJECT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def counted() -> bool:
            st = subprocess.run([JSTORM, "metrics", "parity", "--json"], env=env, text=True,
                                capture_output=True, timeout=30, check=False)
            return st.returncode == 0 and json.loads(st.stdout)["components"]["odd"][
                "executed"] >= 250

        wait_until(counted, timeout=90, what="the odd numbers counted")
        stop = subprocess.run([JSTORM, "stop", "parity"], env=env, text=True,
                              capture_output=True, timeout=60, check=False)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert stop.stdout.startswith("stopped parity after checkpoint #")
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out
    assert "stopped:" in out
