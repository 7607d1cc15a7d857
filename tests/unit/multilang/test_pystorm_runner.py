"""Our pystorm runner (jstormpy.multilang.pystorm_runner) against pystorm's own JSON loop,
on real subprocesses: the same unmodified component classes send the same messages under
both protocols; and every way the framed stream can break fails as the JSON host fails."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jstormpy.api.errors import ConfigError, MultilangError
from jstormpy.multilang import ShellBolt
from jstormpy.multilang import pystorm_runner as runner
from jstormpy.multilang.frames import RUNNER, FrameProcess, runner_command
from jstormpy.multilang.protocol import (
    Ack,
    AckRange,
    Acks,
    Emit,
    EmitRun,
    ErrorReport,
    Fail,
    LogMessage,
    Message,
    Metric,
    ShellProcess,
    Sync,
)

pytestmark = pytest.mark.timeout(60)

COMPONENTS = Path(__file__).parents[2] / "integration" / "multilang_components"
CONF = {"topology.name": "t", "pystorm.log.format": "%(name)s: %(message)s"}
CONTEXT = {"taskid": 7, "componentid": "comp", "task->component": {"7": "comp"},
           "source->stream->fields": {}}


def sparse(cls: str) -> list[str]:
    return [sys.executable, "-m", "streamparse.run", f"parity_components.{cls}"]


def start(protocol: str, cls: str, **kw: Any) -> ShellProcess:
    """``protocol``: "json" (pystorm's own loop), "frames" (the runner, as a host starts
    it: no anchors on the wire) or "frames+anchors" (the runner sending bolt anchors)."""
    command = sparse(cls)
    if protocol.startswith("frames"):
        runner_argv = runner_command(command)
        assert runner_argv is not None
        proc: ShellProcess = FrameProcess(runner_argv, "comp", 7, cwd=str(COMPONENTS),
                                          anchors=protocol == "frames+anchors", **kw)
    else:
        proc = ShellProcess(command, "comp", 7, cwd=str(COMPONENTS), **kw)
    proc.handshake(CONF, CONTEXT)
    return proc


def until(proc: ShellProcess, done: Any, task_ids: list[int] | None = None) -> list[Message]:
    """Messages until ``done(messages)``; an emit asking for task ids gets ``task_ids``."""
    got: list[Message] = []
    while not done(got):
        msg = proc.receive(10.0)
        got += single(msg)
        if isinstance(msg, Emit) and msg.need_task_ids and msg.task is None:
            proc.send(task_ids or [])
    return got


def single(msg: Message) -> list[Message]:
    """The runner's run of emits or its acks at once as the single messages they stand for."""
    if isinstance(msg, EmitRun):
        return list(msg.emits())
    if isinstance(msg, Acks):
        return [Ack(i) for i in msg.tuple_ids]
    if isinstance(msg, AckRange):
        return [Ack(i) for i in msg.tuple_ids()]
    return [msg]


def same(frames: list[Message], plain: list[Message]) -> None:
    """The same messages in the same order, but for the acks: the runner sends a frame's
    acks after its other messages (never before what the tuple emitted)."""
    assert [m for m in frames if not isinstance(m, Ack)] == [
        m for m in plain if not isinstance(m, Ack)]
    assert sorted(m.tuple_id for m in frames if isinstance(m, Ack)) == sorted(
        m.tuple_id for m in plain if isinstance(m, Ack))
    for acked_at, msg in enumerate(frames):  # no ack before its tuple's last emit
        if isinstance(msg, Ack):
            assert not any(isinstance(m, Emit) and msg.tuple_id in m.anchors
                           for m in frames[acked_at:]), msg


def same_as_json(framed: str, frames: list[Message], plain: list[Message]) -> None:
    """:func:`same`; without anchors on the wire ("frames": the host does not use them),
    the same but for the emits' anchors."""
    if framed == "frames+anchors":
        same(frames, plain)
        return
    same(unanchored(frames), unanchored(plain))


def unanchored(msgs: list[Message]) -> list[Message]:
    return [m._replace(anchors=()) if isinstance(m, Emit) else m for m in msgs]


