"""The users' testing kit: TestingSource, TestingSink and run_inline, in one process.

Every run below goes through run_inline's simulated worker crash (and some through a
TestingSource failure too); the committed output is checked exactly against a
plain-Python reference, so a lost or replayed record fails the test."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy import TopologyBuilder
from jstormpy.api.component import Bolt
from jstormpy.dataflow import Dataflow
from jstormpy.testing import (
    InlineRunError,
    InlineStats,
    TestingSink,
    TestingSource,
    TestingSourceFailure,
    run_inline,
)
from jstormpy.window import Count, SessionWindows, Sum, TumblingWindows

LINES = ["the cat sat", "on the mat", "the end"] * 20


def counting_flow(source: TestingSource, sink: TestingSink, parallelism: int = 1) -> Dataflow:
    """Running count per word (stateful_map): the n-th occurrence of w gives (w, n)."""
    flow = Dataflow("kit-running")

    def count(n, word):
        n = (n or 0) + 1
        return n, {"word": word, "n": n}

    (flow.source("lines", source, parallelism=parallelism)
         .flat_map(lambda r: r["value"].split(), name="split")
         .key_by(lambda w: w)
         .stateful_map(count, name="count", parallelism=2)
         .sink("out", sink))
    return flow


def running_reference(lines):
    words = Counter(w for line in lines for w in line.split())
    return Counter((w, n) for w, c in words.items() for n in range(1, c + 1))


def test_run_inline_commits_each_running_count_once_across_its_crash():
    stats = InlineStats()
    out = run_inline(counting_flow(TestingSource(LINES, batch_size=2), TestingSink()),
                     stats=stats)
    assert Counter((r["word"], r["n"]) for r in out) == running_reference(LINES)
    assert stats.crashes == 1 and stats.restored_from[0] >= 1  # restored a real checkpoint
    assert stats.checkpoints >= 2


def test_run_inline_recovers_from_an_injected_source_failure():
    source = TestingSource(LINES, batch_size=3, fail_after=25)
    stats = InlineStats()
    out = run_inline(counting_flow(source, TestingSink(), parallelism=2), stats=stats)
    assert Counter((r["word"], r["n"]) for r in out) == running_reference(LINES)
    assert source.failed
    assert stats.crashes == 2  # the simulated crash and the injected failure


def test_testing_source_fails_once_then_replays():
    source = TestingSource(["a", "b", "c"], fail_after=1)
    emitted: list = []
    source.__dict__["emit"] = emitted.append
    source.next_tuple()
    with pytest.raises(TestingSourceFailure):
        source.next_tuple()
    source.restore({"emitted": 0})
    while not source.finished:
        source.next_tuple()
    assert emitted == [("a",), ("a",), ("b",), ("c",)]


def test_without_the_crash_the_output_is_the_same():
    seen = []
    for crash in (False, True):
        out = run_inline(counting_flow(TestingSource(LINES), TestingSink()), crash=crash)
        seen.append(sorted((r["word"], r["n"]) for r in out))
    assert seen[0] == seen[1] == sorted(running_reference(LINES).elements())


def test_window_join_and_session_windows_inline_match_references():
    rng = random.Random(7)
    # clicks in time order; per user, a gap > 50 ms starts a new session
    clicks = []
    t = 0
    for _ in range(90):
        t += rng.choice([5, 10, 40])
        clicks.append({"user": rng.choice("abc"), "ts": t})
    flow = Dataflow("kit-sessions")
    (flow.source("clicks", TestingSource(clicks, batch_size=4)).key_by(lambda r: r["user"])
         .window(SessionWindows(gap_ms=50), timestamp=lambda r: r["ts"])
         .aggregate(Count(), name="sessions")
         .sink("out", TestingSink()))
    got = sorted((r["key"], r["start"], r["end"], r["value"]) for r in run_inline(flow))
    want = []
    for u in "abc":
        times = sorted(c["ts"] for c in clicks if c["user"] == u)
        start = prev = times[0]
        n = 0
        for ts in times:
            if ts - prev > 50:
                want.append((u, start, prev + 50, n))
                start, n = ts, 0
            prev, n = ts, n + 1
        want.append((u, start, prev + 50, n))
    assert got == sorted(want)

    orders = [{"id": i, "ts": i * 10} for i in range(40)]
    pays = [{"id": i, "ts": i * 10 + 5} for i in range(0, 40, 2)]
    jflow = Dataflow("kit-join")
    o = jflow.source("orders", TestingSource(orders, batch_size=3)).key_by(lambda r: r["id"])
    p = jflow.source("pays", TestingSource(pays, batch_size=2)).key_by(lambda r: r["id"])
    o.join(p, window=TumblingWindows(size_ms=100), timestamp=(lambda r: r["ts"],
                                                               lambda r: r["ts"]),
           how="left", name="join") \
        .map(lambda j: {"id": j.key, "paid": j.right is not None}).sink("out", TestingSink())
    got_j = sorted((r["id"], r["paid"]) for r in run_inline(jflow))
    assert got_j == [(i, i % 2 == 0) for i in range(40)]


class Upper(Bolt):
    outputs = ("word",)

    def execute(self, tup):
        self.emit((tup["value"].upper(),))


def test_run_inline_runs_a_plain_topology():
    builder = TopologyBuilder("kit-plain")
    builder.set_spout("in", TestingSource(["x", "y", "z"] * 5, batch_size=2))
    builder.set_bolt("upper", Upper(), parallelism=2).shuffle_grouping("in")
    builder.set_bolt("out", TestingSink()).shuffle_grouping("upper")
    out = run_inline(builder.build(), checkpoint_every=2)
    assert Counter(r["word"] for r in out) == {"X": 5, "Y": 5, "Z": 5}


def test_run_inline_names_the_sink_it_needs():
    flow = Dataflow("kit-two-sinks")
    s = flow.source("in", TestingSource([1, 2, 3]))
    s.map(lambda r: r["value"] + 1).sink("plus", TestingSink())
    s.map(lambda r: r["value"] * 10).sink("times", TestingSink())
    with pytest.raises(InlineRunError, match="sink=NAME"):
        run_inline(flow)
    assert sorted(r["value"] for r in run_inline(flow, sink="times")) == [10, 20, 30]


def test_a_component_that_always_fails_ends_the_run():
    flow = Dataflow("kit-broken")
    flow.source("in", TestingSource([1, 2])).map(lambda r: 1 / 0).sink("out", TestingSink())
    with pytest.raises(InlineRunError, match="ZeroDivisionError"):
        run_inline(flow, max_restarts=2)


def runnable_doc_blocks():
    """The python blocks of docs/dataflow.md that run a job inline, with the output their
    last comment line promises."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "dataflow.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return [b for b in blocks if "run_inline(" in b and "from jstormpy" in b]


