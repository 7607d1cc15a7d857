"""Every commit point through one path (issue 35): rescale and savepoint import too.

A checkpoint's commit point (``_metadata``) is created, never replaced; it names the
Topology Master epoch that wrote it and is fenced like a periodic checkpoint's; its id
comes from the coordinator's reservation, and the completed floor is stored after it.
Before, a rescale wrote its commit point with an overwriting ``write_metadata`` (no epoch,
no fence, no floor, its bad id kept in memory only) and a savepoint import overwrote
whatever commit point held the id it picked. These tests run the real ``MasterCore``,
``RescaleController`` and ``import_savepoint`` on memory, file, hdfs and hbase stores
(the contract suite's ``env``), two Topology Masters sharing one store where it matters.
"""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jstormpy import Config, pickling
from jstormpy.api.errors import BackendTimeoutError, JStormError
from jstormpy.leader_lease import LeaderLease
from jstormpy.master.core import MasterCore
from jstormpy.operations.savepoints import import_savepoint, write_savepoint
from jstormpy.run_identity import take_over_run
from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.state_backends.base import METADATA_NAME, checkpoint_prefix
from tests.state_backends.test_contract import Env, env  # noqa: F401 - the fixture
from tests.unit.test_checkpoint_ids_record import checkpoint, prepare_all, recover
from tests.unit.test_rescale_commit import ack_all, register, start, topo, wait_until
from tests.unit.test_savepoints import completed_checkpoint
from tests.unit.test_savepoints import topo as wordcount

ROOT = Path(__file__).resolve().parents[2]


class CommitPointHook(StateBackend):
    """A real store (any backend) seen through one client whose write of checkpoint
    ``target``'s ``_metadata`` is held up: ``gate`` (wait, then land: slow storage),
    ``late`` (answer with a timeout, nothing written yet: :meth:`land` writes it later)
    or ``before`` (a callable run first: another writer gets there)."""

    def __init__(self, inner: StateBackend) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.target: int | None = None
        self.mode = "gate"
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.before: Any = None
        self.held: tuple[Any, str, bytes] | None = None

    def _write(self, write: Any, key: str, data: bytes) -> None:
        if self.before is not None and key.endswith("/" + METADATA_NAME):
            hook, self.before = self.before, None
            hook(int(key[4:14]))
        if self.target is None or key != checkpoint_prefix(self.target) + METADATA_NAME:
            write(key, data)
            return
        self.entered.set()
        if self.mode == "late":
            self.held = (write, key, data)
            raise BackendTimeoutError(f"{key}: no answer in 20 s")
        assert self.gate.wait(30), "the test never let the write land"
        write(key, data)

    def land(self) -> None:
        assert self.held is not None, "no write was held"
        write, key, data = self.held
        write(key, data)

    def put_object(self, key: str, data: bytes) -> None:
        self._write(self.inner.put_object, key, data)

    def create_object(self, key: str, data: bytes) -> None:
        self._write(self.inner.create_object, key, data)

    def get_object(self, key: str) -> bytes:
        return self.inner.get_object(key)

    def get_segment(self, key: str, groups: set[int] | None = None) -> bytes:
        return self.inner.get_segment(key, groups)

    def list_objects(self, prefix: str) -> list[str]:
        return self.inner.list_objects(prefix)

    def delete_objects(self, prefix: str) -> None:
        self.inner.delete_objects(prefix)


def run_dir(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    run.mkdir()
    (run / "topology.pkl").write_bytes(pickling.dumps(topo()))
    return run


def master(backend: StateBackend, run: Path, resume: bool = False,
           lease: Path | None = None) -> MasterCore:
    """A Topology Master of the rescale test topology (2 workers), as its launcher starts
    it; with ``lease``: an ``--ha`` leader (a valid lease, the run taken over)."""
    config = Config(workers=2, restart_strategy="fixed-delay:attempts=100,delay_ms=0",
                    checkpoint_interval_ms=3_600_000, checkpoints_retained=3,
                    tolerable_failed_checkpoints=10)
    core = MasterCore("rc", config, topo().descriptor(), backend, resume=resume)
    core.rescale.attach_run_dir(run)
    core.upgrade.attach_run_dir(run)
    if lease is not None:
        core.lease = LeaderLease(lease)
        core.lease.renew(time.monotonic(), 60.0)
        core.run = take_over_run(backend, resume)
    return core


def rescale_until_its_commit_point(core: MasterCore, hook: CommitPointHook) -> int:
    """Rescale count 2 -> 3 up to the rescaled checkpoint's commit point (held by
    ``hook``); returns the quiescent checkpoint."""
    core.rescale.request({"count": 3})
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "quiescing", "quiescing")
    quiescent = core.rescale.checkpoint_id
    assert quiescent is not None
    hook.target = core.checkpoints.next_id  # the rescaled checkpoint m
    ack_all(core, quiescent)
    assert core.backend_io.wait_idle(10)
    core.tick()  # the quiescent checkpoint completed: redistribution starts
    assert hook.entered.wait(15), "the rescale never wrote its commit point"
    return quiescent