FRAMED = pytest.mark.parametrize("framed", ["frames", "frames+anchors"])


def acked(ids: set[str]) -> Any:
    return lambda got: ids <= {m.tuple_id for m in got if isinstance(m, (Ack, Fail))}


def drive_bolt(protocol: str) -> list[Message]:
    rows = [("plain", "ab"), ("stream", "w"), ("anchors", "x"), ("direct", "d"),
            ("ids", "i"), ("values", "v"), ("log", "l"), ("metric", 3), ("fail", "f")]
    proc = start(protocol, "ParityBolt")
    try:
        proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, rows))
        got = until(proc, acked({str(i) for i in range(1, len(rows) + 1)}), [3, 4])
        proc.send({"id": "tick-1", "comp": "__system", "stream": "__tick", "task": -1,
                   "tuple": [2]})
        got += until(proc, acked({"tick-1"}))
        proc.send({"id": "hb", "comp": "__system", "stream": "__heartbeat", "task": -1,
                   "tuple": []})
        got += until(proc, lambda g: bool(g) and isinstance(g[-1], Sync))
        proc.send_encoded(proc.encode_tuples(20, "src", "default", 9, [("raise", 20)]))
        got += until(proc, acked({"20"}))
        with pytest.raises(MultilangError, match="exit code 1"):  # then it exits
            proc.receive(5.0)
    finally:
        proc.close(2.0)
    return [without_traceback(m) for m in got]


def without_traceback(msg: Message) -> Message:
    """A log or error message with a traceback as its first and last lines (the frames
    between differ: the runner's loop calls ``process``, not pystorm's ``_run``)."""
    if isinstance(msg, (LogMessage, ErrorReport)) and "Traceback" in msg.text:
        lines = msg.text.strip().splitlines()
        text = f"{lines[0]} ... {lines[-1]}"
        return LogMessage(text, msg.level) if isinstance(msg, LogMessage) else ErrorReport(text)
    return msg


@FRAMED
def test_a_bolt_sends_the_same_messages_under_both_protocols(framed):
    json_msgs = drive_bolt("json")
    frame_msgs = drive_bolt(framed)
    same_as_json(framed, frame_msgs, json_msgs)
    if framed == "frames":  # the class keeps pystorm's emit: the runner's sends no anchors
        assert frame_msgs == unanchored(frame_msgs)
    # and what they are is what the component did, as pystorm defines it
    emits = [m for m in json_msgs if isinstance(m, Emit)]
    assert emits[0] == Emit(["ab", 2], "default", None, ("1",), None, False)  # auto-anchor
    assert Emit(["w"], "words", None, (), None, False) in emits
    assert Emit(["x"], "default", None, ("3", "other-id"), None, False) in emits
    assert Emit(["d"], "default", None, ("4",), 5, True) in emits
    assert Emit(["[5]"], "default", None, ("4",), None, False) in emits
    assert Emit(["[3, 4]"], "default", None, ("5",), None, False) in emits
    assert Emit(["v", [1.5, None, True]], "default", None, ("6",), None, False) in emits
    assert Emit(["values", "v"], "default", None, ("6",), None, False) in emits
    assert Emit(["tick", 2], "default", None, ("tick-1",), None, False) in emits
    logs = [m.text for m in json_msgs if isinstance(m, LogMessage)]
    assert "ready as task 7" in logs and "log l" in logs
    assert any("logger l" in t for t in logs)
    assert Metric("seen", 3) in json_msgs
    assert json_msgs.index(Fail("9")) < json_msgs.index(Ack("9"))  # fail, then auto-ack
    assert Sync() in json_msgs  # the heartbeat's answer
    errors = [m for m in json_msgs if isinstance(m, ErrorReport)]
    assert len(errors) == 1 and "ValueError: asked to raise at 20" in errors[0].text
    assert Fail("20") in json_msgs  # auto_fail


