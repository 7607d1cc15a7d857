"""describe_failure: what handle.wait() raises and jstorm run prints for a failed topology."""

from __future__ import annotations

from jstormpy.api.failure import TRACEBACK_LINES, TUPLE_CHARS, describe_failure


def test_long_tuple_and_traceback_are_cut_and_everything_is_named() -> None:
    trace = "Traceback (most recent call last):\n" + "".join(
        f'  File "/home/me/topo.py", line {i}, in execute\n' for i in range(100)) + \
        "ValueError: bad record 1234\n"
    long_tuple = "Tuple(src:1/default [" + "x" * 5000 + "])"
    status = {"state": "failed", "plan": {"7": 1}, "failure": {
        "reason": "deterministic error: ...", "restarts": 1,
        "restart_strategy": "fixed-delay: at most 3 restarts, 0 ms apart",
        "logs": ["/runs/t/logs/worker-1.log"],
        "error": {"task": 7, "component": "parse", "message": "ValueError: bad record 1234",
                  "traceback": trace, "tuple": long_tuple}}}
    text = describe_failure("t", status)
    assert "component: parse (task 7, worker 1)" in text
    assert "error:     ValueError: bad record 1234" in text
    tuple_line = next(line for line in text.splitlines() if line.startswith("  tuple:"))
    assert len(tuple_line) < TUPLE_CHARS + 40 and f"({len(long_tuple)} chars)" in tuple_line
    assert 'File "/home/me/topo.py", line 99, in execute' in text
    assert len(text.splitlines()) <= 7 + TRACEBACK_LINES
    assert "restarts:  1 (fixed-delay" in text and "worker-1.log" in text


def test_without_a_failure_record_the_last_error_is_given() -> None:
    status = {"state": "killed", "errors": [{"message": "boom"}]}
    assert describe_failure("t", status) == "topology 't' is killed (last error: boom)"
