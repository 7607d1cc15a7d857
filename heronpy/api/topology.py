"""Heron topologies in Python (``heronpy.api.topology``): the class DSL and the builder.

Two ways to define one, both run by ``jstorm run FILE``:

- a ``Topology`` subclass whose class attributes are component specs (and ``config``)::

      class WordCount(Topology):
          word_spout = WordSpout.spec(par=2)
          count_bolt = CountBolt.spec(par=2, inputs={word_spout: Grouping.fields("word")})

- a ``TopologyBuilder`` whose ``build_and_submit()`` is called (usually under
  ``if __name__ == "__main__":``): ``jstorm run`` captures the submit instead of writing
  a Heron definition file (:func:`capture_submissions`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from heronpy.api import api_constants
from heronpy.api.component.component_spec import HeronComponentSpec
from jstormpy.api.errors import TopologyError

_captures: list[list[type]] = []


@contextlib.contextmanager
def capture_submissions() -> Iterator[list[type]]:
    """While active, ``Topology.write()`` (``build_and_submit()``) appends the topology
    class to the yielded list instead of submitting anywhere (``jstorm run FILE``)."""
    captured: list[type] = []
    _captures.append(captured)
    try:
        yield captured
    finally:
        _captures.remove(captured)


class TopologyType(type):
    """The metaclass of ``Topology``: collects the component specs a class declares."""

    DEFAULT_TOPOLOGY_CONFIG: dict[str, Any] = {
        api_constants.TOPOLOGY_DEBUG: False,
        api_constants.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
        api_constants.TOPOLOGY_COMPONENT_PARALLELISM: 1,
        api_constants.TOPOLOGY_MAX_SPOUT_PENDING: 100,
        api_constants.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: True,
    }

    def __new__(mcs, classname: str, bases: tuple[type, ...],  # noqa: N804
                class_dict: dict[str, Any]) -> TopologyType:
        specs = mcs.class_dict_to_specs(class_dict)
        if any(isinstance(b, TopologyType) for b in bases):  # a topology, not the base
            if not any(s.is_spout for s in specs.values()):
                raise TopologyError(f"topology {classname!r} has no spout: a Topology needs "
                                    "at least one Spout.spec(...)")
            for spec in specs.values():
                if spec.is_spout and not spec.sanitized_outputs():
                    raise TopologyError(f"spout {spec.name!r} ({spec.python_class_path}) "
                                        "declares no outputs")
                if not spec.is_spout and not spec.sanitized_inputs():
                    raise TopologyError(f"bolt {spec.name!r} ({spec.python_class_path}) has "
                                        "no inputs")
            class_dict["_topo_config"] = mcs.class_dict_to_topo_config(class_dict)
            class_dict["_heron_specs"] = list(specs.values())
            class_dict.setdefault("topology_name", classname)
        return super().__new__(mcs, classname, bases, class_dict)

    @classmethod
    def class_dict_to_specs(mcs, class_dict: dict[str, Any]) -> dict[str, HeronComponentSpec]:  # noqa: N804
        """The specs among the class attributes, named after their attribute if unnamed."""
        specs: dict[str, HeronComponentSpec] = {}
        for attr, spec in list(class_dict.items()):
            if isinstance(spec, HeronComponentSpec):
                if spec.name is None:
                    spec.name = attr
                if spec.name in specs:
                    raise TopologyError(f"two components are named {spec.name!r}")
                specs[spec.name] = spec
        return specs

    @classmethod
    def class_dict_to_topo_config(mcs, class_dict: dict[str, Any]) -> dict[str, Any]:  # noqa: N804
        """The defaults, overridden by the class's ``config`` dict."""
        config = dict(mcs.DEFAULT_TOPOLOGY_CONFIG)
        custom = class_dict.get("config")
        if isinstance(custom, dict):
            for key in custom:
                if not isinstance(key, str):
                    raise TopologyError(f"topology config keys must be strings, not {key!r}")
            config.update(custom)
        return config