@FRAMED
def test_manual_acks_and_anchors_are_the_same_under_both_protocols(framed):
    def drive(protocol: str) -> list[Message]:
        proc = start(protocol, "ManualBolt")
        try:
            proc.send_encoded(proc.encode_tuples(1, "src", "default", 9,
                                                 [("a",), ("b",), ("c",)]))
            got = until(proc, acked({"1", "2"}))
            proc.send_encoded(proc.encode_tuples(4, "src", "default", 9, [("d",)]))
            return got + until(proc, acked({"3", "4"}))
        finally:
            proc.close(2.0)

    frames, plain = drive(framed), drive("json")
    same_as_json(framed, frames, plain)
    emits = [m for m in plain if isinstance(m, Emit)]
    assert emits[:2] == [Emit(["a"], "default", None, (), None, False),
                         Emit(["b"], "default", None, (), None, False)]
    assert Emit(["a", "late"], "default", None, ("1",), None, False) in emits


def test_every_tuple_of_a_frame_goes_through_the_runners_batch_loop():
    """A frame of tuples is worked through in one loop, the first frame read after a wait
    included (not message by message through pystorm's own loop)."""
    proc = start("frames", "CallerBolt")
    try:
        for first in (1, 4):  # the runner waits for input before each frame
            proc.send_encoded(proc.encode_tuples(first, "src", "default", 9,
                                                 [(f"t{first + k}",) for k in range(3)]))
            got = until(proc, acked({str(first + k) for k in range(3)}))
            assert [m.values for m in got if isinstance(m, Emit)] == [
                [f"t{first + k}", "_bolt_run"] for k in range(3)]
    finally:
        proc.close(2.0)


@FRAMED
def test_emits_sent_while_process_still_runs_are_the_same_under_both_protocols(framed):
    """A busy ``process``: its emits go out every 50 ms while it runs (a frame then takes
    the rows of the run of emits the task thread is appending to); none is lost or
    reordered, and the tuple's ack comes after all of them."""
    def drive(protocol: str) -> list[Message]:
        proc = start(protocol, "BusyBolt")
        try:
            proc.send_encoded(proc.encode_tuples(1, "src", "default", 9,
                                                 [("a", 5000), ("b", 3)]))
            got: list[Message] = []
            while not acked({"1", "2"})(got):
                msg = proc.receive(10.0)
                if isinstance(msg, EmitRun):
                    runs.append(msg)
                got += single(msg)
            return got
        finally:
            proc.close(2.0)

    runs: list[EmitRun] = []
    frames = drive(framed)
    assert len([r for r in runs if r.rows and r.rows[0][0] == "a"]) > 1  # sent as it ran
    plain = drive("json")
    same_as_json(framed, frames, plain)
    assert [m.values for m in frames if isinstance(m, Emit)] == [
        ["a", k] for k in range(5000)] + [["b", k] for k in range(3)]


@FRAMED
def test_a_run_of_emits_over_the_frame_limit_goes_in_frames_under_it(framed):
    """The host's ``max_message_bytes`` is per frame: a run too long for one is cut
    (anchors, when sent, with their rows); the host gets every emit, in order."""
    proc = start(framed, "BusyBolt", max_message_bytes=2000)
    try:
        proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("a", 3000)]))
        got = until(proc, acked({"1"}))
    finally:
        proc.close(2.0)
    emits = [m for m in got if isinstance(m, Emit)]
    assert [m.values for m in emits] == [["a", k] for k in range(3000)]
    assert {m.anchors for m in emits} == ({("1",)} if framed == "frames+anchors" else {()})


def test_prints_reach_the_log_and_stray_writes_stderr_not_the_frames():
    proc = start("frames", "ParityBolt")
    try:
        proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("print", "p")]))
        got = until(proc, acked({"1"}))
        assert proc.alive()
    finally:
        proc.close(2.0)
    assert any(isinstance(m, LogMessage) and "printed p" in m.text for m in got)
    assert "straight to fd 1" in proc.stderr_tail


