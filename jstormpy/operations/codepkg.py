"""Versioned code packages for gray release (DESIGN §9, ``docs/upgrade.md``).

A *code package* is a zip (or a directory, or a single ``.py`` file, which are zipped)
holding a topology file that defines ``topology`` (a Topology or TopologyBuilder), plus
any modules it imports. It is identified by the sha256 of the zip bytes.

* :func:`build_package` turns a path into ``(zip bytes, entry file)`` (CLI side).
* :class:`PackageStore` keeps the packages of one topology in the TM's run directory and
  labels them ``v2``, ``v3``, ... (``v1`` is the cloudpickled topology of the submit).
* :func:`load_package_topology` unpacks a package (once per digest under
  ``$JSTORM_RUN_DIR/code/unpacked``; else into a temp dir removed at exit), puts it on
  ``sys.path`` and imports the entry file (worker side; the TM never imports user code).
* :func:`inspect_topology` / ``python -m jstormpy.operations.codepkg inspect`` describe a version's
  wiring and state versions as JSON; the TM runs it in a child process.
* :func:`check_compatible` compares two such descriptions; :func:`migrate_snapshot`
  applies ``migrate_state`` when a restored snapshot has another ``state_version``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

from jstormpy.api.errors import JStormError
from jstormpy.operations.package_archive import (
    check_package_archive,
    extract_package,
    open_package_zip,
)
from jstormpy.temp_dirs import process_temp_dir

UPGRADE_EXIT_CODE = 75
"""Exit code of a worker told to restart on other code (the launcher restarts it)."""

DEFAULT_ENTRY = "topology.py"
_MAX_PACKAGE_BYTES = 128 << 20
_RUN_DIR_ENV = "JSTORM_RUN_DIR"  # = jstormpy.runtime.taskops.RUN_DIR_ENV (set by launchers)


def digest_of(data: bytes) -> str:
    """sha256 hex digest of a package."""
    return hashlib.sha256(data).hexdigest()


def build_package(path: str | os.PathLike[str], entry: str = "") -> tuple[bytes, str]:
    """Zip bytes and entry file name of the code at ``path``.

    ``path`` is a ``.zip`` (its entry is ``entry``, else ``topology.py``, else its only
    top-level ``.py``), a directory (zipped, same entry rule) or one ``.py`` file.
    """
    p = Path(path)
    if p.is_file() and p.suffix == ".py":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.write(p, p.name)
        return buf.getvalue(), entry or p.name
    if p.is_dir():
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(p.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts:
                    zf.write(f, f.relative_to(p).as_posix())
        data = buf.getvalue()
    elif p.is_file():
        data = p.read_bytes()
    else:
        raise JStormError(f"code package {str(path)!r} does not exist")
    return data, _pick_entry(data, entry, str(path))


def _pick_entry(data: bytes, entry: str, where: str) -> str:
    try:
        with open_package_zip(data, where) as zf:
            names = [i.filename for i in check_package_archive(zf, where)]
    except zipfile.BadZipFile as exc:
        raise JStormError(f"code package {where!r} is not a zip file: {exc}") from None
    if entry:
        if entry not in names:
            raise JStormError(f"code package {where!r} has no {entry!r} (has: {names[:10]})")
        return entry
    if DEFAULT_ENTRY in names:
        return DEFAULT_ENTRY
    top = [n for n in names if n.endswith(".py") and "/" not in n]
    if len(top) == 1:
        return top[0]
    raise JStormError(f"code package {where!r}: cannot tell which file defines `topology` "
                      f"(no {DEFAULT_ENTRY}; top-level .py files: {top}); pass --entry")


class PackageStore:
    """The code versions of one topology, kept in ``run_dir/code``."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(run_dir) / "code"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index_path = self.dir / "versions.json"
        self.lock = threading.Lock()
        self.versions: dict[str, dict[str, Any]] = {}
        if self.index_path.exists():
            self.versions = json.loads(self.index_path.read_text())

    def _save(self) -> None:
        tmp = self.index_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.versions, indent=1))
        os.replace(tmp, self.index_path)

    def add(self, data: bytes, entry: str) -> str:
        """Store a package (deduplicated by digest); returns its version label."""
        if len(data) > _MAX_PACKAGE_BYTES:
            raise JStormError(f"code package of {len(data)} bytes exceeds "
                              f"{_MAX_PACKAGE_BYTES} bytes")
        _pick_entry(data, entry, "upload")
        digest = digest_of(data)
        with self.lock:
            for label, info in self.versions.items():
                if info["digest"] == digest and info["entry"] == entry:
                    return label
            label = f"v{max((int(v[1:]) for v in self.versions), default=1) + 1}"
            path = self.dir / f"{label}-{digest[:12]}.zip"
            path.write_bytes(data)
            self.versions[label] = {"digest": digest, "entry": entry, "file": path.name,
                                    "size": len(data), "stored_at": time.time()}
            self._save()
            return label

    def get(self, label: str) -> tuple[bytes, str, str] | None:
        """(zip bytes, entry, digest) of ``label``; None for v1 (the pickled topology)."""
        info = self.versions.get(label)
        if info is None:
            return None
        data = (self.dir / info["file"]).read_bytes()
        if digest_of(data) != info["digest"]:
            raise JStormError(f"code package {label} is corrupt (digest mismatch)")
        return data, info["entry"], info["digest"]

    def remove(self, label: str) -> None:
        """Forget a version (a refused upload); it must not be in use."""
        with self.lock:
            info = self.versions.pop(label, None)
            if info is not None:
                (self.dir / info["file"]).unlink(missing_ok=True)
                self._save()

    def set_info(self, label: str, key: str, value: Any) -> None:
        """Cache something about a version (e.g. its inspected description)."""
        with self.lock:
            if label in self.versions:
                self.versions[label][key] = value
                self._save()