@pytest.mark.parametrize("block", runnable_doc_blocks())
def test_docs_dataflow_inline_snippets_print_what_they_promise(block, capsys):
    promised = block.rstrip().splitlines()[-1]
    assert promised.startswith("# ")
    exec(compile(block, "docs/dataflow.md", "exec"), {"__name__": "docs_snippet"})
    assert capsys.readouterr().out.strip() == promised[2:]


def test_docs_have_the_inline_snippets():
    assert len(runnable_doc_blocks()) >= 3


class Endless(TestingSource):
    """A source that never ends (emits nothing, never calls finish)."""

    def next_tuple(self):
        pass


def test_run_inline_gives_up_on_a_source_that_never_ends():
    flow = Dataflow("kit-endless")
    flow.source("in", Endless([1])).sink("out", TestingSink())
    with pytest.raises(InlineRunError, match="did not end within 0.3 s"):
        run_inline(flow, timeout_s=0.3)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 9)), max_size=60),
       st.integers(2, 7), st.integers(1, 5))
def test_run_inline_output_does_not_depend_on_the_crash_or_checkpoint_spacing(
        events, checkpoint_every, batch_size):
    """A reduce and a tumbling-window sum over seeded random events: with the crash, at
    any checkpoint spacing, the committed records are those of a run without one, and
    equal the plain-Python reference."""
    items = [{"k": k, "v": v, "ts": i * 10} for i, (k, v) in enumerate(events)]

    def flow():
        f = Dataflow("kit-prop")
        keyed = f.source("in", TestingSource(items, batch_size=batch_size)) \
            .key_by(lambda r: r["k"])
        keyed.reduce(lambda a, b: {**b, "v": a["v"] + b["v"]}, name="sum") \
            .map(lambda kv: {"k": kv.key, "running": kv.value["v"]}).sink("run", TestingSink())
        keyed.window(TumblingWindows(size_ms=100), timestamp=lambda r: r["ts"]) \
            .aggregate(Sum("v"), name="window-sum").sink("win", TestingSink())
        return f

    def result(crash):
        f = flow()
        running = sorted((r["k"], r["running"])
                         for r in run_inline(f, sink="run", crash=crash,
                                             checkpoint_every=checkpoint_every))
        win = sorted((r["key"], r["start"], r["value"])
                     for r in run_inline(f, sink="win", crash=crash,
                                         checkpoint_every=checkpoint_every))
        return running, win

    want_running, totals, want_win = [], Counter(), Counter()
    for item in items:
        totals[item["k"]] += item["v"]
        want_running.append((item["k"], totals[item["k"]]))
        want_win[(item["k"], item["ts"] // 100 * 100)] += item["v"]
    reference = (sorted(want_running), sorted((k, s, v) for (k, s), v in want_win.items()))
    assert result(crash=True) == result(crash=False) == reference


class BrokenOpen(TestingSource):
    def open(self, conf, context):
        raise RuntimeError("cannot connect")


def test_a_component_that_cannot_start_ends_the_run_with_its_error():
    flow = Dataflow("kit-broken-open")
    flow.source("in", BrokenOpen([1])).sink("out", TestingSink())
    stats = InlineStats()
    with pytest.raises(InlineRunError, match="cannot connect") as info:
        run_inline(flow, max_restarts=1, stats=stats)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert stats.crashes == 2 and stats.restored_from == [0]


def test_run_inline_refuses_a_guarantee_it_does_not_run():
    from jstormpy import Config

    flow = Dataflow("kit-amo")
    flow.source("in", TestingSource([1])).sink("out", TestingSink())
    with pytest.raises(InlineRunError, match="exactly-once protocol only"):
        run_inline(flow, config=Config(guarantee="at_most_once"))


def test_run_inline_tracebacks_name_the_file_of_a_shipped_lambda() -> None:
    """docs/errors.md: shipped code keeps its file name -- in run_inline too (issue 40
    item 6), not ``File "<dynamic-code>"``."""
    import traceback

    from jstormpy.dataflow import Dataflow
    from jstormpy.testing import InlineRunError

    flow = Dataflow("divide")
    (flow.source("n", TestingSource([1, 0, 2]))
         .map(lambda r: 10 // r["value"])  # the user's line: 0 divides
         .sink("out", TestingSink()))
    with pytest.raises(InlineRunError) as err:
        run_inline(flow, max_restarts=0)
    text = "".join(traceback.format_exception(err.value))
    assert "<dynamic-code>" not in text, text
    assert f'File "{__file__}"' in text, text
    assert '.map(lambda r: 10 // r["value"])  # the user\'s line' in text, text


def test_run_inline_rebuilds_a_generation_through_the_workers_prepare_order(monkeypatch):
    """The inline runner answers its own Prepare with the one driver production's worker
    and the simulator use (runtime/prepare_steps.py): every task built before any sink
    restores, the restored checkpoint's snapshots read first (issue 37)."""
    from jstormpy.runtime import prepare_steps

    orders: list[prepare_steps.PrepareOrder] = []
    calls: list[str] = []
    real = prepare_steps.perform

    def recording(order, port):
        orders.append(order)
        build, restore = port.build_task, port.restore_sink
        port.build_task = lambda t, s: (calls.append(f"build {t}"), build(t, s))[1]
        port.restore_sink = lambda t: (calls.append(f"restore {t}"), restore(t))[1]
        return real(order, port)

    monkeypatch.setattr(prepare_steps, "perform", recording)
    stats = InlineStats()
    out = run_inline(counting_flow(TestingSource(LINES, batch_size=2), TestingSink()),
                     stats=stats)
    assert Counter((r["word"], r["n"]) for r in out) == running_reference(LINES)
    assert [o.generation for o in orders] == [1, 2], orders  # the first run, the rebuild
    assert not orders[0].handles and orders[1].handles  # fresh, then restored
    rebuild = calls[len(calls) // 2:]
    assert rebuild[-1].startswith("restore") and \
        max(i for i, c in enumerate(rebuild) if c.startswith("build")) < \
        min(i for i, c in enumerate(rebuild) if c.startswith("restore")), rebuild


def test_the_kits_private_directories_go_when_the_process_that_made_them_exits(tmp_path):
    """A test run leaves no ``jstorm-testing-*`` directory behind; a forked child that
    exits normally (running its parent's exit handlers) removes none of them."""
    import subprocess
    import sys

    script = tmp_path / "kit_run.py"
    script.write_text(
        "import os, sys\n"
        "from jstormpy.dataflow import Dataflow\n"
        "from jstormpy.testing import TestingSink, TestingSource, run_inline\n"
        "src, out = TestingSource([1, 2, 3], fail_after=1), TestingSink()\n"
        "flow = Dataflow('kit-cleanup')\n"
        "flow.source('in', src).sink('out', out)\n"
        "assert sorted(r['value'] for r in run_inline(flow)) == [1, 2, 3]\n"
        "assert src.failed\n"
        "dirs = [out.directory, os.path.dirname(src.marker)]\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "assert all(os.path.isdir(d) for d in dirs), 'a forked child removed them'\n"
        "print('\\n'.join(dirs))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    dirs = run.stdout.split()
    assert len(dirs) == 2 and all("jstorm-testing-" in d for d in dirs)
    assert [d for d in dirs if Path(d).exists()] == []


def test_a_sink_directory_the_user_gave_stays(tmp_path):
    import subprocess
    import sys

    given = tmp_path / "mine"
    given.mkdir()
    (given / "keep.txt").write_text("the user's")
    subprocess.run([sys.executable, "-c", "from jstormpy.testing import TestingSink; "
                    f"TestingSink({str(given)!r}).clear()"], check=True, timeout=60)
    assert given.is_dir()  # clear() emptied it; the exit did not remove it