@FRAMED
def test_pystorms_batching_bolt_sends_the_same_messages_under_both_protocols(framed):
    def drive(protocol: str) -> list[Message]:
        proc = start(protocol, "GroupBolt")
        try:
            proc.send_encoded(proc.encode_tuples(1, "src", "default", 9,
                                                 [("a",), ("b",), ("a",)]))
            proc.send({"id": "tick-1", "comp": "__system", "stream": "__tick", "task": -1,
                       "tuple": [1]})
            return until(proc, acked({"1", "2", "3", "tick-1"}))
        finally:
            proc.close(2.0)

    frames, plain = drive(framed), drive("json")
    same_as_json(framed, frames, plain)
    emits = [m for m in plain if isinstance(m, Emit)]
    assert {(tuple(m.values), m.anchors) for m in emits} == {
        (("a", 2), ("1", "3")), (("b", 1), ("2",))}


def test_a_spout_answers_every_command_the_same_under_both_protocols():
    def drive(protocol: str) -> list[Message]:
        proc = start(protocol, "ParitySpout")
        got: list[Message] = []
        try:
            for cmd in ({"command": "activate"}, {"command": "next"}, {"command": "next"},
                        {"command": "ack", "id": 0}, {"command": "fail", "id": 1},
                        {"command": "next"}, {"command": "next"}, {"command": "next"},
                        {"command": "deactivate"}):
                proc.send(cmd)
                got += until(proc, lambda g: bool(g) and isinstance(g[-1], Sync))
        finally:
            proc.close(2.0)
        return got

    plain = drive("json")
    assert drive("frames") == plain
    emits = [m for m in plain if isinstance(m, Emit)]
    assert [(m.values, m.msg_id, m.stream) for m in emits] == [
        ([0], 0, "default"), ([1], 1, "default"), ([1], 1, "again"), ([2], 2, "default")]
    logs = [m.text for m in plain if isinstance(m, LogMessage)]
    assert {"activated", "ack 0", "deactivated"} <= set(logs)


def test_a_spout_next_asks_for_many_next_tuple_calls_and_stops_when_idle():
    proc = start("frames", "ParitySpout")
    try:
        proc.send({"command": "next", "n": 64})
        got = until(proc, lambda g: bool(g) and isinstance(g[-1], Sync))
    finally:
        proc.close(2.0)
    assert [m.values for m in got if isinstance(m, Emit)] == [[0], [1], [2]]
    assert got[-1] == Sync() and sum(isinstance(m, Sync) for m in got) == 1


def test_a_slow_spout_next_stops_asking_after_its_time_budget():
    proc = start("frames", "SlowSpout")
    try:
        proc.send({"command": "next", "n": 64})  # 64 calls would take 320 ms
        got = until(proc, lambda g: bool(g) and isinstance(g[-1], Sync))
    finally:
        proc.close(2.0)
    emitted = [m.values[0] for m in got if isinstance(m, Emit)]
    assert 1 <= len(emitted) < 16 and emitted == list(range(len(emitted)))


def test_only_streamparse_commands_get_the_runner():
    assert runner_command(["py", "-m", "streamparse.run", "bolts.Split"]) == [
        "py", RUNNER, "bolts.Split"]
    assert runner_command(["py", "-m", "streamparse.run", "bolts.Split -s json"]) == [
        "py", RUNNER, "bolts.Split", "-s", "json"]
    assert runner_command(["streamparse_run", "bolts.Split"]) == [
        sys.executable, RUNNER, "bolts.Split"]
    for other in (["python3", "split.py"], ["node", "split.js"],
                  ["py", "-m", "streamparse.run"], ["py", "-m", "other.run", "a.B"]):
        assert runner_command(other) is None
    with pytest.raises(ConfigError, match="protocol must be one of auto, json"):
        ShellBolt(sparse("ParityBolt"), protocol="msgpack")


# -- the framed stream breaking, as the JSON host's tests break it ------------------------
FAKE = textwrap.dedent("""\
    import marshal, os, sys, time
    def read():
        head = sys.stdin.buffer.read(5)
        if len(head) < 5:
            sys.exit(0)
        return marshal.loads(sys.stdin.buffer.read(int.from_bytes(head[1:], "big")))
    def send(*items):
        data = marshal.dumps(list(items))
        os.write(1, bytes((0xA7,)) + len(data).to_bytes(4, "big") + data)
    hello = read()[0]
    open(os.path.join(hello["pidDir"], str(os.getpid())), "w").close()
    send({"pid": os.getpid()})
""")


