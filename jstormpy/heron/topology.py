"""heronpy topologies, unmodified: a heronpy ``Topology`` class as a jstormpy topology.

``jstorm run FILE`` on a file that imports heronpy runs it as ``__main__`` (so its
``if __name__ == "__main__":`` block runs, as ``heron submit CLUSTER FILE - NAME`` runs it)
with ``sys.argv`` ``[FILE, NAME]`` (NAME: the file's stem), and captures what
``build_and_submit()`` submits; a file that only defines a ``Topology`` subclass (the class
DSL) runs that class. Every component becomes a :class:`HeronSpout` / :class:`HeronBolt`
with its parallelism, config, streams and groupings; the topology's
``topology.reliability.mode`` and ``topology.stateful.checkpoint.interval.seconds`` become
the run's ``Config``.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heronpy.api.api_constants import (
    TOPOLOGY_RELIABILITY_MODE,
    TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS,
    TopologyReliabilityMode,
)
from heronpy.api.component.component_spec import HeronComponentSpec
from heronpy.api.custom_grouping import ICustomGrouping
from heronpy.api.serializer import default_serializer
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping
from heronpy.api.topology import Topology as HeronTopology
from jstormpy.api.errors import TopologyError
from jstormpy.api.topology import CustomStreamGrouping, Fields, Topology, TopologyBuilder
from jstormpy.heron.components import HeronBolt, HeronSpout

GUARANTEES = {TopologyReliabilityMode.ATMOST_ONCE: "at_most_once",
              TopologyReliabilityMode.ATLEAST_ONCE: "at_least_once",
              TopologyReliabilityMode.EFFECTIVELY_ONCE: "exactly_once"}
"""Heron's reliability modes as jstormpy guarantees."""


def _imports(tree: ast.AST, package: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                a.name == package or a.name.startswith(package + ".") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == package or node.module.startswith(package + ".")):
            return True
    return False


