"""The host's end of Storm's multilang protocol against real subprocesses (tiny scripts
that speak it by hand): framing, the handshake, and every way a component can break it."""

from __future__ import annotations

import json
import math
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jstormpy.api.errors import MultilangError
from jstormpy.multilang.protocol import (
    Ack,
    Emit,
    ErrorReport,
    LogMessage,
    Metric,
    ShellProcess,
    Sync,
    dumps,
    encode_tuples,
    parse_message,
)

pytestmark = pytest.mark.timeout(60)

HANDSHAKE = textwrap.dedent("""\
    import json, os, sys
    def read():
        lines = []
        for line in sys.stdin:
            if line == "end\\n":
                return json.loads("".join(lines))
            lines.append(line)
        sys.exit(0)
    def send(msg):
        sys.stdout.write(json.dumps(msg) + "\\nend\\n"); sys.stdout.flush()
    hello = read()
    open(os.path.join(hello["pidDir"], str(os.getpid())), "w").close()
    send({"pid": os.getpid()})
""")


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "component.py"
    path.write_text(HANDSHAKE + textwrap.dedent(body))
    return [sys.executable, str(path)]


def started(tmp_path: Path, body: str, **kw) -> ShellProcess:
    proc = ShellProcess(script(tmp_path, body), "comp", 7, **kw)
    pid = proc.handshake({"topology.name": "t"}, {"taskid": 7})
    assert pid == proc.proc.pid
    assert (Path(proc.pid_dir) / str(pid)).exists()  # the pid file, as Storm expects
    return proc


def test_messages_of_every_kind_are_typed(tmp_path):
    proc = started(tmp_path, """\
        cmd = read()
        send({"command": "log", "msg": "got " + cmd["command"], "level": 3})
        send({"command": "emit", "tuple": ["a", 1], "stream": "s", "anchors": ["9"],
              "need_task_ids": False})
        send({"command": "metrics", "name": "m", "params": 5})
        send({"command": "error", "msg": "oops"})
        send({"command": "ack", "id": "9"})
        send({"command": "sync"})
        print("stderr line", file=sys.stderr)
    """)
    try:
        proc.send({"command": "next"})
        got = [proc.receive() for _ in range(6)]
    finally:
        proc.close()
    assert got == [LogMessage("got next", 3),
                   Emit(["a", 1], "s", None, ("9",), None, False),
                   Metric("m", 5), ErrorReport("oops"), Ack("9"), Sync()]


def test_a_process_that_exits_fails_with_its_exit_code_and_stderr(tmp_path):
    proc = started(tmp_path, """\
        read()
        print("line one", file=sys.stderr)
        print("Traceback: boom", file=sys.stderr)
        sys.exit(4)
    """)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError) as err:
        proc.receive()
    msg = str(err.value)
    assert "multilang component 'comp' (task 7" in msg and "exit code 4" in msg
    assert msg.endswith("line one\nTraceback: boom")


def test_stderr_lines_the_reader_has_not_taken_yet_are_in_the_error(tmp_path, monkeypatch):
    """The error waits for the stderr reader to reach the pipe's end once the process
    exited: here the reader thread starts reading only after the exit was seen (as when it
    is not scheduled in time on a busy machine); the error still ends with the last line."""
    import threading
    import time

    seen_exit = threading.Event()
    read = ShellProcess._read_stderr

    def late_reader(self, err):
        seen_exit.wait(10)
        time.sleep(0.2)  # the lag itself: a reader thread not scheduled for a while
        read(self, err)

    monkeypatch.setattr(ShellProcess, "_read_stderr", late_reader)
    real_failure = ShellProcess.failure

    def failure(self, reason):
        seen_exit.set()
        return real_failure(self, reason)

    monkeypatch.setattr(ShellProcess, "failure", failure)
    proc = started(tmp_path, """\
        read()
        print("Traceback: the last words", file=sys.stderr)
        sys.exit(3)
    """)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError) as err:
        proc.receive()
    msg = str(err.value)
    assert "exit code 3" in msg
    assert msg.endswith("last lines of its stderr:\nTraceback: the last words"), msg