def fake(tmp_path: Path, body: str, **kw: Any) -> FrameProcess:
    path = tmp_path / "fake_runner.py"
    path.write_text(FAKE + textwrap.dedent(body))
    proc = FrameProcess([sys.executable, str(path)], "comp", 7, **kw)
    proc.handshake({"topology.name": "t"}, {"taskid": 7})
    return proc


def test_a_fake_runner_speaking_frames_by_hand_is_understood(tmp_path):
    proc = fake(tmp_path, """\
        batch = read()[0]
        send((["a"], "s", None, ("9",), None, False), ("a", "9"), ("f", "10"),
             ["E", "t", [["b"], ["c"], ["d"]], [("1",), (), "7"]], ("A", ["11", "12"]),
             ("R", 13, 15), ["E", "u", [["e"]]],
             {"command": "log", "msg": "got %d rows" % len(batch[5]), "level": 3},
             {"command": "sync"})
    """)
    try:
        proc.send_encoded(proc.encode_tuples(9, "src", "default", 1, [("x",), ("y",)]))
        got = [proc.receive() for _ in range(9)]
    finally:
        proc.close()
    assert got == [Emit(["a"], "s", None, ("9",), None, False), Ack("9"), Fail("10"),
                   EmitRun("t", [["b"], ["c"], ["d"]], [("1",), (), "7"]),
                   Acks(["11", "12"]), AckRange(13, 15), EmitRun("u", [["e"]]),
                   LogMessage("got 2 rows", 3), Sync()]
    run = got[3]
    assert isinstance(run, EmitRun) and run.emits()[2] == Emit(["d"], "t", None, ("7",), None,
                                                               False)
    # a run sent without anchors (as the runner sends them unless asked): none
    bare = got[6]
    assert isinstance(bare, EmitRun) and bare.emits() == [Emit(["e"], "u", None, (), None,
                                                               False)]
    assert AckRange(13, 15).tuple_ids() == ["13", "14"]


@pytest.mark.parametrize(("body", "reason"), [
    ('os.write(1, b"{not a frame\\nend\\n")', "malformed frame (no frame header)"),
    ('os.write(1, bytes((0xA7,)) + (3).to_bytes(4, "big") + b"\\xff\\xff\\xff")',
     "malformed frame (bad marshal data"),
    ('send(("launch", "missiles", 1))', "malformed message (an unknown message)"),
    ('send((["a"], 5, None, (), None, False))', "emit with a non-string stream"),
    ('send(["E", "s", [["a"]], []])', "a list of values and one of anchors as long"),
    ('send(["E", "s", "a"])', "a list of values"),
    ('send(("A", "1"))', "acks without a list of ids"),
    ('send(("R", 5, 2))', "an ack range that is not two ascending integers"),
    ('send(("R", "1", 2))', "an ack range that is not two ascending integers"),
    ('send(["E", "s", [["a"], "b"], [(), ()]])', "emits with values that are not lists"),
    ('send({"command": "launch-missiles"})', "unknown command 'launch-missiles'"),
    ('send((["x" * 5000], "default", None, (), None, False))', "over 1000 bytes"),
    ('os.write(1, bytes((0xA7,)) + (10 ** 9).to_bytes(4, "big"))', "over 1000 bytes"),
])
def test_malformed_or_oversized_frames_fail(tmp_path, body, reason):
    proc = fake(tmp_path, f"""\
        read()
        print("about to misbehave", file=sys.stderr, flush=True)
        {body}
        time.sleep(600)
    """, max_message_bytes=1000)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError) as err:
        proc.receive()
    assert reason in str(err.value)
    assert "multilang component 'comp' (task 7" in str(err.value)
    assert "about to misbehave" in str(err.value)
    assert proc.proc.poll() is not None  # not left running


