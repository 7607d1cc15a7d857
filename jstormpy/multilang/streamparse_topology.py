"""streamparse projects, unmodified: a ``streamparse.Topology`` class as a jstormpy topology.

``jstorm run topologies/wordcount.py`` in a streamparse project's root finds the
``Topology`` subclass the file defines and builds it here: every Python component
(``Bolt.spec(...)``, ``Spout.spec(...)``) becomes a :class:`ShellBolt` / :class:`ShellSpout`
running ``python -m streamparse.run module.Class`` in the project's ``src/`` (as Storm
runs it through ``streamparse_run``), a ``ShellBolt.spec(command=..., script=...)`` runs its
own command; ``par``, ``config``, the declared ``Stream``\\ s and every ``Grouping`` carry over.
Java components cannot run here and are refused with the component's name.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jstormpy.api.errors import TopologyError
from jstormpy.api.topology import Fields, Topology, TopologyBuilder
from jstormpy.multilang.bolt import ShellBolt
from jstormpy.multilang.spout import ShellSpout

STREAMPARSE_RUN = "streamparse_run"


def find_streamparse_topology(namespace: Mapping[str, Any]) -> type | None:
    """The ``streamparse.Topology`` subclass a topology file defines, or None (also when
    streamparse is not installed)."""
    try:
        from streamparse import Topology as SparseTopology
    except ImportError:
        return None
    found = [v for v in namespace.values() if isinstance(v, type)
             and issubclass(v, SparseTopology) and v is not SparseTopology]
    if len(found) > 1:
        names = ", ".join(sorted(c.__name__ for c in found))
        raise TopologyError(f"the file defines {len(found)} streamparse topologies ({names}); "
                            "keep one per file, as `sparse run` expects")
    return found[0] if found else None


def _command(spec: Any, python: str) -> list[str]:
    shell = spec.component_object.shell
    command, script = shell.execution_command, shell.script or ""
    if command == STREAMPARSE_RUN:
        return [python, "-m", "streamparse.run", *script.split()]
    return [command, *script.split()]


def _outputs(spec: Any) -> dict[str, tuple[str, ...]]:
    return {stream: tuple(info.output_fields or ()) for stream, info in
            (spec.outputs or {}).items()}


def _conf(spec: Any, topology_conf: Mapping[str, Any]) -> dict[str, Any]:
    own = spec.config or {}
    if isinstance(own, str):
        own = json.loads(own)
    return {**topology_conf, **own}


def _subscribe(declarer: Any, source: str, stream: str, grouping: Any, name: str) -> None:
    if grouping.fields is not None:
        if grouping.fields:
            declarer.fields_grouping(source, Fields(*grouping.fields), stream=stream)
        else:  # Storm's global grouping is fields grouping on no fields
            declarer.global_grouping(source, stream=stream)
    elif grouping.shuffle is not None:
        declarer.shuffle_grouping(source, stream=stream)
    elif grouping.local_or_shuffle is not None:
        declarer.local_or_shuffle_grouping(source, stream=stream)
    elif grouping.all is not None:
        declarer.all_grouping(source, stream=stream)
    elif grouping.none is not None:
        declarer.none_grouping(source, stream=stream)
    elif grouping.direct is not None:
        declarer.direct_grouping(source, stream=stream)
    else:
        raise TopologyError(f"bolt {name!r}: the custom grouping on {source!r} is a Java class "
                            "(Grouping.custom_object / custom_serialized), which cannot run "
                            "here; use a jstormpy CustomStreamGrouping in a jstormpy topology")


def topology_from_streamparse(topology_cls: type, name: str, project_root: Path,
                              python: str = sys.executable, *,
                              spouts_at_least_once: bool = True) -> Topology:
    """Build the jstormpy topology of a streamparse ``Topology`` class.

    Args:
        topology_cls: the ``streamparse.Topology`` subclass.
        name: the topology's name (``sparse run`` uses the file's name).
        project_root: the streamparse project (its ``src/`` holds the components).
        python: the interpreter the Python components run in (it needs streamparse).
        spouts_at_least_once: accept id-less spout emits (``ShellSpout(...,
            at_least_once=True)``); False under ``guarantee="exactly_once"``.

    Raises:
        TopologyError: A Java component or grouping, named.
    """
    from streamparse.dsl.bolt import ShellBoltSpec
    from streamparse.dsl.spout import ShellSpoutSpec

    src = project_root / "src"
    cwd = str(src if src.is_dir() else project_root)
    topology_conf = getattr(topology_cls, "config", None)
    topology_conf = topology_conf if isinstance(topology_conf, dict) else {}
    b = TopologyBuilder(name)
    declared: list[tuple[Any, Any]] = []
    for spec in topology_cls.specs:  # type: ignore[attr-defined]
        if not isinstance(spec, (ShellBoltSpec, ShellSpoutSpec)):
            raise TopologyError(
                f"component {spec.name!r} is a Java component ({type(spec).__name__}), which "
                "cannot run here: only multilang components (Python streamparse "
                "components, ShellBolt.spec/ShellSpout.spec commands) can")
        conf = _conf(spec, topology_conf)
        if isinstance(spec, ShellSpoutSpec):
            # streamparse spouts emit without message ids as often as with: they run
            # at-least-once unless the job asks for exactly-once (docs/coming-from.md)
            comp: Any = ShellSpout(_command(spec, python), outputs=_outputs(spec),
                                   at_least_once=spouts_at_least_once, cwd=cwd, conf=conf)
            b.set_spout(spec.name, comp, parallelism=spec.par)
        else:
            tick = conf.get("topology.tick.tuple.freq.secs")  # Storm's tick tuples
            comp = ShellBolt(_command(spec, python), outputs=_outputs(spec), cwd=cwd,
                             conf=conf, tick_tuple_freq_s=float(tick) if tick else None)
            declared.append((spec, b.set_bolt(spec.name, comp, parallelism=spec.par)))
    for spec, declarer in declared:
        for stream_id, grouping in spec.inputs.items():
            _subscribe(declarer, stream_id.componentId, stream_id.streamId, grouping,
                       spec.name)
    return b.build()
