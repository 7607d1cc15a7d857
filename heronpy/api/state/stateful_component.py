"""Stateful heronpy components (``heronpy.api.state.stateful_component``).

A spout or bolt that also subclasses :class:`StatefulComponent` keeps what must survive a
failure in the state ``init_state`` gives it. On jstormpy the state is the task's part of
every checkpoint: ``pre_save(checkpoint_id)`` runs at the barrier, then the state is saved;
after a failure every task restarts with the state of the last completed checkpoint
(``init_state`` again, then ``initialize``). A spout that keeps its read position in the
state is replayable, so the topology is exactly-once (Heron's effectively-once).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any


class StatefulComponent:
    """Mix into a Spout or Bolt: ``init_state(state)`` and ``pre_save(checkpoint_id)``."""

    @abstractmethod
    def init_state(self, stateful_state: Any) -> None:
        """Called once per task before ``initialize``, with the restored state (empty on a
        fresh start); keep a reference and read and write it."""

    @abstractmethod
    def pre_save(self, checkpoint_id: Any) -> None:
        """Called at each checkpoint's barrier, before the state is saved: put into the state
        whatever is not in it yet."""
