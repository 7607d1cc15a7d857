"""The ``"files"`` sink of the simulator: the real
:class:`~jstormpy.connectors.sinks.FileSink` over a simulated directory tree (issue 37).

FileSink's commit protocol calls its filesystem port (``connectors/sink_fs.py``) for
every step: an in-progress file opened exclusively, pre-commit's rename into the
incarnation's staging directory, commit's hard link to the part file's final name,
abort, a new incarnation's take-over of older incarnations' staged files, ``recover``'s
discarding and keeping of staged files, and the launcher's fresh-run and savepoint
checks. :class:`SimSinkFiles` is that port over a
:class:`~jstormpy.testing.simulation.filesystem.SimDisk` the simulated external system
(:class:`~jstormpy.testing.simulation.outputs.SimOutput`) holds, so the simulator runs the
sink production runs, not a model of it.

What readers see is what FileSink published: each link (or rename) of a part file into
the output directory is recorded in :attr:`SimOutput.published`, and
:meth:`SimOutput.committed_rows` reads those files back.

The fault plan's ``sink_down`` holds the external system down; as for the other kinds the
simulated task asks the system before each protocol step (``SimOutput.check_up``), and the
step fails with :class:`~jstormpy.api.errors.SinkUnavailableError`, before any of its I/O.

``write_error`` strikes the sink's two renames as it strikes a snapshot's: pre-commit's
rename of the in-progress file into staging, and commit's link of the staged file to its
final name, fail (EIO), or, half the time, land and still report EIO (a write that reports
an error but lands). FileSink raises its :class:`~jstormpy.api.errors.SinkError`; the task
fails and the Topology Master recovers, as in production.
"""

from __future__ import annotations

import errno
from typing import Any

from jstormpy.api.component import TopologyContext
from jstormpy.connectors.file_parts import PART_RE
from jstormpy.connectors.sinks import FileSink
from jstormpy.run_identity import RunIdentity
from jstormpy.testing.simulation.faults import Fault, FaultPlan
from jstormpy.testing.simulation.filesystem import SimDisk
from jstormpy.testing.simulation.outputs import Row, SimOutput
from jstormpy.testing.simulation.sink_input import quiet_log, stage_rows
from jstormpy.testing.simulation.world import World

DIRECTORY = "/out"
"""The output directory every run of the simulated job writes to."""
TOPOLOGY = "simulated"

_QUIET = quiet_log("jstormpy.testing.simulation.file_sink")
"""The sinks' task log: a sweep runs thousands of recoveries, each would log."""


class _SimFile:
    """An open file on the :class:`SimDisk`: appends land at once (no page cache)."""

    def __init__(self, disk: SimDisk, path: str) -> None:
        self.disk, self.path = disk, path

    def write(self, data: bytes, /) -> int:
        self.disk.files[self.path] += data
        return len(data)

    def flush(self) -> None:
        return None

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        return None


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _name(path: str) -> str:
    return path.rsplit("/", 1)[1]


