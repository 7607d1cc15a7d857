"""How a run ended is kept in its run directory (``final_status.json``), and two threads
of a launcher may write it at once: ``handle.wait()`` seeing the run end while
``handle.kill()`` stops it (a CI run lost a chaos scenario when one writer renamed the
other's temporary file away and ``kill()`` raised FileNotFoundError)."""

from __future__ import annotations

import json
import threading

import pytest

from jstormpy.api.failure import FINAL_STATUS_FILE
from jstormpy.deploy.local import write_final_status

WRITERS = 4
WRITES = 100


def test_writers_at_once_never_fail_and_leave_one_whole_status(tmp_path):
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        start.wait()
        try:
            for i in range(WRITES):
                write_final_status(tmp_path, {"state": "killed", "writer": n, "i": i,
                                              "pad": "x" * 4096})
        except BaseException as exc:  # reported below, with the writer that raised it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = json.loads((tmp_path / FINAL_STATUS_FILE).read_text())
    assert final["state"] == "killed" and final["i"] == WRITES - 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [FINAL_STATUS_FILE]  # no temp left


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    with pytest.raises(TypeError):
        write_final_status(tmp_path, {"state": "killed", "bad": object()})
    assert list(tmp_path.iterdir()) == []
