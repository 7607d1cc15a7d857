"""An unbounded keyed topology for the operations tests (runs until killed)."""

from __future__ import annotations

from pathlib import Path

from jstormpy import Bolt, FileSink, SequenceSpout, TopologyBuilder


class Tally(Bolt):
    """Per key: running count (managed state); logs a DEBUG line per tuple."""

    outputs = ("key", "seq", "count")

    def prepare(self, conf, context):
        self.counts = self.state("counts")

    def execute(self, tup):
        key = tup["key"]
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if n % 50 == 0:
            self.log.debug("key %s reached %d", key, n)
        self.emit((key, tup["seq"], n))


def keyed(out: Path, name: str = "opsdemo", rate: float = 3000.0):
    """spout (2 tasks) -> tally (2 tasks, fields grouping) -> sink (1 task)."""
    b = TopologyBuilder(name)
    b.set_spout("events", SequenceSpout(keys=20, per_key=10**9, batch=50, rate_per_s=rate),
                parallelism=2)
    b.set_bolt("tally", Tally, parallelism=2).fields_grouping("events", ("key",))
    b.set_bolt("sink", FileSink(str(out), format="jsonl"), parallelism=1).global_grouping("tally")
    return b.build()


def wait_for(cond, timeout: float, what: str, poll: float = 0.1):
    """Poll ``cond()`` until it returns a truthy value (returned) or fail after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except Exception as exc:  # the server may be starting
            last = exc
        else:
            if last:
                return last
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def ui_base(handle, timeout: float = 30.0) -> str:
    """The web UI base URL of a locally launched topology (waits for ``ui.port``)."""
    port_file = handle.run_dir / "ui.port"
    port = wait_for(lambda: port_file.exists() and int(port_file.read_text()), timeout,
                    "ui.port")
    return f"http://127.0.0.1:{port}"


def get_json(url: str):
    import json
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def get_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()
