"""Real-socket network faults between the processes of one topology.

:class:`ChaosNetwork` puts a :class:`~jstormpy.testing.servers.fault_proxy.FaultProxy` on every
directed worker pair (``A>B`` carries A's data frames to B *and* A's credit returns to B,
since a worker sends both on its one outbound connection to a peer) and between every worker
and the Topology Master. The workers learn the proxies from ``JSTORM_CHAOS_ROUTES`` (see
:func:`jstormpy.faults.chaos_route`) in :meth:`ChaosNetwork.environment`; each proxy asks
for its peer's current address at every new connection, so restarted workers and a
restarted TM are followed.

Example:
    >>> net = ChaosNetwork(workers=3, tm_port_file=run_dir / "master.port")  # doctest: +SKIP
    >>> cluster = LocalCluster(env=net.environment())                       # doctest: +SKIP
    >>> net.reset(0, 1, on="data")                                          # doctest: +SKIP
    >>> net.partition(2, from_="peers"); net.heal()                         # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

from jstormpy.faults import ROUTES_ENV
from jstormpy.testing.servers.fault_proxy import FaultProxy

RESET_ON = ("data", "credit", "both")
"""What :meth:`ChaosNetwork.reset` cuts: the sender's connection to the receiver (data), the
receiver's connection back to the sender (its credit returns), or both."""
PARTITION_FROM = ("peers", "tm", "both")
"""What :meth:`ChaosNetwork.partition` cuts a worker off from."""


class ChaosNetwork:
    """Fault-injecting proxies between ``workers`` workers and their Topology Master.

    Args:
        workers: Number of workers (ids ``0 .. workers-1``).
        tm_port_file: File holding the TM's port (``RUN_DIR/master.port``), read at each
            connection to the TM.
        worker_address: Callable giving a worker's current data address, or None while it
            is unknown (a connection then is refused and the worker retries).
        host: Address of the TM and of the proxies.
    """

    def __init__(self, workers: int, tm_port_file: Path,
                 worker_address: Callable[[int], tuple[str, int] | None],
                 host: str = "127.0.0.1") -> None:
        self.workers = workers
        self.host = host
        self._tm_port_file = Path(tm_port_file)
        self.pairs: dict[tuple[int, int], FaultProxy] = {}
        self.to_tm: dict[int, FaultProxy] = {}
        for a in range(workers):
            for b in range(workers):
                if a != b:
                    proxy = FaultProxy(functools.partial(worker_address, b), host)
                    proxy.start()
                    self.pairs[(a, b)] = proxy
            proxy = FaultProxy(self._tm_address, host)
            proxy.start()
            self.to_tm[a] = proxy

    def _tm_address(self) -> tuple[str, int] | None:
        try:
            return (self.host, int(self._tm_port_file.read_text()))
        except (OSError, ValueError):
            return None

    def environment(self) -> dict[str, str]:
        """Environment for the TM and workers that routes them through the proxies."""
        routes = {f"{a}>{b}": [self.host, p.port] for (a, b), p in self.pairs.items()}
        routes.update({f"{a}>tm": [self.host, p.port] for a, p in self.to_tm.items()})
        return {ROUTES_ENV: json.dumps(routes)}

    def reset(self, a: int, b: int, on: str = "both") -> int:
        """RST the live connections between workers ``a`` and ``b``: ``on="data"`` cuts
        a's connection to b, ``"credit"`` b's connection back to a (b's credit returns to a's
        tasks), ``"both"`` both. Returns how many connections were cut."""
        if on not in RESET_ON:
            raise ValueError(f"reset on={on!r}: choose one of {', '.join(RESET_ON)}")
        cut = 0
        if on in ("data", "both"):
            cut += self.pairs[(a, b)].reset()
        if on in ("credit", "both"):
            cut += self.pairs[(b, a)].reset()
        return cut

    def partition(self, worker: int, from_: str = "peers") -> None:
        """Cut ``worker`` off from its peers, the TM, or both, until :meth:`heal`."""
        if from_ not in PARTITION_FROM:
            raise ValueError(f"partition from={from_!r}: choose one of "
                             f"{', '.join(PARTITION_FROM)}")
        proxies: list[FaultProxy] = []
        if from_ in ("peers", "both"):
            proxies += [p for (a, b), p in self.pairs.items() if worker in (a, b)]
        if from_ in ("tm", "both"):
            proxies.append(self.to_tm[worker])
        for p in proxies:  # open connections stall silently, new ones are refused
            p.partition()

    def heal(self) -> None:
        """End every partition."""
        for p in [*self.pairs.values(), *self.to_tm.values()]:
            p.heal()

    def close(self) -> None:
        """Stop every proxy."""
        for p in [*self.pairs.values(), *self.to_tm.values()]:
            p.close()
