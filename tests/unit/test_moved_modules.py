"""Old module paths of the modules that moved into rooms still import, as the same
module: pickles written before the move (snapshots, savepoints, a run's pickled
topology) name classes by their old path."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

from jstormpy.api.config import Config
from jstormpy.api.topology import Fields
from jstormpy.moved_modules import MOVED


def _old_pickle(obj: object, old_module: str) -> bytes:
    """A pickle of ``obj`` naming its class under ``old_module``, as code before the move
    wrote it (protocol 2: a class is a ``GLOBAL`` opcode, ``module\nname\n``, which can
    be edited without re-framing)."""
    data = pickle.dumps(obj, protocol=2)
    new = f"c{type(obj).__module__}\n".encode()
    assert new in data
    return data.replace(new, f"c{old_module}\n".encode())


# old paths built from parts: the move's rewrite script must not rewrite them
OLD_TOPOLOGY = "jstormpy" + ".topology"
OLD_CONFIG = "jstormpy" + ".config"


def test_a_pickle_naming_the_old_module_path_loads_the_same_class() -> None:
    old = _old_pickle(Fields(["word", "count"]), OLD_TOPOLOGY)
    assert OLD_TOPOLOGY.encode() in old and Fields.__module__.encode() not in old
    loaded = pickle.loads(old)
    assert type(loaded) is Fields and loaded == ("word", "count")
    conf = pickle.loads(_old_pickle(Config(workers=3), OLD_CONFIG))
    assert type(conf) is Config and conf.workers == 3


def test_every_old_path_is_the_new_module() -> None:
    """Checked in a fresh interpreter, importing each old path first: no test imported
    the module before, and the real module keeps its own ``__spec__``."""
    code = ("import importlib, sys\n"
            "import jstormpy\n"
            f"for old, new in {sorted(MOVED.items())!r}:\n"
            "    via_old = importlib.import_module(old)\n"
            "    assert via_old is importlib.import_module(new), (old, new)\n"
            "    assert via_old.__name__ == new and via_old.__spec__.name == new, old\n"
            "    assert sys.modules[old] is sys.modules[new]\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stderr


def test_a_pickle_naming_the_split_dataflow_bolts_module_loads_the_same_class() -> None:
    """``jstormpy.dataflow.bolts`` became several modules: a bolt pickled under the old
    path (a run's pickled topology written before the split) loads as the new class."""
    from jstormpy.dataflow.fusion import Step, StepKind
    from jstormpy.dataflow.keyed import ReduceBolt
    from jstormpy.dataflow.records import Wire

    old_path = "jstormpy.dataflow" + ".bolts"
    bolt = ReduceBolt({("src", "default"): Wire.KEYED}, max)
    loaded = pickle.loads(_old_pickle(bolt, old_path))
    assert type(loaded) is ReduceBolt and loaded.fn is max
    step = pickle.loads(_old_pickle(Step(StepKind.MAP, len), old_path))
    assert type(step) is Step and step.fn is len
    old = importlib.import_module(old_path)
    from jstormpy.dataflow.joins import JoinBolt

    assert old._JoinBolt is JoinBolt and old.ReduceBolt is ReduceBolt


def test_an_unknown_module_still_fails_to_import() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("jstormpy.no_such_module")