def test_a_hang_past_the_heartbeat_timeout_fails_and_the_process_is_killed(tmp_path):
    proc = started(tmp_path, """\
        print("thinking...", file=sys.stderr, flush=True)
        read()
        import time; time.sleep(600)
    """, heartbeat_timeout_s=0.5)
    # the line is in the stderr tail before the clock starts (a loaded machine may not run
    # the child within the 0.5 s: the error would then show "(nothing)")
    deadline = time.monotonic() + 30
    while "thinking..." not in proc.stderr_tail:
        assert time.monotonic() < deadline, "the child never wrote to its stderr"
        time.sleep(0.01)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError, match="did not answer within 0.5 s"):
        proc.receive()
    assert proc.proc.poll() is not None  # not left running
    with pytest.raises(MultilangError, match="thinking"):  # stays broken
        proc.send({"command": "next"})


@pytest.mark.parametrize(("body", "reason"), [
    ('sys.stdout.write("{not json\\nend\\n"); sys.stdout.flush()', "malformed message"),
    ('send(["a", "list"])', "expected a JSON object"),
    ('send({"command": "launch-missiles"})', "unknown command 'launch-missiles'"),
    ('send({"command": "emit", "tuple": "abc"})', "emit without a 'tuple' list"),
    ('send({"command": "emit", "tuple": ["x" * 5000]})', "over 1000 bytes"),
    ('sys.stdout.write("x" * 5000); sys.stdout.flush()', "over 1000 bytes"),
])
def test_malformed_or_oversized_messages_fail(tmp_path, body, reason):
    proc = started(tmp_path, f"""\
        read()
        print("about to misbehave", file=sys.stderr, flush=True)
        {body}
        import time; time.sleep(600)
    """, max_message_bytes=1000)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError) as err:
        proc.receive()
    assert reason in str(err.value)
    assert "about to misbehave" in str(err.value)
    assert proc.proc.poll() is not None


def test_a_command_that_cannot_start_is_named():
    with pytest.raises(MultilangError, match="cannot start .*no-such-interpreter"):
        ShellProcess(["no-such-interpreter-xyz", "a.py"], "comp", 1)


@pytest.mark.parametrize("raw", [{"command": "ack"}, {"pid": "12"}, 3])
def test_parse_rejects_what_the_protocol_does_not_define(raw):
    with pytest.raises(ValueError):
        parse_message(raw)


def test_emit_asks_for_task_ids_unless_told_not_to():
    # Storm's default: an emit is answered with its task ids unless need_task_ids is false
    assert parse_message({"command": "emit", "tuple": [1]}).need_task_ids is True
    assert parse_message({"command": "emit", "tuple": [1], "need_task_ids": False}
                         ).need_task_ids is False


def test_messages_cut_anywhere_across_writes_are_framed(tmp_path):
    # the host reads stdout in chunks: a message may arrive a byte at a time, span lines,
    # end in CRLF, be blank, or hold what only the standard library's JSON parses
    # (simplejson writes a float nan as NaN; Python ints have no 64-bit bound)
    proc = started(tmp_path, """\
        read()
        data = ('{"command": "log",\\n "msg": "two lines", "level": 2}\\nend\\n'
                '\\nend\\n'
                '{"command": "ack", "id": "1"}\\r\\nend\\r\\n'
                '{"command": "emit", "tuple": [NaN, 123456789012345678901234567890],'
                ' "need_task_ids": false}\\nend\\n'
                '{"command": "sync"}\\nend\\n')
        for ch in data:
            sys.stdout.write(ch); sys.stdout.flush()
        read()
    """)
    try:
        proc.send({"command": "next"})
        got = [proc.receive() for _ in range(4)]
    finally:
        proc.close()
    assert got[:2] == [LogMessage("two lines", 2), Ack("1")]
    assert isinstance(got[2], Emit) and math.isnan(got[2].values[0])
    assert got[2].values[1] == 123456789012345678901234567890
    assert got[3] == Sync()


