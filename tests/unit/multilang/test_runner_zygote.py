"""Pre-forked pystorm runners (jstormpy.multilang.zygote): one zygote imports pystorm and
streamparse once and forks a runner per task; each runner is still its own process, on
its own pipes, monitored and killed by its own pid, and a dead zygote means cold starts."""

from __future__ import annotations

import logging
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import MultilangError
from jstormpy.multilang import zygote
from jstormpy.multilang.frames import FrameProcess, runner_command
from jstormpy.multilang.protocol import Emit, EmitRun
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.timeout(90)

COMPONENTS = Path(__file__).parents[2] / "integration" / "multilang_components"
CONF = {"topology.name": "t"}
CONTEXT = {"taskid": 7, "componentid": "comp", "task->component": {"7": "comp"},
           "source->stream->fields": {}}


@pytest.fixture(autouse=True)
def fresh_zygotes():
    zygote.close_all()
    yield
    zygote.close_all()


def start(cls: str, cwd: Path = COMPONENTS, module: str = "parity_components",
          **kw: Any) -> FrameProcess:
    argv = runner_command([sys.executable, "-m", "streamparse.run", f"{module}.{cls}"])
    assert argv is not None
    proc = FrameProcess(argv, "comp", 7, cwd=str(cwd), **kw)
    try:
        proc.handshake(CONF, CONTEXT)
    except BaseException:
        proc.close(1.0)
        raise
    return proc


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def gone_or_reaped(pid: int) -> bool:
    """No process ``pid`` left, not even a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            f.read()
        return False  # running, or a zombie nobody reaped

    except FileNotFoundError:
        return True


def answers(proc: FrameProcess, word: str) -> bool:
    proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("plain", word)]))
    while True:
        msg = proc.receive(10.0)
        if isinstance(msg, EmitRun):
            return msg.rows == [[word, len(word)]]
        if isinstance(msg, Emit):
            return msg.values == [word, len(word)]


def test_runners_are_forked_by_one_zygote_each_its_own_process_on_its_own_pipes():
    first, second = start("ParityBolt"), start("ParityBolt")
    try:
        zygotes = zygote.zygote_pids()
        assert list(zygotes) == [sys.executable]
        for proc in (first, second):
            assert isinstance(proc.proc, zygote.ForkedRunner)
            assert parent_of(proc.proc.pid) == zygotes[sys.executable]
            assert os.getsid(proc.proc.pid) == proc.proc.pid  # its own session
        assert first.proc.pid != second.proc.pid
        assert answers(first, "ab") and answers(second, "xyz")
    finally:
        first.close(2.0)
        second.close(2.0)
    for proc in (first, second):
        wait_until(lambda p=proc: gone_or_reaped(p.proc.pid), 10.0, "the runner reaped")


def test_a_forked_runners_crash_reports_its_own_exit_code_and_stderr(tmp_path):
    (tmp_path / "crashing.py").write_text(textwrap.dedent("""\
        import os, sys
        from streamparse import Bolt

        class Crash(Bolt):
            def process(self, tup):
                print(f"crash in {os.getpid()} at {os.getcwd()}", file=sys.stderr, flush=True)
                os._exit(3)
    """))
    healthy = start("ParityBolt")
    proc = start("Crash", cwd=tmp_path, module="crashing")
    try:
        assert isinstance(proc.proc, zygote.ForkedRunner)
        proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("x",)]))
        with pytest.raises(MultilangError) as err:
            while True:
                proc.receive(10.0)
        text = str(err.value)
        assert "exit code 3" in text and f"pid {proc.proc.pid}" in text
        assert f"crash in {proc.proc.pid} at {tmp_path}" in text  # its stderr, its cwd
        assert answers(healthy, "still")  # the other runner and the zygote go on
        assert zygote.zygote_pids()
    finally:
        proc.close(1.0)
        healthy.close(2.0)


def test_a_forked_runner_killed_by_its_pid_fails_the_task_and_is_reaped():
    proc = start("ParityBolt")
    try:
        os.kill(proc.proc.pid, signal.SIGKILL)
        with pytest.raises(MultilangError, match="exit code -9"):
            while True:  # (its log line from initialize may come first)
                proc.receive(10.0)
        wait_until(lambda: gone_or_reaped(proc.proc.pid), 10.0, "the runner reaped")
    finally:
        proc.close(1.0)


def test_a_hung_forked_runner_is_killed_after_its_heartbeat_timeout(tmp_path):
    (tmp_path / "hanging.py").write_text(textwrap.dedent("""\
        import sys, time
        from streamparse import Bolt

        class Hang(Bolt):
            def process(self, tup):
                print("thinking...", file=sys.stderr, flush=True)
                time.sleep(600)
    """))
    proc = start("Hang", cwd=tmp_path, module="hanging", heartbeat_timeout_s=0.5)
    try:
        proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("x",)]))
        with pytest.raises(MultilangError, match="did not answer within 0.5 s"):
            while True:
                proc.receive()
        err = proc.failure("again")
        assert "thinking..." in str(err) and proc.proc.poll() is not None
    finally:
        proc.close(0.5)
    wait_until(lambda: gone_or_reaped(proc.proc.pid), 10.0, "the runner reaped")


def test_a_killed_zygote_means_cold_starts_with_one_notice_and_its_runners_go_on(caplog):
    forked = start("ParityBolt")
    try:
        zygote_pid = zygote.zygote_pids()[sys.executable]
        os.kill(zygote_pid, signal.SIGKILL)
        wait_until(lambda: not zygote.zygote_pids(), 10.0, "the zygote seen gone")
        wait_until(lambda: gone_or_reaped(zygote_pid), 10.0, "the zygote reaped")
        with caplog.at_level(logging.WARNING, logger="jstormpy.multilang"):
            cold = start("ParityBolt")
            again = start("ParityBolt")
        try:
            notices = [r.getMessage() for r in caplog.records if "zygote" in r.getMessage()]
            assert len(notices) == 1 and "starting runners cold" in notices[0]
            assert "exit code -9" in notices[0]
            for proc in (cold, again):
                assert not isinstance(proc.proc, zygote.ForkedRunner)
                assert answers(proc, "cold")
            assert answers(forked, "orphan")  # forked before: still served
        finally:
            cold.close(2.0)
            again.close(2.0)
    finally:
        forked.close(2.0)
    assert forked.proc.poll() is not None


def test_the_zygote_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(zygote.ENABLE_ENV, "0")
    proc = start("ParityBolt")
    try:
        assert not isinstance(proc.proc, zygote.ForkedRunner) and not zygote.zygote_pids()
        assert answers(proc, "cold")
    finally:
        proc.close(2.0)


def test_forked_runners_do_not_share_the_zygotes_random_state(tmp_path):
    (tmp_path / "rolling.py").write_text(textwrap.dedent("""\
        import random
        from streamparse import Bolt

        class Roll(Bolt):
            def process(self, tup):
                self.emit([random.random()])
    """))
    rolls = []
    for _ in range(2):
        proc = start("Roll", cwd=tmp_path, module="rolling")
        try:
            assert isinstance(proc.proc, zygote.ForkedRunner)
            proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("x",)]))
            while True:
                msg = proc.receive(10.0)
                if isinstance(msg, (Emit, EmitRun)):
                    rolls.append(msg.values if isinstance(msg, Emit) else msg.rows[0])
                    break
        finally:
            proc.close(2.0)
    assert rolls[0] != rolls[1]


def test_closing_a_zygote_lets_it_exit_by_itself_at_once():
    """``close_all`` (a worker's exit runs it) ends each zygote by its end of file: the
    zygote exits with status 0 while its runners go on; it used to wait 5 s and be killed
    (SIGKILL, -9), because the host's close did not reach a socket its reader thread was
    blocked on."""
    proc = start("ParityBolt")
    try:
        assert isinstance(proc.proc, zygote.ForkedRunner)
        assert len(zygote.zygote_pids()) == 1
        assert zygote.close_all() == [0]
        assert answers(proc, "after the zygote's exit")  # the forked runner goes on
    finally:
        proc.close(2.0)
