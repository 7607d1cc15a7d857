"""The data plane's counters: what one worker's transport and its connections count.

One :class:`DataPlaneCounters` per :class:`~jstormpy.runtime.transport.Transport`,
shared with its inbound readers and every :class:`~jstormpy.runtime.outbound.Outbound`
connection, which count into it directly (no reaching into the transport).
"""

from __future__ import annotations

import threading

COUNTER_KEYS = ("frames_sent", "bytes_sent", "frames_received", "bytes_received",
                "auth_failures", "malformed_frames", "stale_frames_dropped", "frames_dropped",
                "deliver_errors", "reconnects", "frames_retransmitted",
                "duplicate_frames_dropped", "sequence_gaps", "channels_lost")
"""``frames_*``/``bytes_*`` count DATA frames (bytes include the 12-byte header);
``frames_dropped`` counts frames dropped before sending (``send()`` returned False, or
queued frames discarded by a generation change, reset, address change or broken
connection); ``deliver_errors`` counts ``deliver()`` exceptions."""


class DataPlaneCounters:
    """Thread-safe counters of :data:`COUNTER_KEYS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(COUNTER_KEYS, 0)

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to ``key``."""
        with self._lock:
            self._values[key] += n

    def count2(self, k1: str, n1: int, k2: str, n2: int) -> None:
        """Add to two counters under one lock (a frame and its bytes)."""
        with self._lock:
            self._values[k1] += n1
            self._values[k2] += n2

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter."""
        with self._lock:
            return dict(self._values)
