"""MasterCore's split (issue 37): membership, recovery, the checkpoint side, status and the
quiescent operations (rescale, gray release) use the rest of the Topology Master only
through a narrow protocol.

``master/membership.py`` reaches the core through ``MembershipHost``, ``recovery.py``
through ``RecoveryHost``, ``checkpoints.py`` through ``CheckpointHost``, ``status.py``
through ``StatusHost``; ``quiescent.py``, ``rescale.py`` and ``upgrade.py`` through
``OperationHost``. None imports the core or another part, and every member they use of
their host is one the protocol declares: a new reach into the core (``core.sessions``,
``core.errors``, ...) fails here with its name, whether or not mypy ran.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jstormpy.master.checkpoints import CheckpointHost, MasterCheckpoints
from jstormpy.master.core import MasterCore
from jstormpy.master.membership import Membership, MembershipHost
from jstormpy.master.operation_host import OperationHost, RescaleView, UpgradeView
from jstormpy.master.recovery import MasterRecovery, RecoveryCheckpoints, RecoveryHost
from jstormpy.master.status import MasterStatus, Reports, StatusHost

ROOT = Path(__file__).resolve().parents[2]

SEAMS = {
    "master/membership.py": ("host", MembershipHost),
    "master/recovery.py": ("host", RecoveryHost),
    "master/checkpoints.py": ("host", CheckpointHost),
    "master/status.py": ("host", StatusHost),
    "master/quiescent.py": ("core", OperationHost),
    "master/rescale.py": ("core", OperationHost),
    "master/upgrade.py": ("core", OperationHost),
}
OTHER_OPERATION = {  # what each quiescent operation uses of the other, through the host
    "master/rescale.py": ("upgrade", UpgradeView),
    "master/upgrade.py": ("rescale", RescaleView),
}
VIEWS = [  # what a part uses of another part, reached through its host
    ("master/recovery.py", "checkpointing", RecoveryCheckpoints),
    ("master/status.py", "backpressure", Reports),
    ("master/status.py", "upgrade", Reports),
    ("master/status.py", "rescale", Reports),
]
PARTS = {  # the core's parts: each module's class, holding its own state
    "master/membership.py": Membership,
    "master/recovery.py": MasterRecovery,
    "master/checkpoints.py": MasterCheckpoints,
    "master/status.py": MasterStatus,
}


def _declared(protocol: type) -> set[str]:
    """The members a protocol declares (its own body: properties, methods, attributes)."""
    names = set(vars(protocol)) | set(vars(protocol).get("__annotations__", {}))
    return {name for name in names if not name.startswith("_")}


def _host_members(module: str, host: str) -> dict[str, int]:
    """Every ``X`` in ``host.X`` / ``self.host.X`` / ``<anything>.host.X`` of ``module``,
    with the line it is first used on."""
    tree = ast.parse((ROOT / module).read_text())
    used: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == host) or \
                (isinstance(owner, ast.Attribute) and owner.attr == host):
            used.setdefault(node.attr, node.lineno)
    return used


@pytest.mark.parametrize("module", sorted(SEAMS))
def test_every_member_used_of_the_host_is_declared_by_its_protocol(module: str) -> None:
    host, protocol = SEAMS[module]
    used = _host_members(module, host)
    assert used, f"{module} no longer names its host {host!r}: update this test"
    undeclared = {name: line for name, line in used.items() if name not in _declared(protocol)}
    assert not undeclared, (
        f"{module} reaches past {protocol.__name__} into the core: "
        + ", ".join(f"{host}.{name} (line {line})" for name, line in sorted(undeclared.items()))
        + f"; use a member {protocol.__name__} declares, or declare a narrow one there")


@pytest.mark.parametrize("module", sorted(OTHER_OPERATION))
def test_an_operation_uses_only_what_its_view_of_the_other_declares(module: str) -> None:
    other, view = OTHER_OPERATION[module]
    used = _host_members(module, other)
    undeclared = {name: line for name, line in used.items() if name not in _declared(view)}
    assert not undeclared, (
        f"{module} reaches past {view.__name__}: "
        + ", ".join(f"{other}.{name} (line {line})" for name, line in sorted(undeclared.items())))


@pytest.mark.parametrize(("module", "name", "view"), VIEWS,
                         ids=[f"{m}:{n}" for m, n, _ in VIEWS])
def test_a_part_uses_only_what_its_view_of_another_declares(module: str, name: str,
                                                            view: type) -> None:
    used = _host_members(module, name)
    assert used, f"{module} no longer names {name!r}: update this test"
    undeclared = {n: line for n, line in used.items() if n not in _declared(view)}
    assert not undeclared, (
        f"{module} reaches past {view.__name__}: "
        + ", ".join(f"{name}.{n} (line {line})" for n, line in sorted(undeclared.items())))


@pytest.mark.parametrize("protocol", [MembershipHost, RecoveryHost, CheckpointHost, StatusHost,
                                      OperationHost, UpgradeView, RescaleView,
                                      RecoveryCheckpoints, Reports],
                         ids=lambda p: p.__name__)
def test_the_protocol_declares_only_what_its_modules_use(protocol: type) -> None:
    """Narrow: a member no module uses any longer goes from the protocol too."""
    used: set[str] = set()
    for module, (host, declared_by) in [*SEAMS.items(), *OTHER_OPERATION.items(),
                                        *((m, (n, v)) for m, n, v in VIEWS)]:
        if declared_by is protocol:
            used |= set(_host_members(module, host))
    assert not _declared(protocol) - used, f"{protocol.__name__} declares unused members"


@pytest.mark.parametrize("module", sorted(SEAMS))
def test_the_host_is_never_aliased_under_another_name(module: str) -> None:
    """``c = self.core`` would hide ``c.sessions`` from the checks above."""
    host = SEAMS[module][0]
    tree = ast.parse((ROOT / module).read_text())
    aliases = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        pairs = [(t, v) for target, value in [(node.targets[0], node.value)]
                 for t, v in (zip(target.elts, value.elts, strict=False)
                              if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                              else [(target, value)])]
        for target, value in pairs:
            named = target.id if isinstance(target, ast.Name) else \
                target.attr if isinstance(target, ast.Attribute) else None
            is_host = (isinstance(value, ast.Name) and value.id == host) or \
                (isinstance(value, ast.Attribute) and value.attr == host)
            if is_host and named != host:
                aliases.append(f"{ast.unparse(target)} (line {node.lineno})")
    assert not aliases, f"{module} names its host {host!r} otherwise: {', '.join(aliases)}"


def _reaches_host(node: ast.expr, host: str) -> bool:
    """``node`` is the host or something reached through it (``core.upgrade``, ...)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute) and node.attr == host:
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id == host