class SimSinkFiles:
    """FileSink's :class:`~jstormpy.connectors.sink_fs.SinkFilesystem` port over the
    simulated external system's disk (``output.disk``)."""

    def __init__(self, output: SimOutput, world: World | None = None,
                 plan: FaultPlan | None = None) -> None:
        self.output = output
        self.disk: SimDisk = output.disk
        self.world, self.plan = world, plan

    def _write_fault(self) -> str:
        """``write_error`` on a rename or link: "" (none), "fail" or "lands" (module doc)."""
        if self.world is None or self.plan is None or \
                not self.plan.hit(self.world, Fault.WRITE_ERROR):
            return ""
        return "lands" if self.world.chance(0.5) else "fail"

    # -- the port ------------------------------------------------------------------------------
    def makedirs(self, path: str) -> None:
        if path in self.disk.dirs:
            return
        if path in self.disk.files:
            raise FileExistsError(errno.EEXIST, "File exists", path)
        self.makedirs(_parent(path))
        self._enter(path)
        self.disk.dirs[path] = set()

    def writable(self, path: str) -> bool:
        return path in self.disk.dirs

    def mkdir(self, path: str) -> None:
        if self.exists(path):
            raise FileExistsError(errno.EEXIST, "File exists", path)
        self._enter(path)
        self.disk.dirs[path] = set()

    def listdir(self, path: str) -> list[str]:
        if path not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        return sorted(self.disk.dirs[path])

    def is_dir(self, path: str) -> bool:
        return path in self.disk.dirs

    def is_file(self, path: str) -> bool:
        return path in self.disk.files

    def exists(self, path: str) -> bool:
        return path in self.disk.dirs or path in self.disk.files

    def create(self, path: str) -> _SimFile:
        if self.exists(path):
            raise FileExistsError(errno.EEXIST, "File exists", path)
        self._enter(path)
        self.disk.files[path] = bytearray()
        return _SimFile(self.disk, path)

    def fsync(self, file: Any) -> None:
        return None  # no power loss is simulated: written is durable

    def replace(self, source: str, target: str) -> None:
        fault = self._write_fault() if "/_inprogress/" in source else ""
        if fault == "fail":
            raise OSError(errno.EIO, "Input/output error", target)
        data = self._take(source)
        if target in self.disk.dirs:
            raise IsADirectoryError(errno.EISDIR, "Is a directory", target)
        self._enter(target)
        self.disk.files[target] = data
        self._published(target)
        if fault:
            raise OSError(errno.EIO, "Input/output error (after the rename)", target)

    def rename(self, source: str, target: str) -> None:
        self.replace(source, target)

    def link(self, source: str, target: str) -> None:
        if self.exists(target):
            raise FileExistsError(errno.EEXIST, "File exists", target)
        if source not in self.disk.files:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", source)
        fault = self._write_fault()
        if fault == "fail":
            raise OSError(errno.EIO, "Input/output error", target)
        self._enter(target)
        self.disk.files[target] = bytearray(self.disk.files[source])
        self._published(target)
        if fault:
            raise OSError(errno.EIO, "Input/output error (after the link)", target)

    def unlink(self, path: str) -> None:
        self._take(path)

    def rmdir(self, path: str) -> None:
        if path not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if self.disk.dirs[path]:
            raise OSError(errno.ENOTEMPTY, "Directory not empty", path)
        del self.disk.dirs[path]
        self.disk.dirs[_parent(path)].discard(_name(path))

    def fsync_dir(self, path: str) -> None:
        if path not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)

    # -- helpers ---------------------------------------------------------------------------------
    def _enter(self, path: str) -> None:
        parent = _parent(path)
        if parent not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", parent)
        self.disk.dirs[parent].add(_name(path))

    def _take(self, path: str) -> bytearray:
        if path not in self.disk.files:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        self.disk.dirs[_parent(path)].discard(_name(path))
        return self.disk.files.pop(path)

    def _published(self, path: str) -> None:
        """A part file's name in the output directory: readers see it from now on."""
        if _parent(path) == DIRECTORY and PART_RE.match(_name(path)):
            self.output.published.append(path)


class SimFileSink(FileSink):
    """The real :class:`FileSink` over :class:`SimSinkFiles`; its incarnations' fencing
    tokens are numbered (the real ones are a process id and random: a seed must replay)."""

    def __init__(self, output: SimOutput, world: World | None = None,
                 plan: FaultPlan | None = None) -> None:
        super().__init__(DIRECTORY, format="jsonl")
        self.fs = SimSinkFiles(output, world, plan)
        self.output = output
        self.__dict__["_jstorm_log"] = _QUIET  # as the engine installs the task's log

    def _new_token(self, context: TopologyContext) -> str:
        return f"{next(self.output.incarnations)}-g{context.generation}"

    def stage_rows(self, checkpoint_id: int, rows: list[Row]) -> None:
        """The task's open transaction ``checkpoint_id`` is ``rows``: write them and
        pre-commit (the engine's ``begin``, ``write`` s and ``pre_commit``)."""
        self.output.check_up()
        stage_rows(self, checkpoint_id, rows)

    def commit(self, checkpoint_id: int) -> None:
        """The system is asked first (module doc), then :meth:`FileSink.commit`."""
        self.output.check_up()
        super().commit(checkpoint_id)

    def recover(self, completed_id: int | None) -> None:
        """The system is asked first (module doc), then :meth:`FileSink.recover`."""
        self.output.check_up()
        super().recover(completed_id)


def open_file_sink(output: SimOutput, world: World, plan: FaultPlan, run: RunIdentity,
                   task_id: int, task_index: int, worker_id: int,
                   generation: int) -> SimFileSink:
    """A prepared :class:`SimFileSink` for one task incarnation (``prepare`` takes over the
    staged files of the task's older incarnations, of any run)."""
    sink = SimFileSink(output, world, plan)
    sink.prepare({}, TopologyContext(topology=TOPOLOGY, component="sink", task_id=task_id,
                                     task_index=task_index, worker_id=worker_id,
                                     generation=generation, run=run))
    return sink


def launcher_sink(output: SimOutput) -> FileSink:
    """The sink as the launcher sees it before a run: its checks read the directory."""
    return SimFileSink(output)

