"""MasterCore's split (issue 37): the checkpoint side and the quiescent operations (rescale,
gray release) use the rest of the Topology Master only through a narrow protocol.

``master/checkpoints.py`` reaches the core through ``CheckpointHost``; ``quiescent.py``,
``rescale.py`` and ``upgrade.py`` through ``OperationHost``. Neither imports the core, and
every member they use of their host is one the protocol declares: a new reach into the core
(``core.sessions``, ``core.errors``, ...) fails here with its name, whether or not mypy ran.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jstormpy.master.checkpoints import CheckpointHost
from jstormpy.master.operation_host import OperationHost, RescaleView, UpgradeView

ROOT = Path(__file__).resolve().parents[2]

SEAMS = {
    "master/checkpoints.py": ("host", CheckpointHost),
    "master/quiescent.py": ("core", OperationHost),
    "master/rescale.py": ("core", OperationHost),
    "master/upgrade.py": ("core", OperationHost),
}
OTHER_OPERATION = {  # what each quiescent operation uses of the other, through the host
    "master/rescale.py": ("upgrade", UpgradeView),
    "master/upgrade.py": ("rescale", RescaleView),
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


@pytest.mark.parametrize("protocol", [CheckpointHost, OperationHost, UpgradeView, RescaleView],
                         ids=lambda p: p.__name__)
def test_the_protocol_declares_only_what_its_modules_use(protocol: type) -> None:
    """Narrow: a member no module uses any longer goes from the protocol too."""
    used: set[str] = set()
    for module, (host, declared_by) in [*SEAMS.items(), *OTHER_OPERATION.items()]:
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


def test_a_planted_reach_into_the_core_is_named(tmp_path: Path) -> None:
    """The check above finds a member the protocol does not declare."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f(core):\n    core.lock\n    core.sessions.clear()\n")
    used = _host_members(str(planted), "core")
    assert set(used) - _declared(OperationHost) == {"sessions"}
