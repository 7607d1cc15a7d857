"""A paced SequenceSpout that a test releases to full speed once its scenario is over.

A test that rescales, upgrades or kills something "under load" paces its spout so that the
run is still going when its actions land. Its actions are over within seconds, but a
paced spout then emits the rest of its events at the same rate, and the test waited out
that tail (some 20 s a test) before it checked exactly-once over the whole output.
:class:`ReleasableSequenceSpout` emits the same events, at the same rate, until the test
calls :func:`release`; from then on it emits at full speed, and the run ends as soon as
the engine has carried the rest. The scenario runs unchanged; the output checked is the
same. The release is a file, so a task restarted in a new process after the release
(recovery, upgrade, rescale) is released too.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from jstormpy import SequenceSpout

CHECK_EVERY_S = 0.05
"""How often a paced task looks for the release file (a stat, not on every call)."""


class ReleasableSequenceSpout(SequenceSpout):
    """:class:`SequenceSpout` at ``rate_per_s`` until ``release_file`` exists, then
    unthrottled. Same events, same snapshots (the rate is not part of the position)."""

    def __init__(self, release_file: str | Path, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.release_file = str(release_file)
        self._next_check = 0.0

    def next_tuple(self) -> None:
        if self.rate_per_s is not None:
            now = time.monotonic()
            if now >= self._next_check:
                self._next_check = now + CHECK_EVERY_S
                if os.path.exists(self.release_file):
                    self.rate_per_s = None
        super().next_tuple()


def release(release_file: str | Path) -> None:
    """Let every :class:`ReleasableSequenceSpout` of ``release_file`` run at full speed."""
    Path(release_file).touch()
