"""Serialization of Python values in a topology definition (``heronpy.api.serializer``)."""

from __future__ import annotations

from typing import Any

import cloudpickle


class IHeronSerializer:
    """Turns values into bytes and back."""

    def serialize(self, obj: Any) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def deserialize(self, input_str: bytes) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


class PythonSerializer(IHeronSerializer):
    """cloudpickle: classes defined in a topology file serialize by value."""

    def initialize(self, config: Any = None) -> None:
        """Nothing to set up."""

    def serialize(self, obj: Any) -> bytes:
        return cloudpickle.dumps(obj)

    def deserialize(self, input_str: bytes) -> Any:
        return cloudpickle.loads(input_str)


default_serializer = PythonSerializer()
