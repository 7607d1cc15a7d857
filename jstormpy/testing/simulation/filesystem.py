"""A simulated filesystem: the real ``file://`` backend's port in ``jstorm simulate``.

:class:`SimDisk` is the disk's contents (directories and files, in memory).
:class:`SimFilesystem` is the :class:`~jstormpy.state_backends.filesystem.Filesystem`
port over it that the real :class:`~jstormpy.state_backends.file.FileBackend` runs on, so
the simulator tests the backend production runs (temp file, fsync, rename or hard link,
listing, retention, shared files), not a copy (issue 37). Given a fault plan it injects
the seed's storage faults where a real filesystem shows them:

- ``disk_full``: creating a temp file, writing to it or making a directory fails (ENOSPC);
- ``write_error``: renaming a snapshot's temp file into place fails (EIO), or, half the
  time, the rename lands and only its answer is an error (EIO from the directory's fsync
  after it): a write that reports an error but lands;
- ``partial_write``: the rename of a snapshot lands a torn file (a power loss with the
  rename durable before the data) and reports EIO; reading it is a checksum error;
- ``metadata_write_error``: the hard link of a commit point fails (EIO);
- ``meta_write_error``: the rename of a ``meta/`` object fails (EIO), or lands and errs;
- ``read_error``: a read fails (EIO);
- ``listing_error``: a listing fails (EMFILE);
- ``listing_short``: a listing of the root misses the newest checkpoints, complete or not
  (a store that lags): every listing at the same simulated moment misses the same ones.

Without a plan it is the operator's (and the judge's) view of the same disk: no faults.
Slow storage and metadata timeouts are a call's, not the filesystem's: the simulated
storage (``storage.py``) delays the call or answers its caller before the write lands.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

from jstormpy.state_backends.base import METADATA_NAME
from jstormpy.state_backends.filesystem import Walk
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.judging import Step
from jstormpy.testing.simulation.world import World


class SimDisk:
    """Directories and files, by absolute path; ``/`` exists."""

    def __init__(self) -> None:
        self.dirs: dict[str, set[str]] = {"/": set()}
        """Each directory's entries (names of files and directories)."""
        self.files: dict[str, bytearray] = {}
        self.temps = 0


class _SimTempFile:
    def __init__(self, fs: SimFilesystem, path: Path) -> None:
        self.fs, self.path = fs, path

    def write(self, data: bytes) -> None:
        self.fs.check_space(self.path)
        self.fs.disk.files[str(self.path)] += data

    def sync(self) -> None:
        return None  # no power loss is simulated: written is durable

    def close(self) -> None:
        return None


