"""Topology model: components wired with Storm's groupings, validated before anything runs."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jstormpy.api.component import (
    DEFAULT_STREAM,
    ERROR_FIELDS,
    ERRORS_STREAM,
    Bolt,
    Spout,
    declared_streams,
)
from jstormpy.api.errors import TopologyError

GROUPINGS = ("shuffle", "fields", "all", "global", "direct", "local_or_shuffle", "none",
             "custom")


class Fields(tuple[str, ...]):
    """Field names, as in Storm: ``Fields("word")`` or ``Fields("a", "b")``."""

    def __new__(cls, *names: str | Iterable[str]) -> Fields:
        flat: list[str] = []
        for n in names:
            if isinstance(n, str):
                flat.append(n)
            else:
                flat.extend(n)
        return super().__new__(cls, flat)


class CustomStreamGrouping:
    """Base of user groupings (Storm's ``CustomStreamGrouping``)."""

    def prepare(self, source: str, stream: str, target_tasks: list[int]) -> None:
        """Called once per emitting task with the consumer's task ids (sorted)."""

    def choose_tasks(self, task_id: int, values: tuple[Any, ...]) -> list[int]:
        """Task ids (from ``target_tasks``) that receive ``values`` emitted by ``task_id``."""
        raise TopologyError(f"{type(self).__name__}.choose_tasks is not implemented")


@dataclass
class Grouping:
    """One subscription: ``consumer`` reads ``stream`` of ``source`` grouped by ``kind``."""

    kind: str
    source: str
    stream: str = DEFAULT_STREAM
    fields: tuple[str, ...] = ()
    custom: CustomStreamGrouping | None = None


@dataclass
class ComponentSpec:
    """A component as declared: what to run, how many tasks, what it reads."""

    name: str
    kind: str  # "spout" | "bolt"
    obj: Any  # a Spout/Bolt subclass or a configured instance
    parallelism: int
    inputs: list[Grouping] = field(default_factory=list)
    streams: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def cls(self) -> type:
        """The component's class."""
        return self.obj if inspect.isclass(self.obj) else type(self.obj)

    @property
    def is_sink(self) -> bool:
        """Whether the component is a two-phase-commit sink (the API model does not import
        the sink base, which sits above it: the base marks its subclasses)."""
        return bool(getattr(self.cls, "commits_in_two_phases", False))


class BoltDeclarer:
    """Returned by ``set_bolt``; every grouping method returns it again, so they chain."""

    def __init__(self, spec: ComponentSpec) -> None:
        self._spec = spec

    def _add(self, kind: str, source: str, stream: str, fields: Iterable[str] = (),
             custom: CustomStreamGrouping | None = None) -> BoltDeclarer:
        if not isinstance(source, str):
            raise TopologyError(f"bolt {self._spec.name!r}: {kind}_grouping needs the source "
                                f"component's name, got {source!r}")
        self._spec.inputs.append(Grouping(kind, source, stream, tuple(fields), custom))
        return self

    def shuffle_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Tuples are spread evenly over the bolt's tasks."""
        return self._add("shuffle", source, stream)

    def fields_grouping(self, source: str, fields: Iterable[str] | str,
                        stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Tuples with equal values of ``fields`` always go to the same task."""
        return self._add("fields", source, stream, Fields(fields))

    def all_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every task receives every tuple."""
        return self._add("all", source, stream)

    def global_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every tuple goes to the task with the lowest id."""
        return self._add("global", source, stream)

    def direct_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """The emitter picks the task (``emit_direct``)."""
        return self._add("direct", source, stream)

    def local_or_shuffle_grouping(self, source: str,
                                  stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Shuffle among the bolt's tasks in the emitter's worker, if any; else all tasks."""
        return self._add("local_or_shuffle", source, stream)

    def none_grouping(self, source: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """No preference (behaves as shuffle)."""
        return self._add("none", source, stream)

    def custom_grouping(self, source: str, grouping: CustomStreamGrouping,
                        stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """A user ``CustomStreamGrouping`` chooses the tasks."""
        return self._add("custom", source, stream, custom=grouping)


@dataclass
class Topology:
    """A validated, immutable-by-convention topology (what ``TopologyBuilder.build`` returns)."""

    name: str
    components: dict[str, ComponentSpec]

    def spouts(self) -> list[ComponentSpec]:
        """The spout components, in declaration order."""
        return [c for c in self.components.values() if c.kind == "spout"]

    def consumers(self, source: str) -> list[tuple[ComponentSpec, Grouping]]:
        """Every (consumer, grouping) that reads from ``source``."""
        return [(c, g) for c in self.components.values() for g in c.inputs if g.source == source]

    def task_ids(self) -> dict[str, tuple[int, ...]]:
        """Component → its task ids: sequential from 1 in the order of ``components``
        (for a built topology that is data-flow order, sources before their consumers,
        which equals declaration order when components are declared sources-first)."""
        out: dict[str, tuple[int, ...]] = {}
        nxt = 1
        for spec in self.components.values():
            out[spec.name] = tuple(range(nxt, nxt + spec.parallelism))
            nxt += spec.parallelism
        return out

    def descriptor(self) -> dict[str, Any]:
        """A plain-data description (no user code) for the Topology Master."""
        tasks = self.task_ids()
        return {
            "name": self.name,
            "components": [
                {"name": c.name, "kind": c.kind, "parallelism": c.parallelism,
                 "tasks": list(tasks[c.name]), "is_sink": c.is_sink,
                 "class": f"{c.cls.__module__}.{c.cls.__qualname__}",
                 "streams": {s: list(f) for s, f in c.streams.items()},
                 "inputs": [{"source": g.source, "stream": g.stream, "grouping": g.kind,
                             "fields": list(g.fields)} for g in c.inputs]}
                for c in self.components.values()
            ],
        }


def assign_tasks(topology_tasks: Mapping[str, Sequence[int]], workers: int) -> dict[int, int]:
    """The physical plan: task id → worker id, round-robin so each component spreads
    over the workers."""
    plan: dict[int, int] = {}
    for tasks in topology_tasks.values():
        for task in tasks:
            plan[task] = (task - 1) % workers
    return plan


class TopologyBuilder:
    """Declare spouts and bolts, wire them with groupings, then ``build()``.

    Example:
        >>> b = TopologyBuilder("demo")
        >>> class S(Spout):
        ...     outputs = ("n",)
        >>> class B(Bolt):
        ...     outputs = ("n",)
        >>> _ = b.set_spout("s", S)
        >>> _ = b.set_bolt("b", B, parallelism=2).shuffle_grouping("s")
        >>> sorted(b.build().components)
        ['b', 's']
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name or not all(
                ch.isalnum() or ch in "-_." for ch in name):
            raise TopologyError(f"topology name {name!r} is invalid: use letters, digits, "
                                "'-', '_' or '.'")
        self.name = name
        self._specs: dict[str, ComponentSpec] = {}

    def _set(self, name: str, kind: str, obj: Any, parallelism: int) -> ComponentSpec:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"component name {name!r} must be a non-empty string")
        if name in self._specs:
            raise TopologyError(f"duplicate component name {name!r}: each spout and bolt "
                                "needs its own name")
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise TopologyError(f"component {name!r}: parallelism must be an int >= 1, "
                                f"got {parallelism!r}")
        cls = obj if inspect.isclass(obj) else type(obj)
        base = Spout if kind == "spout" else Bolt
        if not (inspect.isclass(cls) and issubclass(cls, base)):
            raise TopologyError(f"component {name!r}: set_{kind} needs a {base.__name__} "
                                f"subclass or instance, got {obj!r}")
        spec = ComponentSpec(name, kind, obj, parallelism)
        self._specs[name] = spec
        return spec

    def set_spout(self, name: str, spout: Any, parallelism: int = 1) -> ComponentSpec:
        """Add a spout (a Spout subclass or a configured instance)."""
        return self._set(name, "spout", spout, parallelism)

    def set_bolt(self, name: str, bolt: Any, parallelism: int = 1) -> BoltDeclarer:
        """Add a bolt; chain grouping calls on the result to say what it reads."""
        return BoltDeclarer(self._set(name, "bolt", bolt, parallelism))

    def build(self) -> Topology:
        """Validate and return the topology; TopologyError names the first problem."""
        specs = self._specs
        if not any(s.kind == "spout" for s in specs.values()):
            raise TopologyError(f"topology {self.name!r} has no spout")
        for spec in specs.values():
            validate = getattr(spec.obj, "validate_config", None)
            if callable(validate):
                validate()
        self._check_sources(specs)
        order = self._topological_order(specs)
        for name in order:
            spec = specs[name]
            spec.streams = self._resolve_streams(spec, specs)
            for g in spec.inputs:
                self._check_grouping(spec, g, specs[g.source])
        for spec in specs.values():
            if spec.kind == "bolt" and not spec.inputs:
                raise TopologyError(f"bolt {spec.name!r} has no input: add a grouping, e.g. "
                                    f".shuffle_grouping('<source>')")
        return Topology(self.name, {n: specs[n] for n in order})

    @staticmethod
    def _check_sources(specs: Mapping[str, ComponentSpec]) -> None:
        for spec in specs.values():
            for g in spec.inputs:
                if g.source not in specs:
                    raise TopologyError(
                        f"bolt {spec.name!r} subscribes to unknown component {g.source!r}; "
                        f"known components: {', '.join(sorted(specs))}")

    @staticmethod
    def _topological_order(specs: Mapping[str, ComponentSpec]) -> list[str]:
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = path[path.index(name):] + [name]
                raise TopologyError(f"topology has a cycle: {' -> '.join(reversed(cycle))}")
            state[name] = 1
            for g in specs[name].inputs:
                visit(g.source, [*path, name])
            state[name] = 2
            order.append(name)

        for name in specs:
            visit(name, [])
        return order

    @staticmethod
    def _resolve_streams(spec: ComponentSpec,
                         specs: Mapping[str, ComponentSpec]) -> dict[str, tuple[str, ...]]:
        resolve = getattr(spec.obj, "resolve_outputs", None)
        if callable(resolve) and spec.inputs:
            first = spec.inputs[0]
            src_streams = specs[first.source].streams or declared_streams(specs[first.source].obj)
            streams = dict(resolve(tuple(src_streams.get(first.stream, ()))))
        else:
            streams = declared_streams(spec.obj)
        if spec.kind == "bolt" and any(g.source == spec.name and g.stream == ERRORS_STREAM
                                       for other in specs.values() for g in other.inputs):
            # someone keeps this bolt's dead letters (Config.on_error="dead_letter")
            streams.setdefault(ERRORS_STREAM, ERROR_FIELDS)
        return streams

    @staticmethod
    def _check_grouping(spec: ComponentSpec, g: Grouping, source: ComponentSpec) -> None:
        if g.stream not in source.streams:
            declared = ", ".join(sorted(source.streams)) or "none"
            raise TopologyError(
                f"bolt {spec.name!r} subscribes to stream {g.stream!r} of {source.name!r}, "
                f"which does not declare it (declared streams: {declared})")
        if g.kind == "fields":
            if not g.fields:
                raise TopologyError(f"bolt {spec.name!r}: fields_grouping on {source.name!r} "
                                    "needs at least one field")
            missing = [f for f in g.fields if f not in source.streams[g.stream]]
            if missing:
                raise TopologyError(
                    f"bolt {spec.name!r}: fields_grouping on {source.name!r} stream "
                    f"{g.stream!r} uses field(s) {missing} that it does not declare "
                    f"(declared: {list(source.streams[g.stream])})")
        if g.kind == "custom" and not isinstance(g.custom, CustomStreamGrouping):
            raise TopologyError(f"bolt {spec.name!r}: custom_grouping needs a "
                                "CustomStreamGrouping instance")
