"""jstormpy/temp_dirs.py: a process's temporary directories go when it exits, and when it is
killed, at the next directory of the same kind made on the host; a live process's stay."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile

from jstormpy.temp_dirs import OWNER_PREFIX, process_temp_dir, sweep_abandoned

MAKER = """
import sys
from jstormpy.temp_dirs import process_temp_dir
paths = [process_temp_dir(sys.argv[1]) for _ in range(int(sys.argv[2]))]
print(" ".join(paths), flush=True)
sys.stdin.readline()  # until the test closes stdin (or kills this process)
"""


def start_maker(prefix: str, count: int = 1) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen([sys.executable, "-c", MAKER, prefix, str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"the maker exited with {proc.wait()}"
    return proc, line.split()


def prefix() -> str:
    return f"jstorm-test-temp-dirs-{secrets.token_hex(4)}-"


def test_a_killed_processs_directories_go_with_the_next_one_made() -> None:
    kind = prefix()
    proc, dirs = start_maker(kind, 3)
    lock = os.path.join(dirs[0], ".owner.lock")
    owner = next(os.path.join(tempfile.gettempdir(), n)
                 for n in os.listdir(tempfile.gettempdir()) if n.startswith(OWNER_PREFIX)
                 and os.path.samefile(os.path.join(tempfile.gettempdir(), n), lock))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert all(os.path.isdir(d) for d in dirs), "a killed process ran no exit handler"
    mine = process_temp_dir(kind)  # removed at this process's exit
    assert not any(os.path.exists(d) for d in dirs), dirs
    assert os.path.isdir(mine)
    # the killed process's own lock file goes with the next process that makes one
    subprocess.run([sys.executable, "-c", "from jstormpy.temp_dirs import "
                    f"process_temp_dir; process_temp_dir({prefix()!r})"],
                   timeout=60, check=True)
    assert not os.path.exists(owner), owner


def test_a_live_processs_directories_stay_and_go_at_its_exit() -> None:
    kind = prefix()
    proc, dirs = start_maker(kind, 2)
    assert sweep_abandoned(kind) == []
    other = process_temp_dir(kind)  # sweeps too
    assert all(os.path.isdir(d) for d in dirs)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert not any(os.path.exists(d) for d in dirs), dirs
    assert os.path.isdir(other)


def test_a_directory_without_a_lock_file_is_left_alone() -> None:
    kind = prefix()
    foreign = tempfile.mkdtemp(prefix=kind)
    try:
        assert sweep_abandoned(kind) == []
        process_temp_dir(kind)
        assert os.path.isdir(foreign)
    finally:
        os.rmdir(foreign)


def test_many_directories_hold_one_open_file() -> None:
    code = ("import os; from jstormpy.temp_dirs import process_temp_dir\n"
            f"process_temp_dir({prefix()!r}); before = len(os.listdir('/proc/self/fd'))\n"
            f"[process_temp_dir({prefix()!r}) for _ in range(200)]\n"
            "print(len(os.listdir('/proc/self/fd')) - before)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert int(done.stdout) == 0, done.stdout


def test_the_exit_handler_removes_a_directory_and_the_lock_file() -> None:
    kind = prefix()
    code = ("import os, tempfile; from jstormpy.temp_dirs import process_temp_dir\n"
            f"d = process_temp_dir({kind!r})\n"
            "print(d, os.stat(os.path.join(d, '.owner.lock')).st_ino)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    path = done.stdout.split()[0]
    inode = int(done.stdout.split()[1])
    assert not os.path.exists(path)
    left = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(OWNER_PREFIX)
            and os.stat(os.path.join(tempfile.gettempdir(), n)).st_ino == inode]
    assert left == []


def test_without_flock_or_hard_links_a_directory_still_comes_and_goes_at_exit() -> None:
    for broken in ("os.link", "fcntl.flock"):
        kind = prefix()
        code = ("import fcntl, os\n"
                "def refuse(*args): raise OSError(38, 'not supported here')\n"
                f"{broken} = refuse\n"
                "from jstormpy.temp_dirs import process_temp_dir\n"
                f"d = process_temp_dir({kind!r})\n"
                "assert os.path.isdir(d) and not os.path.exists(os.path.join(d, '.owner.lock'))\n"
                "print(d)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, (broken, done.stderr[-2000:])
        assert not os.path.exists(done.stdout.strip()), broken