class SimFilesystem:
    """The port: :class:`SimDisk` with the faults of ``plan`` (None: no faults)."""

    def __init__(self, disk: SimDisk, world: World, plan: FaultPlan | None,
                 root: str) -> None:
        self.disk, self.world, self.plan, self.root = disk, world, plan, root
        self._lag: tuple[float, int | None] | None = None

    # -- faults --------------------------------------------------------------------------------
    def _hit(self, fault: Fault) -> bool:
        return self.plan is not None and self.plan.hit(self.world, fault)

    def check_space(self, path: Path) -> None:
        plan = self.plan
        if plan is None or plan.disk_full is None:
            return
        start, end = plan.disk_full
        if start <= self.world.now < end:
            self.world.reach(Step.WRITE_ON_FULL_DISK)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

    def _rename_fault(self, target: Path) -> str:
        """What happens to a rename into ``target``: "" (it lands), "fail", "lands"
        (lands, then an error) or "torn" (a torn file lands, then an error)."""
        name = target.name
        if name.endswith(".snap"):
            if self._hit(Fault.PARTIAL_WRITE):
                return "torn"
            if self._hit(Fault.WRITE_ERROR):
                return "lands" if self.world.chance(0.5) else "fail"
        elif target.parent.name == "meta" and self._hit(Fault.META_WRITE_ERROR):
            return "lands" if self.world.chance(0.5) else "fail"
        return ""

    # -- the port --------------------------------------------------------------------------------
    def create_temp(self, directory: Path) -> _SimTempFile:
        self.check_space(directory)
        d = str(directory)
        if d not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", d)
        self.disk.temps += 1
        path = directory / f".tmp-{self.disk.temps}.part"
        self.disk.files[str(path)] = bytearray()
        self.disk.dirs[d].add(path.name)
        return _SimTempFile(self, path)

    def link(self, source: Path, target: Path) -> None:
        if self.exists(target):
            raise FileExistsError(errno.EEXIST, "File exists", str(target))
        if target.name == METADATA_NAME and self._hit(Fault.METADATA_WRITE_ERROR):
            raise OSError(errno.EIO, "Input/output error", str(target))
        self._put(target, self._read(source))

    def replace(self, source: Path, target: Path) -> None:
        fault = self._rename_fault(target)
        if fault == "fail":
            raise OSError(errno.EIO, "Input/output error", str(target))
        data = self._read(source)
        self.unlink(source)
        if fault == "torn":
            data = data[:len(data) // 2]
        if str(target) in self.disk.files:
            del self.disk.files[str(target)]
        self._put(target, data)
        if fault:
            raise OSError(errno.EIO, "Input/output error (after the rename)", str(target))

    def unlink(self, path: Path) -> None:
        p = str(path)
        if p not in self.disk.files:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", p)
        del self.disk.files[p]
        self.disk.dirs[str(path.parent)].discard(path.name)

    def fsync_dir(self, path: Path) -> None:
        if str(path) not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))

    def read_bytes(self, path: Path) -> bytes:
        if self._hit(Fault.READ_ERROR):
            raise OSError(errno.EIO, "Input/output error", str(path))
        return self._read(path)

    def exists(self, path: Path) -> bool:
        return str(path) in self.disk.files or str(path) in self.disk.dirs

    def is_dir(self, path: Path) -> bool:
        if not self.exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return str(path) in self.disk.dirs

    def mkdir(self, path: Path) -> None:
        self.check_space(path)
        if self.exists(path):
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
        parent = str(path.parent)
        if parent not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", parent)
        self.disk.dirs[parent].add(path.name)
        self.disk.dirs[str(path)] = set()

    def rmdir(self, path: Path) -> None:
        p = str(path)
        if p not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", p)
        if self.disk.dirs[p]:
            raise OSError(errno.ENOTEMPTY, "Directory not empty", p)
        del self.disk.dirs[p]
        self.disk.dirs[str(path.parent)].discard(path.name)

    def walk(self, top: Path, onerror: Callable[[OSError], None]) -> Walk:
        if self._hit(Fault.LISTING_ERROR):
            onerror(OSError(errno.EMFILE, "Too many open files", str(top)))
            return
        hidden = self._lagging() if str(top) == self.root else None
        pending = [str(top)]
        while pending:
            d = pending.pop(0)
            if d not in self.disk.dirs:
                if d == str(top):
                    onerror(FileNotFoundError(errno.ENOENT, "No such file or directory", d))
                continue
            names = sorted(self.disk.dirs[d])
            subdirs = [n for n in names if f"{d}/{n}".replace("//", "/") in self.disk.dirs]
            if hidden is not None and d == str(top):
                subdirs = [n for n in subdirs if not _checkpoint_at_or_above(n, hidden)]
            files = [n for n in names if n not in subdirs and
                     f"{d}/{n}".replace("//", "/") in self.disk.files]
            yield d, subdirs, files
            pending[:0] = [f"{d}/{n}".replace("//", "/") for n in subdirs]

    # -- helpers -----------------------------------------------------------------------------
    def _lagging(self) -> int | None:
        """listing_short: the lowest checkpoint id a root listing at this moment misses."""
        if self._lag is not None and self._lag[0] == self.world.now:
            return self._lag[1]
        completed = sorted(
            int(n[4:]) for n in self.disk.dirs.get(self.root, ())
            if n.startswith("chk-") and f"{self.root}/{n}/{METADATA_NAME}" in self.disk.files)
        cut = None
        if completed and self._hit(Fault.LISTING_SHORT):
            cut = completed[self.world.rng.randrange(len(completed))]
        self._lag = (self.world.now, cut)
        return cut

    def _read(self, path: Path) -> bytes:
        p = str(path)
        if p not in self.disk.files:
            if p in self.disk.dirs:
                raise IsADirectoryError(errno.EISDIR, "Is a directory", p)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", p)
        return bytes(self.disk.files[p])

    def _put(self, path: Path, data: bytes) -> None:
        parent = str(path.parent)
        if parent not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", parent)
        self.disk.files[str(path)] = bytearray(data)
        self.disk.dirs[parent].add(path.name)


def _checkpoint_at_or_above(name: str, cut: int) -> bool:
    if not name.startswith("chk-"):
        return False
    try:
        return int(name[4:]) >= cut
    except ValueError:
        return False