# -- loading (worker side) --------------------------------------------------------------------
def _unpacked(data: bytes, label: str, unpack_dir: str | os.PathLike[str] | None) -> Path:
    """The directory holding ``data`` unpacked: one copy per digest under ``unpack_dir``
    (default ``$JSTORM_RUN_DIR/code/unpacked``), reused by every later start; outside a
    run dir a temp dir removed when the process exits."""
    base = unpack_dir or (Path(os.environ[_RUN_DIR_ENV]) / "code" / "unpacked"
                          if os.environ.get(_RUN_DIR_ENV) else None)
    if base is None:
        root = Path(process_temp_dir(f"jstorm-code-{label}-"))
        _extract(data, label, root)
        return root
    root = Path(base) / digest_of(data)[:24]
    if root.is_dir():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    try:
        _extract(data, label, tmp)
        os.replace(tmp, root)  # atomic: a concurrent start sees all of it or nothing
    except OSError:
        if not root.is_dir():  # not "another process got there first"
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _extract(data: bytes, label: str, root: Path) -> None:
    with open_package_zip(data, label) as zf:
        extract_package(zf, root, label)  # no traversal, links or bombs


def load_package_topology(data: bytes, entry: str, digest: str, label: str,
                          unpack_dir: str | os.PathLike[str] | None = None) -> Any:
    """Unpack a package (see :func:`_unpacked`), import its entry file and return its
    built ``topology``."""
    from jstormpy.api.topology import Topology, TopologyBuilder

    if digest and digest_of(data) != digest:
        raise JStormError(f"code package {label}: digest mismatch (transfer corrupted?)")
    root = _unpacked(data, label, unpack_dir)
    sys.path.insert(0, str(root))
    file = root / entry
    modname = f"jstorm_code_{label}_{Path(entry).stem}".replace("-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(modname, file)
    if spec is None or spec.loader is None:
        raise JStormError(f"code package {label}: cannot import {entry!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    spec.loader.exec_module(module)
    topo = getattr(module, "topology", None)
    if isinstance(topo, TopologyBuilder):
        topo = topo.build()
    if not isinstance(topo, Topology):
        raise JStormError(f"code package {label}: {entry} must define `topology` (a Topology "
                          f"or TopologyBuilder); found {type(topo).__name__}")
    return topo


# -- describing and comparing versions ---------------------------------------------------------
def describe(topology: Any) -> dict[str, Any]:
    """Wiring (``Topology.descriptor()``) plus each component's state version."""
    state = {}
    for spec in topology.components.values():
        cls = spec.cls
        state[spec.name] = {"state_version": getattr(cls, "state_version", None),
                            "migrate": callable(getattr(cls, "migrate_state", None))}
    return {"descriptor": topology.descriptor(), "state": state}


def inspect_topology(package: str = "", entry: str = "", pickle_path: str = "",
                     timeout_s: float = 60.0) -> dict[str, Any]:
    """Describe a version in a child process (user code never runs in the caller)."""
    args = [sys.executable, "-m", "jstormpy.operations.codepkg", "inspect"]
    args += ["--pickle", pickle_path] if pickle_path else ["--package", package, "--entry", entry]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        raise JStormError(f"loading the code timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        raise JStormError("the new code does not load: " + " | ".join(tail))
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def parallelism_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, int]:
    """Component -> the parallelism ``new`` declares, where it differs from ``old``'s."""
    was = {c["name"]: c["parallelism"] for c in old["descriptor"]["components"]}
    return {c["name"]: int(c["parallelism"]) for c in new["descriptor"]["components"]
            if c["name"] in was and was[c["name"]] != c["parallelism"]}


def check_compatible(old: dict[str, Any], new: dict[str, Any],
                     allow_parallelism: bool = False) -> list[str]:
    """Why ``new`` cannot replace ``old`` in a running topology ([] = compatible).

    The wiring must be the same (components, kinds, parallelism unless
    ``allow_parallelism``: a rescaling upgrade, sinks, subscriptions, and each component's
    task ids, which follow the declaration order);
    every stream must still exist and new fields may only be appended (tasks of both
    versions exchange tuples, positions of existing fields must not move); a changed
    ``state_version`` needs ``migrate_state`` in the new class.
    """
    problems: list[str] = []
    od, nd = old["descriptor"], new["descriptor"]
    if od["name"] != nd["name"]:
        problems.append(f"topology name {od['name']!r} -> {nd['name']!r}")
    oc = {c["name"]: c for c in od["components"]}
    nc = {c["name"]: c for c in nd["components"]}
    for name in sorted(set(oc) - set(nc)):
        problems.append(f"component {name!r} is missing in the new code")
    for name in sorted(set(nc) - set(oc)):
        problems.append(f"component {name!r} is new (adding components needs a resubmit)")
    for name in [n for n in oc if n in nc]:
        a, b = oc[name], nc[name]
        for key in ("kind", "parallelism", "is_sink"):
            if a[key] != b[key] and not (key == "parallelism" and allow_parallelism):
                problems.append(f"component {name!r}: {key} {a[key]!r} -> {b[key]!r}")
        if not allow_parallelism and a["kind"] == b["kind"] \
                and a["parallelism"] == b["parallelism"] \
                and a.get("tasks") is not None and a.get("tasks") != b.get("tasks"):
            # old and new workers route by task id and state is kept per task id
            problems.append(f"component {name!r}: task ids {a['tasks']} -> {b.get('tasks')} "
                            "(the components are declared in another order; declare them "
                            "in the running order)")
        if a["inputs"] != b["inputs"]:
            problems.append(f"component {name!r}: subscriptions changed {a['inputs']} -> "
                            f"{b['inputs']}")
        for stream, fields in a["streams"].items():
            nf = b["streams"].get(stream)
            if nf is None:
                problems.append(f"component {name!r}: stream {stream!r} is missing in the "
                                "new code")
            elif list(nf[:len(fields)]) != list(fields):
                problems.append(f"component {name!r} stream {stream!r}: fields {fields} -> "
                                f"{nf}: existing fields must keep their names and positions "
                                "(new fields may only be appended)")
        so = old["state"].get(name, {}).get("state_version")
        sn = new["state"].get(name, {}).get("state_version")
        if so != sn and not new["state"].get(name, {}).get("migrate"):
            problems.append(f"component {name!r}: state_version {so!r} -> {sn!r} but the new "
                            "class defines no migrate_state(old_version, snapshot)")
    return problems


def migrate_snapshot(component: Any, snap: dict[str, Any]) -> dict[str, Any]:
    """Bring a restored snapshot to the component's ``state_version`` (worker side).

    ``migrate_state(old_version, {"states": ..., "custom": ...})`` returns the new
    ``{"states": ..., "custom": ...}``; other snapshot keys are engine-owned and kept.
    """
    want = getattr(type(component), "state_version", None)
    have = snap.get("state_version")
    if want == have:
        return snap
    migrate = getattr(component, "migrate_state", None)
    if not callable(migrate):
        raise JStormError(f"{type(component).__name__}: snapshot has state_version {have!r}, "
                          f"the class wants {want!r} and defines no migrate_state")
    user = {k: snap[k] for k in ("states", "custom") if k in snap}
    out = migrate(have, user)
    if not isinstance(out, dict):
        raise JStormError(f"{type(component).__name__}.migrate_state must return a dict with "
                          "'states' (and 'custom' for a custom snapshot)")
    merged = {**snap, **out, "state_version": want}
    return merged


def main(argv: list[str] | None = None) -> int:
    """``python -m jstormpy.operations.codepkg inspect (--package ZIP --entry F |
    --pickle PKL)``."""
    parser = argparse.ArgumentParser(prog="jstormpy.operations.codepkg")
    sub = parser.add_subparsers(dest="command", required=True)
    ins = sub.add_parser("inspect")
    ins.add_argument("--package", default="")
    ins.add_argument("--entry", default="")
    ins.add_argument("--pickle", default="")
    args = parser.parse_args(argv)
    if args.pickle:
        import cloudpickle

        topo = cloudpickle.loads(Path(args.pickle).read_bytes())
    else:
        data = Path(args.package).read_bytes()
        topo = load_package_topology(data, args.entry, "", "inspect")
    print(json.dumps(describe(topo), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