@pytest.mark.parametrize("module", sorted(SEAMS))
def test_the_module_never_assigns_to_its_host(module: str) -> None:
    """The host's state (and the other operation's, reached through it) changes through
    their methods (``adopt_layout``, ``layout_rescaled``, ...), never by a write from
    outside."""
    host = SEAMS[module][0]
    tree = ast.parse((ROOT / module).read_text())
    writes = [f"{ast.unparse(n)} (line {n.lineno})" for n in ast.walk(tree)
              if isinstance(n, ast.Attribute | ast.Subscript)
              and isinstance(n.ctx, ast.Store | ast.Del) and _reaches_host(n.value, host)]
    assert not writes, f"{module} writes its host's state: {', '.join(writes)}"


@pytest.mark.parametrize("module", sorted(SEAMS))
def test_the_module_never_imports_the_core(module: str) -> None:
    """Not even for a type: the protocol is its whole view of the Topology Master."""
    tree = ast.parse((ROOT / module).read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert "jstormpy.master.core" not in imported


@pytest.mark.parametrize("module", sorted(PARTS))
def test_a_part_never_imports_another_part(module: str) -> None:
    """One part asks another for something only through the core's narrow methods (e.g.
    membership's ``host.worker_failed``, which the recovery performs): no part holds or
    imports another."""
    tree = ast.parse((ROOT / module).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    others = {"jstormpy." + other.removesuffix(".py").replace("/", ".")
              for other in PARTS if other != module}
    assert not imported & others, f"{module} imports {sorted(imported & others)}"


def _assigned_on_self(tree: ast.AST, cls: str) -> dict[str, int]:
    """Every ``X`` of ``self.X = ...`` in the methods of class ``cls``."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for sub in ast.walk(node):
                targets = sub.targets if isinstance(sub, ast.Assign) else \
                    [sub.target] if isinstance(sub, ast.AnnAssign | ast.AugAssign) else []
                for target in targets:
                    for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                                and t.value.id == "self":
                            found.setdefault(t.attr, t.lineno)
    return found


@pytest.mark.parametrize("module", sorted(set(PARTS) - {"master/checkpoints.py"}))
def test_the_core_keeps_none_of_a_parts_state(module: str) -> None:
    """A part's state (the sessions, the generation, the errors, ...) lives in the part
    alone: the core reads it through the part, never keeps or writes a copy of its own.
    (``MasterCheckpoints`` is handed the TM's name, backend and BackendIO when built.)"""
    part = ast.parse((ROOT / module).read_text())
    owned = set(_assigned_on_self(part, PARTS[module].__name__)) - {"host"}
    assert owned, f"{module}'s {PARTS[module].__name__} keeps no state: update this test"
    core = _assigned_on_self(ast.parse((ROOT / "master/core.py").read_text()),
                             MasterCore.__name__)
    shared = {name: line for name, line in core.items() if name in owned}
    assert not shared, (f"master/core.py keeps state of {PARTS[module].__name__}: "
                        + ", ".join(f"self.{n} (line {line})" for n, line in sorted(shared.items())))


def test_a_planted_reach_into_the_core_is_named(tmp_path: Path) -> None:
    """The check above finds a member the protocol does not declare."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f(core):\n    core.lock\n    core.sessions.clear()\n")
    used = _host_members(str(planted), "core")
    assert set(used) - _declared(OperationHost) == {"sessions"}
