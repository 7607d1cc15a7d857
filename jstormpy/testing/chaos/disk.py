"""The ``disk_full`` fault: the sink's output directory runs out of space or becomes
unwritable for a while (used by :mod:`jstormpy.testing.chaos.scenarios`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path


class FullDisk:
    """The sink's output directory, made full (tmpfs + ballast, as root) or unwritable."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.mounted = False
        out.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0 and shutil.which("mount"):
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(out)],
                                  capture_output=True, check=False)
            self.mounted = done.returncode == 0

    def fill(self) -> str:
        """Fill it (or make it read-only); returns what was done."""
        if not self.mounted:
            for d in [self.out, *(p for p in self.out.rglob("*") if p.is_dir())]:
                d.chmod(0o555)
            return f"{self.out} made read-only"
        written = 0
        with contextlib.suppress(OSError), open(self.out / ".ballast", "wb") as fh:
            block = b"\0" * (1 << 20)
            while True:
                fh.write(block)
                fh.flush()
                written += len(block)
        return f"{self.out} filled (tmpfs, {written >> 20} MiB ballast; ENOSPC)"

    def free(self) -> str:
        """Undo :meth:`fill`; returns what was done."""
        if not self.mounted:
            for d in [self.out, *(p for p in self.out.rglob("*") if p.is_dir())]:
                d.chmod(0o755)
            return f"{self.out} writable again"
        with contextlib.suppress(FileNotFoundError):
            (self.out / ".ballast").unlink()
        return f"{self.out} has space again"

    def release(self) -> None:
        """Unmount the tmpfs, keeping its files in place (idempotent)."""
        if not self.mounted:
            return
        keep = self.out.with_name(self.out.name + ".kept")
        with contextlib.suppress(OSError):
            shutil.copytree(self.out, keep)
        subprocess.run(["umount", "-l", str(self.out)], capture_output=True, check=False)
        self.mounted = False
        shutil.rmtree(self.out, ignore_errors=True)
        if keep.exists():
            keep.rename(self.out)
