"""``Spout.spec`` / ``Bolt.spec``: the one place a component class becomes a spec."""

from __future__ import annotations

from typing import Any

from heronpy.api.component.component_spec import HeronComponentSpec
from heronpy.api.stream import Stream
from jstormpy.api.errors import TopologyError


def component_spec(cls: type, is_spout: bool, name: str | None, inputs: Any, par: int,
                   config: dict[str, Any] | None, optional_outputs: Any) -> HeronComponentSpec:
    """The spec of ``cls`` with its class ``outputs`` plus ``optional_outputs``."""
    outputs = list(getattr(cls, "outputs", None) or [])
    if optional_outputs is not None:
        if not isinstance(optional_outputs, (list, tuple)) or not all(
                isinstance(o, (str, Stream)) for o in optional_outputs):
            raise TopologyError(f"{cls.__name__}.spec(optional_outputs=...) takes a list of "
                                f"field names or Streams, not {optional_outputs!r}")
        outputs += list(optional_outputs)
    return HeronComponentSpec(name, f"{cls.__module__}.{cls.__qualname__}", is_spout, par,
                              inputs=inputs, outputs=outputs, config=config,
                              component_class=cls)