def test_a_runner_that_exits_or_hangs_fails_naming_it_with_its_stderr(tmp_path):
    proc = fake(tmp_path, """\
        read()
        print("Traceback: boom", file=sys.stderr)
        sys.exit(4)
    """)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError) as err:
        proc.receive()
    assert "exit code 4" in str(err.value) and str(err.value).endswith("Traceback: boom")
    proc = fake(tmp_path, """\
        read()
        print("thinking...", file=sys.stderr, flush=True)
        time.sleep(600)
    """, heartbeat_timeout_s=0.5)
    proc.send({"command": "next"})
    with pytest.raises(MultilangError, match="did not answer within 0.5 s"):
        proc.receive()
    assert "thinking..." in str(proc.failure("again")) and proc.proc.poll() is not None


def test_frames_cut_anywhere_across_reads_are_framed(tmp_path):
    proc = fake(tmp_path, """\
        read()
        items = [(["w%d" % i], "default", None, (), None, False) for i in range(300)]
        data = marshal.dumps(items)
        frame = bytes((0xA7,)) + len(data).to_bytes(4, "big") + data
        frame = frame + frame
        for cut in range(0, len(frame), 7):  # in slivers, some inside the header
            os.write(1, frame[cut:cut + 7])
            time.sleep(0.0005 if cut % 700 == 0 else 0)
    """)
    try:
        proc.send({"command": "next"})
        got = [proc.receive() for _ in range(600)]
    finally:
        proc.close()
    assert [m.values[0] for m in got if isinstance(m, Emit)] == [
        f"w{i}" for i in range(300)] * 2


def test_the_host_and_the_runner_share_the_frame_format():
    frame = runner.encode_frame([{"command": "sync"}])
    assert frame[0] == runner.MAGIC and int.from_bytes(frame[1:5], "big") == len(frame) - 5