def test_a_batch_of_tuples_is_encoded_as_storm_sends_them():
    rows = [("a", 1), ("b", {"k": [1.5, None]}), (2**70, "é")]
    data = encode_tuples(41, "split", "default", 3, rows)
    texts = data.decode().split("\nend\n")
    assert texts[-1] == ""
    assert [json.loads(t) for t in texts[:-1]] == [
        {"id": str(41 + i), "comp": "split", "stream": "default", "task": 3,
         "tuple": list(r)} for i, r in enumerate(rows)]
    with pytest.raises(TypeError):
        encode_tuples(1, "split", "default", 3, [(object(),)])


def test_a_write_larger_than_the_pipe_goes_through_while_the_component_writes_back(tmp_path):
    # the component answers each tuple with far more than it reads; the host writes a batch
    # bigger than a pipe holds: it must read while it writes, or both wait for good
    proc = started(tmp_path, """\
        while True:
            tup = read()
            for _ in range(4):
                send({"command": "emit", "tuple": [tup["id"], "x" * 500],
                      "need_task_ids": False})
            send({"command": "ack", "id": tup["id"]})
    """, heartbeat_timeout_s=10)
    rows = [(i, "y" * 200) for i in range(1000)]
    try:
        proc.send_encoded(encode_tuples(1, "s", "default", 1, rows))  # 0.3 MB out, 2 MB back
        got = [proc.receive() for _ in range(5 * len(rows))]
    finally:
        proc.close()
    assert [m.tuple_id for m in got if isinstance(m, Ack)] == [str(i + 1) for i in range(1000)]
    assert sum(isinstance(m, Emit) for m in got) == 4 * len(rows)


def test_a_worker_with_over_1024_open_files_still_speaks_to_its_subprocess(tmp_path):
    # a worker with many tasks and sockets holds high fds: waiting on the pipes must not
    # use select(), which refuses fds past 1024
    import os
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit on open files ({hard}) is below 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        proc = started(tmp_path, """\
            while True:
                tup = read()
                send({"command": "ack", "id": tup["id"]})
        """)
        assert proc.proc.stdout is not None and proc.proc.stdout.fileno() > 1024
        try:
            proc.send_encoded(encode_tuples(1, "s", "default", 1, [(1,), (2,)]))
            assert [proc.receive(), proc.receive()] == [Ack("1"), Ack("2")]
        finally:
            proc.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_component_that_closes_its_stdout_and_stops_reading_fails_the_write(tmp_path):
    proc = started(tmp_path, """\
        print("closing my stdout", file=sys.stderr, flush=True)
        os.close(1)
        import time; time.sleep(600)
    """, heartbeat_timeout_s=5)
    rows = [(i, "y" * 200) for i in range(1000)]  # more than its stdin pipe holds
    with pytest.raises(MultilangError, match="its stdout closed") as err:
        proc.send_encoded(encode_tuples(1, "s", "default", 1, rows))
    assert "closing my stdout" in str(err.value)
    assert proc.proc.poll() is not None  # not left running


def test_a_float_nan_or_infinity_reaches_the_component_as_itself_not_as_null():
    # orjson writes nan and infinity as null; the component must read the float it was
    # sent (simplejson, like Python's json, reads NaN and Infinity), and None stays null
    encoded = encode_tuples(1, "src", "default", 0, [(float("nan"), float("inf"), None, 1.5)])
    values = json.loads(encoded.split(b"\nend\n")[0])["tuple"]
    assert math.isnan(values[0]) and values[1] == math.inf
    assert values[2:] == [None, 1.5]
    assert json.loads(dumps({"a": None})) == {"a": None}
