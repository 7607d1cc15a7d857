"""``title_threads`` (jstormpy/proctitle.py): a thread started after it carries its Python
name as its OS name, which ``top -H`` and ``ps -L`` read from ``/proc``."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    """``code`` in a fresh interpreter (the hook is process-wide): its stdout."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()


SHOW = """
    import threading

    def show():
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            print(f.read().strip())

    {setup}
    for name in ("task-3-count", "a-thread-name-longer-than-fifteen"):
        t = threading.Thread(target=show, name=name)
        t.start()
        t.join()
"""


def test_threads_started_after_it_carry_their_names():
    got = _run(SHOW.replace("{setup}", "from jstormpy.proctitle import title_threads\n"
                                       "    title_threads()"))
    # Linux keeps 15 bytes of a thread's name
    assert got.splitlines() == ["task-3-count", "a-thread-name-l"]


def test_without_it_threads_keep_the_process_name():
    got = _run(SHOW.replace("{setup}", "pass"))
    assert "task-3-count" not in got.splitlines()


def test_the_hook_leaves_the_thread_unprofiled():
    got = _run("""
        import sys, threading
        from jstormpy.proctitle import title_threads
        title_threads()
        seen = []
        t = threading.Thread(target=lambda: seen.append(sys.getprofile()), name="x")
        t.start(); t.join()
        print(seen[0])
    """)
    assert got == "None"
