"""A component as placed in a topology (``heronpy.api.component.component_spec``).

``Bolt.spec(...)`` and ``Spout.spec(...)`` return a :class:`HeronComponentSpec`; a
``Topology`` class or a ``TopologyBuilder`` collects them. ``spec[stream]`` names one of its
output streams for a bolt's ``inputs``.
"""

from __future__ import annotations

import uuid
from typing import Any

from heronpy.api.stream import Grouping, Stream
from jstormpy.api.errors import TopologyError


class HeronComponentSpec:
    """A spout or bolt class with its name, parallelism, inputs, outputs and config."""

    def __init__(self, name: str | None, python_class_path: str, is_spout: bool, par: int,
                 inputs: Any = None, outputs: Any = None, config: dict[str, Any] | None = None,
                 component_class: type | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TopologyError(f"a component's name must be a string, not {name!r}")
        if not isinstance(par, int) or isinstance(par, bool) or par < 1:
            raise TopologyError(f"component {name or python_class_path!r}: par must be an "
                                f"int >= 1, not {par!r}")
        if config is not None and not isinstance(config, dict):
            raise TopologyError(f"component {name or python_class_path!r}: config must be a "
                                f"dict, not {type(config).__name__}")
        self.name = name
        self.python_class_path = python_class_path
        self.component_class = component_class
        self.is_spout = is_spout
        self.parallelism = par
        self.inputs = inputs
        self.outputs = outputs
        self.custom_config = config
        self.uuid = str(uuid.uuid4())

    def __repr__(self) -> str:
        kind = "spout" if self.is_spout else "bolt"
        return (f"<HeronComponentSpec {kind} {self.name!r} ({self.python_class_path}) "
                f"par={self.parallelism}>")

    def _label(self) -> str:
        return repr(self.name or self.python_class_path)

    def sanitized_outputs(self) -> dict[str, tuple[list[str], bool]]:
        """``{stream id: (fields, direct)}`` of the declared outputs."""
        if self.outputs is None:
            return {}
        if not isinstance(self.outputs, (list, tuple)):
            raise TopologyError(f"component {self._label()}: outputs must be a list of field "
                                f"names or Streams, not {type(self.outputs).__name__}")
        ret: dict[str, tuple[list[str], bool]] = {}
        for out in self.outputs:
            if isinstance(out, str):
                fields, _ = ret.setdefault(Stream.DEFAULT_STREAM_ID, ([], False))
                fields.append(out)
            elif isinstance(out, Stream):
                if out.stream_id in ret:
                    ret[out.stream_id][0].extend(out.fields)
                else:
                    ret[out.stream_id] = (list(out.fields), out.direct)
            else:
                raise TopologyError(f"component {self._label()}: outputs must be field names "
                                    f"or Streams, not {out!r}")
        return ret

    def get_out_streamids(self) -> set[str]:
        """The ids of the declared output streams."""
        return set(self.sanitized_outputs())

    def __getitem__(self, stream_id: str) -> GlobalStreamId:
        """The output stream ``stream_id`` of this component, for a bolt's ``inputs``."""
        if stream_id not in self.get_out_streamids():
            raise TopologyError(f"component {self._label()} declares no stream "
                                f"{stream_id!r} (it has {sorted(self.get_out_streamids())})")
        return GlobalStreamId(self.name or self, stream_id)

    def sanitized_inputs(self) -> dict[GlobalStreamId, Any]:
        """``{GlobalStreamId: grouping}`` of the bolt's inputs (a list means shuffle)."""
        if self.inputs is None:
            return {}
        pairs: list[tuple[Any, Any]]
        if isinstance(self.inputs, dict):
            pairs = list(self.inputs.items())
        elif isinstance(self.inputs, (list, tuple)):
            pairs = [(i, Grouping.SHUFFLE) for i in self.inputs]
        else:
            raise TopologyError(f"bolt {self._label()}: inputs must be a dict or a list, not "
                                f"{type(self.inputs).__name__}")
        ret: dict[GlobalStreamId, Any] = {}
        for source, grouping in pairs:
            if not Grouping.is_grouping_sane(grouping):
                raise TopologyError(f"bolt {self._label()}: {grouping!r} is not a Grouping "
                                    "(use Grouping.SHUFFLE, Grouping.fields(...), ...)")
            if isinstance(source, HeronComponentSpec):
                ret[GlobalStreamId(source, Stream.DEFAULT_STREAM_ID)] = grouping
            elif isinstance(source, GlobalStreamId):
                ret[source] = grouping
            else:
                raise TopologyError(f"bolt {self._label()}: an input must be a component spec "
                                    f"or spec[stream], not {source!r}")
        return ret


class GlobalStreamId:
    """One stream of one component: ``(componentId, streamId)``."""

    def __init__(self, componentId: str | HeronComponentSpec, streamId: str) -> None:  # noqa: N803
        if not isinstance(componentId, (str, HeronComponentSpec)):
            raise TopologyError(f"GlobalStreamId: componentId must be a name or a component "
                                f"spec, not {componentId!r}")
        if not isinstance(streamId, str):
            raise TopologyError(f"GlobalStreamId: streamId must be a string, not {streamId!r}")
        self._component_id = componentId
        self.stream_id = streamId

    @property
    def component_id(self) -> str:
        """The component's name (a spec's name once its topology named it)."""
        comp = self._component_id
        if isinstance(comp, HeronComponentSpec):
            return comp.name if comp.name is not None else f"<unnamed spec {comp.uuid}>"
        return comp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalStreamId) and \
            (self.component_id, self.stream_id) == (other.component_id, other.stream_id)

    def __hash__(self) -> int:
        return hash(str(self))

    def __str__(self) -> str:
        return f"{self.component_id}:{self.stream_id}"