def uses_heronpy(path: Path) -> bool:
    """Whether the Python file is a heronpy topology file (read, not run): it imports
    heronpy and not jstormpy (a jstormpy file with heronpy components is a jstormpy file,
    whose ``__main__`` block is its own)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return False  # running it reports the problem
    return _imports(tree, "heronpy") and not _imports(tree, "jstormpy")


def find_heron_topology(namespace: Mapping[str, Any], submitted: list[type]) -> type | None:
    """The heronpy topology a file submitted (``build_and_submit()``) or, failing that,
    the one ``Topology`` subclass it defines; None if neither."""
    if len(submitted) > 1:
        names = ", ".join(getattr(c, "topology_name", c.__name__) for c in submitted)
        raise TopologyError(f"the file submitted {len(submitted)} heronpy topologies ({names}); "
                            "`jstorm run` runs one per file")
    if submitted:
        return submitted[0]
    found = {v for v in namespace.values() if isinstance(v, type)
             and issubclass(v, HeronTopology) and v is not HeronTopology}
    if len(found) > 1:
        names = ", ".join(sorted(c.__name__ for c in found))
        raise TopologyError(f"the file defines {len(found)} heronpy Topology classes ({names}); "
                            "keep one per file (or submit one with build_and_submit())")
    return found.pop() if found else None


def config_from_heron(topology_cls: Any) -> dict[str, Any]:
    """The ``Config`` settings a heronpy topology's config asks for: its reliability mode
    (default: exactly-once when every spout is stateful, else at-least-once) and its
    checkpoint interval."""
    conf = topology_cls.topology_config()
    mode = conf.get(TOPOLOGY_RELIABILITY_MODE)
    settings: dict[str, Any] = {}
    if mode is None:
        spouts = [s for s in topology_cls.specs() if s.is_spout]
        stateful = all(issubclass(s.component_class, StatefulComponent) for s in spouts)
        settings["guarantee"] = "exactly_once" if stateful else "at_least_once"
    elif str(mode) in GUARANTEES:
        settings["guarantee"] = GUARANTEES[str(mode)]
    else:
        raise TopologyError(f"topology {topology_cls.topology_name!r}: "
                            f"{TOPOLOGY_RELIABILITY_MODE} is {mode!r}; one of "
                            f"{', '.join(GUARANTEES)}")
    interval = conf.get(TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS)
    if interval is not None:
        try:
            settings["checkpoint_interval_ms"] = max(1, int(float(interval) * 1000))
        except (TypeError, ValueError):
            raise TopologyError(f"{TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS} must be a "
                                f"number of seconds, not {interval!r}") from None
    return settings


class HeronGrouping(CustomStreamGrouping):
    """A heronpy ``ICustomGrouping`` as a jstormpy custom grouping."""

    def __init__(self, grouping: ICustomGrouping) -> None:
        self.grouping = grouping

    def prepare(self, source: str, stream: str, target_tasks: list[int]) -> None:
        self.grouping.prepare(None, source, stream, list(target_tasks))

    def choose_tasks(self, task_id: int, values: tuple[Any, ...]) -> list[int]:
        return list(self.grouping.choose_tasks(values))


def _custom(serialized: bytes, bolt: str) -> HeronGrouping:
    grouping = default_serializer.deserialize(serialized)
    if isinstance(grouping, str):  # a class path
        module, _, name = grouping.rpartition(".")
        try:
            grouping = getattr(importlib.import_module(module), name)()
        except (ImportError, AttributeError, ValueError) as exc:
            raise TopologyError(f"bolt {bolt!r}: custom grouping {grouping!r} cannot be "
                                f"imported ({exc})") from exc
    if not isinstance(grouping, ICustomGrouping):
        raise TopologyError(f"bolt {bolt!r}: custom grouping {grouping!r} is not an "
                            "ICustomGrouping")
    return HeronGrouping(grouping)


def _subscribe(declarer: Any, source: str, stream: str, grouping: Any, bolt: str) -> None:
    if isinstance(grouping, Grouping.FIELDS):
        declarer.fields_grouping(source, Fields(*grouping.fields), stream=stream)
    elif isinstance(grouping, Grouping.CUSTOM):
        declarer.custom_grouping(source, _custom(grouping.python_serialized, bolt),
                                 stream=stream)
    elif grouping == Grouping.SHUFFLE:
        declarer.shuffle_grouping(source, stream=stream)
    elif grouping == Grouping.ALL:
        declarer.all_grouping(source, stream=stream)
    elif grouping == Grouping.LOWEST:  # the lowest task id: jstormpy's global grouping
        declarer.global_grouping(source, stream=stream)
    elif grouping == Grouping.NONE:
        declarer.none_grouping(source, stream=stream)
    elif grouping == Grouping.DIRECT:
        declarer.direct_grouping(source, stream=stream)
    else:  # sanitized_inputs refuses anything else first
        raise TopologyError(f"bolt {bolt!r}: unknown grouping {grouping!r}")


def _component_config(spec: HeronComponentSpec, topology_conf: Mapping[str, Any]
                      ) -> dict[str, Any]:
    return {**topology_conf, **(spec.custom_config or {})}


def topology_from_heron(topology_cls: Any, name: str | None = None) -> Topology:
    """Build the jstormpy topology of a heronpy ``Topology`` class.

    Args:
        topology_cls: the ``heronpy.api.topology.Topology`` subclass (a class DSL, or what
            ``TopologyBuilder.build_and_submit()`` submitted).
        name: the topology's name (default: the heronpy topology's).

    Raises:
        TopologyError: A component that is not a heronpy spout or bolt class, or a bad
            grouping, named.
    """
    from heronpy.api.bolt.bolt import Bolt as HeronBoltBase
    from heronpy.api.spout.spout import Spout as HeronSpoutBase

    topology_conf = topology_cls.topology_config()
    b = TopologyBuilder(name or topology_cls.topology_name)
    declared: list[tuple[HeronComponentSpec, Any]] = []
    for spec in topology_cls.specs():
        cls = spec.component_class
        base = HeronSpoutBase if spec.is_spout else HeronBoltBase
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TopologyError(f"component {spec.name!r} ({spec.python_class_path}) is not a "
                                f"heronpy {base.__name__} class")
        conf = _component_config(spec, topology_conf)
        outputs = spec.outputs
        if spec.is_spout:
            b.set_spout(str(spec.name), HeronSpout(cls, conf, outputs),
                        parallelism=spec.parallelism)
        else:
            declared.append((spec, b.set_bolt(str(spec.name), HeronBolt(cls, conf, outputs),
                                              parallelism=spec.parallelism)))
    for spec, declarer in declared:
        for stream_id, grouping in spec.sanitized_inputs().items():
            _subscribe(declarer, stream_id.component_id, stream_id.stream_id, grouping,
                       str(spec.name))
    return b.build()
