"""The state of a stateful heronpy component (``heronpy.api.state.state``).

Example:
    >>> from heronpy.api.state.state import HashMapState
    >>> s = HashMapState(); s.put("cat", 2)
    >>> s.get("cat"), s.get("dog"), list(s.enumerate())
    (2, None, [(0, 'cat')])
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any


class State:
    """A key/value state a checkpoint saves and a rollback restores."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value``."""

    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value of ``key``, or None."""

    @abstractmethod
    def enumerate(self) -> Any:
        """``enumerate`` over the keys (as Heron's: ``(index, key)`` pairs)."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every key."""


class HashMapState(State):
    """The state jstormpy gives ``init_state``: a dict, also readable as a mapping
    (``state[key]``, ``in``, ``len``, ``items()``)."""

    def __init__(self, initial: Mapping[Any, Any] | None = None) -> None:
        self._dict: dict[Any, Any] = dict(initial or {})

    def put(self, k: Any, v: Any) -> None:
        self._dict[k] = v

    def get(self, k: Any, default: Any = None) -> Any:
        return self._dict.get(k, default)

    def enumerate(self) -> Any:
        return enumerate(self._dict)

    def clear(self) -> None:
        self._dict.clear()

    def items(self) -> Any:
        """The ``(key, value)`` pairs."""
        return self._dict.items()

    def __getitem__(self, k: Any) -> Any:
        return self._dict[k]

    def __setitem__(self, k: Any, v: Any) -> None:
        self._dict[k] = v

    def __delitem__(self, k: Any) -> None:
        del self._dict[k]

    def __contains__(self, k: object) -> bool:
        return k in self._dict

    def __iter__(self) -> Iterator[Any]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __str__(self) -> str:
        return str(self._dict)