# -- which protocol a ShellSpout/ShellBolt task gets --------------------------------------
class Collected:
    """A task's collector: what the component emitted."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def emit(self, values: Any, stream: str = "default") -> None:
        self.values.append(list(values))


@pytest.mark.parametrize(("kwargs", "conf", "framed"), [
    ({}, {}, True),
    ({"protocol": "json"}, {}, False),
    ({}, {"jstormpy.multilang.protocol": "json"}, False),  # a streamparse config's way
    ({"conf": {"jstormpy.multilang.protocol": "json"}}, {}, False),
    ({"protocol": "json", "conf": {"jstormpy.multilang.protocol": "auto"}}, {}, True),
])
def test_a_streamparse_command_runs_in_the_runner_unless_json_is_asked_for(
        tmp_path, kwargs, conf, framed):
    from jstormpy.api.component import TopologyContext, bind_task
    from jstormpy.multilang import ShellSpout

    spout = ShellSpout([sys.executable, "-m", "streamparse.run", "keys_spout.KeysSpout"],
                       outputs=("seq", "key"), cwd=str(COMPONENTS),
                       env={"KEYS_ARGS": f"{tmp_path} 6"}, **kwargs)
    collected = Collected()
    bind_task(spout, collected, None)  # type: ignore[arg-type]
    spout.open({"guarantee": "exactly_once", **conf},
               TopologyContext(topology=f"t-{tmp_path.name}", component="keys", task_id=1,
                               task_index=0, worker_id=0, component_tasks={"keys": (1,)}))
    try:
        proc = spout._proc
        assert proc is not None and isinstance(proc, FrameProcess) == framed
        assert (RUNNER in proc.command) == framed
        for _ in range(10):
            if len(collected.values) == 6:
                break
            spout.next_tuple()
    finally:
        spout.close()
    assert collected.values == [[k, f"k{k}"] for k in range(6)]


# -- the host routing a run of emits ------------------------------------------------------
def routed(protocol: str, words: list[str]) -> tuple[dict[int, list[Any]], str | None]:
    """``words`` through a ShellBolt of PairBolt with a real fields route to two tasks:
    the rows each target got, in order, and the error that stopped it (if one did)."""
    from jstormpy.api.batch import Batch
    from jstormpy.api.component import TopologyContext, bind_task
    from jstormpy.api.errors import TopologyError
    from jstormpy.runtime.routing import OutputCollector, Route

    got: dict[int, list[Any]] = {3: [], 4: []}

    def send(dst: int, item: Any) -> None:
        got[dst].extend(item[3])

    outputs = ("word", "n")
    route = Route("fields", "default", "next", [3, 4], 2, send, 4, (0,))
    collector = OutputCollector(2, "pairs", {"default": [route]}, [3, 4], send,
                                streams={"default": outputs})
    bolt = ShellBolt(sparse("PairBolt"), outputs=outputs, cwd=str(COMPONENTS),
                     protocol=protocol)
    bind_task(bolt, collector, None)
    bolt.prepare({}, TopologyContext(topology="t", component="pairs", task_id=2,
                                     task_index=0, worker_id=0,
                                     component_tasks={"pairs": (2,)}))
    error = None
    try:
        for k in range(0, len(words), 7):
            bolt.execute_batch(Batch([(w,) for w in words[k:k + 7]], {"line": 0}, "src"))
        bolt.on_inputs_finished()
        collector.flush()
    except TopologyError as exc:
        error = str(exc)
        collector.flush()
    finally:
        bolt.cleanup()
    return got, error


def test_a_run_of_emits_reaches_each_target_as_single_emits_would():
    words = [f"w{k % 13}" + "x" * (k % 3) for k in range(60)]
    frames, error = routed("auto", words)
    assert error is None
    assert routed("json", words) == (frames, None)  # emit by emit under JSON
    assert sorted(map(tuple, frames[3] + frames[4])) == sorted((w, len(w)) for w in words)
    assert frames[3] and frames[4]


def test_an_emit_that_does_not_fit_its_stream_fails_as_a_single_emit_would():
    words = ["a", "bb", "ccc", "bad", "dddd"]
    frames, error = routed("auto", words)
    assert error is not None and "component 'pairs' emitted 1 value(s) ['bad']" in error
    assert routed("json", words) == (frames, error)
    assert sorted(map(tuple, frames[3] + frames[4])) == [("a", 1), ("bb", 2), ("ccc", 3)]


def test_a_bolt_exits_as_pystorms_loop_does_when_the_host_closes_its_stdin():
    """The end of input is pystorm's StormWentAwayError under both protocols: the same
    exit status (2, "parent Storm process went away"), no traceback on stderr."""
    def exit_and_stderr(protocol: str) -> tuple[int, str]:
        proc = start(protocol, "ParityBolt")
        try:
            proc.send_encoded(proc.encode_tuples(1, "src", "default", 9, [("plain", "ab")]))
            until(proc, acked({"1"}))
            proc.stdin.close()
            code = proc.proc.wait(10.0)
            return code, str(proc.failure("its stdin closed"))  # (its stderr's last lines)
        finally:
            proc.close(2.0)

    (frames_code, frames_err), (json_code, _) = exit_and_stderr("frames"), exit_and_stderr("json")
    assert frames_code == json_code == 2
    assert "Traceback" not in frames_err


def test_a_shell_bolt_keeps_several_frames_of_tuples_in_the_subprocess(tmp_path):
    """By default up to 4096 tuples are out before the task waits for answers: a bolt
    that answers only at a tick holds three received batches of 512 at once (the
    subprocess works on while the host routes what it answered)."""
    from jstormpy.api.batch import Batch
    from jstormpy.api.component import TopologyContext, bind_task

    most = tmp_path / "most"
    bolt = ShellBolt([sys.executable, str(COMPONENTS.parent / "multilang_components"
                                          / "tick_batching_bolt.py"), str(most)],
                     outputs=("seq", "key"), tick_tuple_freq_s=0.5)
    collected = Collected()
    bind_task(bolt, collected, None)  # type: ignore[arg-type]
    bolt.prepare({}, TopologyContext(topology="t", component="held", task_id=2,
                                     task_index=0, worker_id=0,
                                     component_tasks={"held": (2,)}))
    try:
        for k in range(3):
            bolt.execute_batch(Batch([(512 * k + i, "k") for i in range(512)],
                                     {"seq": 0, "key": 1}, "src"))
        bolt.on_inputs_finished()
    finally:
        bolt.cleanup()
    assert sorted(v[0] for v in collected.values) == list(range(1536))
    assert int(most.read_text()) == 1536