def test_a_deposed_master_finishing_a_rescale_commits_nothing(env: Env,  # noqa: F811
                                                              tmp_path: Path) -> None:
    """The leader's lease runs out while its rescale's commit point is being written; the
    standby takes over and restores the quiescent checkpoint; then the write lands. The
    deposed leader must not adopt the new layout nor restart its workers, and the standby
    must never restore the late checkpoint (its sinks rolled back past it): it restores
    the quiescent one at every recovery, in the old layout, and never reuses the id."""
    hook = CommitPointHook(env.backend)
    old = master(hook, run_dir(tmp_path, "old"), lease=tmp_path / "old.lease")
    old_sessions = [register(old, w) for w in (0, 1)]
    start(old, old_sessions)
    quiescent = rescale_until_its_commit_point(old, hook)
    late = hook.target
    assert late is not None
    assert old.lease is not None
    old.lease.revoke()  # its launcher lost ZooKeeper; the standby leads

    new_run = run_dir(tmp_path, "new")
    new = master(env.reopen(), new_run, resume=True, lease=tmp_path / "new.lease")
    assert new.run is not None and new.run.epoch == 2
    sessions, restored = prepare_all(new, old.generation)
    assert restored == quiescent

    hook.gate.set()  # the deposed leader's commit point lands now
    wait_until(lambda: (old.tick(), old.rescale.phase)[1] in ("idle", "restarting"),
               "the deposed leader's rescale ended")
    assert old.backend_io.wait_idle(10)
    assert old.fenced, "the deposed leader went on with its rescale after losing its lease"
    assert old.rescale.phase == "idle", "the deposed leader adopted the rescaled layout"
    assert not (tmp_path / "old" / "rescale.json").exists()

    store = env.reopen()
    assert late in store.list_completed()  # it landed, stamped with the deposed epoch
    assert store.read_metadata(late)["run"]["epoch"] == 1
    _, restored = recover(new, sessions)
    assert restored == quiescent, (
        f"the standby restored checkpoint {restored}, the deposed leader's rescale: its "
        f"sinks were rolled back to {quiescent} when it took over")
    assert checkpoint(new) > late, "the standby handed out the deposed leader's id again"
    assert new.backend_io.wait_idle(10)

    third = master(env.reopen(), run_dir(tmp_path, "third"), resume=True,
                   lease=tmp_path / "third.lease")
    _, restored = prepare_all(third, new.generation)
    assert restored > late and restored in store.list_completed()


def test_a_rescale_commit_point_that_times_out_and_lands_late_is_never_restored(
        env: Env, tmp_path: Path) -> None:  # noqa: F811
    """The rescaled checkpoint's commit point times out (the rescale aborts, the old
    layout runs on) and lands afterwards. A Topology Master restarted on the same store
    must not restore it: its snapshots are the new layout's (or were discarded)."""
    hook = CommitPointHook(env.backend)
    hook.mode = "late"
    run = run_dir(tmp_path, "run")
    core = master(hook, run)
    sessions = [register(core, w) for w in (0, 1)]
    start(core, sessions)
    quiescent = rescale_until_its_commit_point(core, hook)
    late = hook.target
    assert late is not None
    wait_until(lambda: (core.tick(), core.rescale.phase)[1] == "idle", "aborted")
    assert core.backend_io.wait_idle(10)
    assert "cannot commit the rescaled checkpoint" in core.rescale.error
    assert not (run / "rescale.json").exists()
    hook.land()  # the write that timed out reaches the store now
    assert late in env.reopen().list_completed()

    resumed = master(env.reopen(), run, resume=True)  # the TM was restarted
    again = [register(resumed, w, core.generation) for w in (0, 1)]
    handles = start(resumed, again)
    assert set(handles) == {1, 2, 3}, f"restored another layout's tasks: {sorted(handles)}"
    assert all(checkpoint_prefix(quiescent) in h for h in handles.values()), (
        f"the restarted Topology Master restored {handles}, not the quiescent checkpoint "
        f"{quiescent}: the rescale's commit point {late} timed out and landed late")
    cid = resumed.trigger_checkpoint(force=True)
    assert cid is not None and cid > late, "the id of the late commit point was reused"


def test_a_savepoint_import_never_replaces_a_commit_point(env: Env,  # noqa: F811
                                                          tmp_path: Path) -> None:
    """While a savepoint is imported into a store, a Topology Master still running on it
    lands a commit point under the id the import chose: the import fails, naming the
    checkpoint, and the commit point already there stays as it was."""
    t = wordcount(2)
    source = completed_checkpoint(tmp_path / "run1", t)
    sp = write_savepoint(open_backend(f"file://{tmp_path / 'run1'}"), source, t,
                         f"file://{tmp_path / 'sp'}")
    hook = CommitPointHook(env.backend)
    theirs = {"generation": 3, "tasks": {}, "run": {"job_id": "running", "epoch": 4}}
    taken: list[int] = []

    def running_master_commits(cid: int) -> None:
        taken.append(cid)
        env.reopen().create_metadata(cid, theirs)

    hook.before = running_master_commits
    with pytest.raises(JStormError, match=r"commit point .*exists") as raised:
        import_savepoint(sp, wordcount(3), hook)
    assert taken, "the import wrote no commit point"
    assert str(taken[0]) in str(raised.value)
    meta = env.reopen().read_metadata(taken[0])
    assert meta["run"] == theirs["run"] and "from_savepoint" not in meta, (
        "the savepoint import replaced the running Topology Master's commit point")


