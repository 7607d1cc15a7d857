"""The states a topology goes through in its Topology Master, as one typed value.

``starting`` (no worker prepared yet) -> ``recovering`` (workers prepared for a generation,
also on a fresh start) -> ``running`` -> ``drained`` (every spout finished and the final
checkpoint committed), ``killed`` (a Kill call) or ``failed`` (the restart strategy gave
up). A failure while running goes back to ``recovering`` in a new generation.

The members are ``str`` (``StrEnum``): the status JSON, ``jstorm status``, the web UI and
the Prometheus ``state`` label carry the same strings as before, and a client comparing a
status dict's ``"state"`` with a member compares strings. Kept apart from ``core.py`` so the
rescale and upgrade controllers (which ``core.py`` imports) and the clients above the TM
(CLI, launchers) can name the states without importing the TM itself.
"""

from __future__ import annotations

from enum import StrEnum


class TopologyState(StrEnum):
    """A topology's state in its TM (``MasterCore.state``)."""

    STARTING = "starting"
    RECOVERING = "recovering"
    RUNNING = "running"
    DRAINED = "drained"
    KILLED = "killed"
    FAILED = "failed"


TERMINAL_STATES: tuple[TopologyState, ...] = (
    TopologyState.DRAINED, TopologyState.FAILED, TopologyState.KILLED)
"""A topology never leaves these by itself."""