class Topology(metaclass=TopologyType):
    """Subclass it with component specs as class attributes (and ``config``, a dict of
    topology-wide settings, overridden per component by ``spec(config=...)``)."""

    _heron_specs: list[HeronComponentSpec]
    _topo_config: dict[str, Any]
    topology_name: str

    @classmethod
    def write(cls) -> None:
        """Submit: under ``jstorm run FILE`` the topology is captured and run there."""
        if cls is Topology:
            raise TopologyError("the base Topology class cannot be submitted")
        if not _captures:
            raise TopologyError(
                f"topology {cls.topology_name!r}: build_and_submit() submits to jstormpy; run "
                "this file with `jstorm run FILE` (the heronpy API here is jstormpy's, "
                "docs/coming-from.md)")
        _captures[-1].append(cls)

    @classmethod
    def specs(cls) -> list[HeronComponentSpec]:
        """The topology's component specs (jstormpy: what ``jstorm run`` builds)."""
        return list(cls._heron_specs)

    @classmethod
    def topology_config(cls) -> dict[str, Any]:
        """The topology-wide config (defaults plus the class's ``config``)."""
        return dict(cls._topo_config)


class TopologyBuilder:
    """Builds a ``Topology`` from ``add_spout`` / ``add_bolt`` / ``add_spec`` calls."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name or name == "Topology":
            raise TopologyError(f"TopologyBuilder needs a topology name (a string, not "
                                f"'Topology'), not {name!r}")
        self.topology_name = name
        self._specs: dict[str, HeronComponentSpec] = {}
        self._topology_config: dict[str, Any] = {}

    def add_spec(self, *specs: HeronComponentSpec) -> None:
        """Add named component specs."""
        for spec in specs:
            if not isinstance(spec, HeronComponentSpec):
                raise TopologyError(f"add_spec() takes component specs (Bolt.spec(...)), "
                                    f"not {spec!r}")
            if spec.name is None:
                raise TopologyError("TopologyBuilder needs each spec named: spec(name=...)")
            if spec.name == "config":
                raise TopologyError("'config' is a reserved name")
            if spec.name in self._specs:
                raise TopologyError(f"two components are named {spec.name!r}")
            self._specs[spec.name] = spec

    def add_spout(self, name: str, spout_cls: Any, par: int,
                  config: dict[str, Any] | None = None,
                  optional_outputs: Any = None) -> HeronComponentSpec:
        """Add a spout; returns its spec (for bolts' ``inputs``)."""
        spec: HeronComponentSpec = spout_cls.spec(name=name, par=par, config=config,
                                                  optional_outputs=optional_outputs)
        self.add_spec(spec)
        return spec

    def add_bolt(self, name: str, bolt_cls: Any, par: int, inputs: Any,
                 config: dict[str, Any] | None = None,
                 optional_outputs: Any = None) -> HeronComponentSpec:
        """Add a bolt reading ``inputs``; returns its spec."""
        spec: HeronComponentSpec = bolt_cls.spec(name=name, par=par, inputs=inputs,
                                                 config=config,
                                                 optional_outputs=optional_outputs)
        self.add_spec(spec)
        return spec

    def set_config(self, config: dict[str, Any]) -> None:
        """Set the topology-wide config."""
        if not isinstance(config, dict):
            raise TopologyError(f"set_config() takes a dict, not {type(config).__name__}")
        self._topology_config = config

    def create_topology(self) -> type[Topology]:
        """The ``Topology`` subclass these specs and config make."""
        class_dict: dict[str, Any] = dict(self._specs)
        class_dict["config"] = self._topology_config
        class_dict["topology_name"] = self.topology_name
        return TopologyType(self.topology_name, (Topology,), class_dict)  # type: ignore[return-value]

    def build_and_submit(self) -> None:
        """Build the topology and submit it (captured by ``jstorm run FILE``)."""
        self.create_topology().write()