# -- the coordinator's state changes only through its events -------------------------------
PROTECTED = {"next_id", "id_floor", "bad", "last_trigger", "layout_floor", "completed_floor",
             "epoch_starts", "ids_reserved"}
PROTECTED |= {"_" + name for name in PROTECTED}
MUTATORS = {"add", "discard", "remove", "pop", "popitem", "update", "clear", "setdefault",
            "difference_update", "intersection_update", "symmetric_difference_update",
            "__setitem__", "__delitem__"}
OWNER = "master/coordinator.py"
OWN_STATE = {
    # (module, class, attribute): a class's own field that shares a name, not the
    # coordinator's state
    ("master/restore_plan.py", "RestorePlan", "bad"):
        "one recovery's copy, given to it when the recovery starts",
    ("master/restore_plan.py", "RestorePlan", "completed_floor"): "the same",
    ("master/restore_plan.py", "RestorePlan", "layout_floor"): "the same",
    ("master/restore_plan.py", "RestorePlan", "epoch_starts"): "the same",
    ("jstormpy/runtime/executor.py", "TaskExecutor", "id_floor"):
        "a task's first transaction id, from its Prepare",
    ("deploy/forkserver.py", "ForkServer", "_next_id"): "request ids of the fork server",
}
PACKAGES = ("jstormpy", "master", "barrier", "window", "state_backends", "deploy")


def protected_writes(tree: ast.Module, rel: str) -> list[tuple[str, int, str, str]]:
    """Every write into a protected attribute in one module: (module, line, class, attr)."""
    out: list[tuple[str, int, str, str]] = []

    def written(node: ast.expr) -> ast.Attribute | None:
        while isinstance(node, ast.Subscript):
            node = node.value
        return node if isinstance(node, ast.Attribute) and node.attr in PROTECTED else None

    def visit(node: ast.AST, cls: str) -> None:
        if isinstance(node, ast.ClassDef):
            cls = node.name
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATORS:
            targets = [node.func.value]
        for target in targets:
            for sub in ast.walk(target) if isinstance(target, ast.Tuple) else [target]:
                attr = written(sub) if isinstance(sub, ast.expr) else None
                if attr is None:
                    continue
                own = isinstance(attr.value, ast.Name) and attr.value.id == "self"
                key = (rel, cls, attr.attr)
                if not (own and key in OWN_STATE):
                    out.append((rel, node.lineno, cls, attr.attr))  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            visit(child, cls)

    visit(tree, "")
    return out


def test_only_the_coordinator_changes_its_ids_floors_and_bad_checkpoints() -> None:
    found: list[tuple[str, int, str, str]] = []
    own_seen: set[tuple[str, str, str]] = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == OWNER or "/proto/" in rel:
                continue
            tree = ast.parse(path.read_text(), rel)
            found += protected_writes(tree, rel)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    for sub in ast.walk(node):
                        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                                and sub.value.id == "self":
                            own_seen.add((rel, node.name, sub.attr))
    assert not found, (
        "the checkpoint coordinator's ids, floors, bad checkpoints and trigger time change "
        f"only through its events ({OWNER}); written elsewhere: "
        + "; ".join(f"{m}:{line} ({c or 'module'}) .{a}" for m, line, c, a in found))
    stale = sorted(set(OWN_STATE) - own_seen)
    assert not stale, f"OWN_STATE names fields that no longer exist: {stale}"


def test_a_restarted_master_never_adopts_a_rescale_whose_commit_point_is_bad(
        env: Env, tmp_path: Path) -> None:  # noqa: F811
    """The rescale's commit point timed out, the TM stored ``m`` as bad and died before it
    dropped the staged files; then the write landed. At its restart the TM finds the
    pending rescale and ``m`` listed: it must keep the old layout (``m`` is never restored,
    so adopting it would leave the new layout with nothing to restore)."""
    from jstormpy.state_backends.base import CHECKPOINT_IDS_META
    from master.coordinator import CheckpointCoordinator
    from master.rescale import PENDING, finish_pending_rescale

    run = run_dir(tmp_path, "run")
    (run / "topology.pkl.rescale").write_bytes(b"new layout")
    (run / PENDING).write_text('{"checkpoint": 7, "layout_generation": 3}')
    ids = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=1.0,
                                tolerable_timeouts=0)
    ids.mark_bad(7)
    env.backend.put_meta(CHECKPOINT_IDS_META, ids.ids_record())
    env.backend.create_metadata(7, {"generation": 2, "tasks": {}})  # landed late
    before = (run / "topology.pkl").read_bytes()
    assert finish_pending_rescale(run, env.reopen()) is False
    assert (run / "topology.pkl").read_bytes() == before
    assert not (run / "rescale.json").exists() and not (run / PENDING).exists()
