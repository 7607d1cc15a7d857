"""``jstorm testing webhdfs|hbase`` as documented: start, print where, stop on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import happybase


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "jstormpy.cli.main", "testing", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the server says where it is
    assert line, f"server exited: {proc.communicate(timeout=10)[1]}"
    return proc, line


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_webhdfs_without_root_serves_a_printed_temp_dir() -> None:
    proc, line = _start("webhdfs", "--port", "0")
    try:
        m = re.search(r"on (http://\S+) serving (\S+)", line)
        assert m, line
        url, root = m.group(1), Path(m.group(2))
        assert root.is_dir()
        (root / "hello.txt").write_text("hi")
        with urllib.request.urlopen(f"{url}/webhdfs/v1/?op=LISTSTATUS", timeout=10) as r:
            assert b"hello.txt" in r.read()
    finally:
        _stop(proc)


def test_testing_usage_names_the_jstorm_command() -> None:
    out = subprocess.run([sys.executable, "-m", "jstormpy.cli.main", "testing", "webhdfs", "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.startswith("usage: jstorm testing webhdfs")


def test_hbase_keeps_tables_after_sigterm(tmp_path: Path) -> None:
    proc, line = _start("hbase", "--port", "0", "--data-dir", str(tmp_path))
    try:
        port = int(line.rsplit(":", 1)[1])
        conn = happybase.Connection("127.0.0.1", port=port, autoconnect=True)
        conn.create_table("t", {"cf": {}})
        conn.table("t").put(b"row", {b"cf:a": b"1"})
        conn.close()
    finally:
        _stop(proc)
    proc, line = _start("hbase", "--port", "0", "--data-dir", str(tmp_path))
    try:
        port = int(line.rsplit(":", 1)[1])
        conn = happybase.Connection("127.0.0.1", port=port, autoconnect=True)
        assert conn.table("t").row(b"row") == {b"cf:a": b"1"}
        conn.close()
    finally:
        _stop(proc)
