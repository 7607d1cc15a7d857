"""A worker process: hosts several tasks, talks to the Topology Master over gRPC and to
other workers over the authenticated TCP transport.

Run as ``python -m jstormpy.runtime.worker --tm HOST:PORT --worker-id N`` with the
per-topology secret in ``JSTORM_SECRET``. The control protocol (DESIGN §4):

1. Register with the TM; fetch the pickled topology.
2. ``Prepare(generation, checkpoint, tasks)``: stop every task, drop in-flight data,
   switch the transport to the new generation, build the assigned tasks and restore
   them from the checkpoint; answer ``Ready``.
3. ``Start(generation)``: start the task threads.
4. ``TriggerCheckpoint`` → spouts; ``CompleteCheckpoint`` → every task (sinks commit).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import shutil
import socket
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import grpc

from jstormpy import pickling
from jstormpy.api.component import TopologyContext, bind_task, managed_states, use_state_store
from jstormpy.api.config import Config
from jstormpy.api.errors import JStormError
from jstormpy.api.topology import Topology
from jstormpy.faults import chaos_route
from jstormpy.keygroups import key_group_range, resolve_max_parallelism
from jstormpy.proctitle import set_process_title, title_threads
from jstormpy.proto import jstorm_pb2 as pb
from jstormpy.proto import jstorm_pb2_grpc as pb_grpc
from jstormpy.run_identity import RunIdentity
from jstormpy.runtime import prepare_steps, taskops
from jstormpy.runtime.channel_plan import chain_plan, input_channels
from jstormpy.runtime.collector import apply_collector_policy
from jstormpy.runtime.combine import restored_bound
from jstormpy.runtime.credits import CreditGate, GrantTotals, Stopped, TaskInbox
from jstormpy.runtime.executor import TaskExecutor
from jstormpy.runtime.heartbeat import heartbeat_message
from jstormpy.runtime.incremental import make_incremental
from jstormpy.runtime.routing import OutputCollector, build_routes
from jstormpy.runtime.task_host import TaskCommand, TaskHost, TaskStopped
from jstormpy.runtime.task_wiring import input_field_index, restore_component
from jstormpy.runtime.transport import Transport
from jstormpy.security.tls import grpc_channel, tls_dir_from_env
from jstormpy.security.tokens import auth_metadata, secret_from_env
from jstormpy.state_backends import StateBackend, open_backend
from jstormpy.state_backends.changelog import load_task_snapshot
from jstormpy.state_backends.deadline import DeadlineBackend
from jstormpy.state_backends.rocksdb_files import (
    LocalCopies,
    download_checkpoint,
    materialise_into,
)
from jstormpy.state_store import MemoryStore, RocksDBMemory, RocksDBStore, open_store
from jstormpy.temp_dirs import process_temp_dir
from jstormpy.terminal import ignore_terminal_interrupt
from jstormpy.window.combine import SenderAggregation, combine_refusal, sender_aggregation

log = logging.getLogger("jstormpy.worker")

_STOP = object()
WORKER_HOST_ENV = "JSTORM_WORKER_HOST"


@dataclass(frozen=True)
class Inboxes:
    """The task input queues of one generation (replaced whole, never re-tagged in place)."""

    generation: int
    queues: dict[int, TaskInbox]


@dataclass(frozen=True)
class _Wiring:
    """The worker-wide wiring of a generation's tasks (``Worker._begin_build``)."""

    component_tasks: dict[str, tuple[int, ...]]
    task_component: dict[int, str]
    user_conf: dict[str, Any]
    chained: dict[int, int]
    channels_in: dict[int, tuple[int, ...]]


class _PreparePort:
    """A Prepare's steps (``runtime/prepare_steps.py``) on this process: snapshot reads
    block the control thread and answer at once."""

    def __init__(self, worker: Worker, msg: Any) -> None:
        self.worker = worker
        self.msg = msg
        self.wiring: _Wiring | None = None
        self.executors: dict[int, TaskExecutor] = {}
        self.answer: pb.Ready | None = None

    @property
    def generation(self) -> int:
        return self.worker.generation

    def stop_tasks(self, generation: int) -> None:
        self.worker.stop_tasks(new_generation=generation)

    def take_generation(self, generation: int) -> None:
        w, msg = self.worker, self.msg
        assert w.transport is not None
        w.generation = generation
        w.prepare_inboxes(generation)
        w.transport.set_generation(generation)
        w.transport.reset()
        w.peer_addresses = {p.worker_id: (p.host, p.port) for p in msg.peers}
        w.transport.set_peers(w.peer_addresses)
        w.task_workers = dict(msg.task_workers)
        w.tasks_generation = generation
        w.building_task = 0

    def read_snapshot(self, task_id: int, handle: str,
                      then: Callable[[Any, BaseException | None], None]) -> None:
        w = self.worker
        assert w.config is not None
        try:
            if w.backend is None:
                raise JStormError("restore requested but no state backend configured")
            # a RocksDB store may open a native checkpoint's files as they are
            snapshot = load_task_snapshot(w.backend, handle,
                                          keep_native=w.config.state_store == "rocksdb")
        except Exception as exc:
            then(None, exc)
            return
        then(snapshot, None)

    def current(self, generation: int) -> bool:
        return generation == self.worker.generation

    def begin_build(self, tasks: Sequence[int]) -> None:
        self.wiring = self.worker._begin_build(list(tasks))

    def build_task(self, task_id: int, snapshot: Any) -> None:
        assert self.wiring is not None
        msg = self.msg
        handle = next((r.handle for r in msg.restores if r.task_id == task_id), "")
        try:
            self.executors[task_id] = self.worker._build_task(
                self.wiring, task_id, snapshot, msg.checkpoint_id,
                bool(msg.restored_checkpoint_id) or msg.partial, handle)
        except Exception:
            log.exception("building task %s for generation %s failed", task_id,
                          msg.generation)
            raise

    def built(self, tasks: Sequence[int]) -> None:
        self.worker.executors.update(self.executors)

    def sinks(self) -> Sequence[int]:
        return [t for t, ex in sorted(self.executors.items()) if ex.is_sink]

    def restore_sink(self, task_id: int) -> None:
        # re-commit the restored staged transactions, then recover
        self.executors[task_id].restore_sink(self.msg.restored_checkpoint_id or None,
                                             self.msg.checkpoint_id)

    def answerable(self, error: Exception) -> bool:
        return True  # a user's component, a store or a sink: the Prepare failed

    def ready(self, ready: prepare_steps.Ready) -> None:
        w = self.worker
        assert w.config is not None
        if ready.ok:
            apply_collector_policy(w.config.worker_gc)  # the new tasks' heap, once built
        else:
            log.error("prepare of generation %s failed: %s", ready.generation, ready.error)
        self.answer = pb.Ready(worker_id=w.worker_id, generation=ready.generation,
                               ok=ready.ok, error=ready.error,
                               failed_task=ready.failed_task,
                               corrupt_snapshot=ready.corrupt)


def topology_hash_seed(name: str) -> str:
    """The PYTHONHASHSEED of every worker: one engine-wide value (``name`` is unused), so a
    user's ``hash()`` of a ``str`` agrees between workers and restarts and one pre-started
    zygote serves any topology. Routing uses ``keygroups.key_hash``, not ``hash()``."""
    del name
    return str(zlib.crc32(b"jstormpy") % 4_294_967_295)


class Worker(TaskHost):
    """One worker process."""

    def __init__(self, tm_address: str, worker_id: int, secret: bytes,
                 code_version: str = "") -> None:
        self.tm_address = tm_address
        self.worker_id = worker_id
        self.secret = secret
        self.code_version = code_version or os.environ.get("JSTORM_CODE_VERSION", "v1")
        self.launch_attempt = int(os.environ.get("JSTORM_LAUNCH_ATTEMPT") or 0)  # Spark only
        self.generation = 0
        self.run: RunIdentity | None = None  # the run the TM drives (run_identity.py)
        self.max_parallelism = 0  # number of key groups, set when tasks are built
        self.guarantee = "exactly_once"
        self.executors: dict[int, TaskExecutor] = {}
        self.task_ops = taskops.TaskOps(self)  # task logs, live log levels and settings
        self.building_task = 0  # the task being built (0: none yet; logs name it)
        self.state_stores: dict[int, MemoryStore | RocksDBStore] = {}  # Config.state_store
        # Config.rocksdb_memory_mb: one block cache and write buffer manager for all this
        # worker's task databases (made with the first; kept across generations)
        self.rocksdb_memory: RocksDBMemory | None = None
        # where the task databases go without a state_store_dir or a run directory (made
        # with the first; removed when this process exits, or after a kill by the next)
        self.own_state_store_dir: Path | None = None
        # the input queues of this worker's tasks, tagged with their generation: the
        # receiving threads check a frame's generation and look its queue up in one read
        self.inboxes = Inboxes(0, {})
        self.gate = CreditGate()
        self.task_inputs: dict[int, int] = {}
        self.chained: dict[int, TaskExecutor] = {}  # chained consumer tasks (channel_plan.py)
        self.task_workers: dict[int, int] = {}
        self.outbox: queue.Queue[Any] = queue.Queue()
        # With TLS the channel verifies the server is the topology's TM (certificate
        # ``jstorm-tm`` signed by the topology CA) before any byte it sends is decoded
        # (cloudpickle.loads of the topology, control messages).
        self.tls_dir = tls_dir_from_env()
        self.channel = grpc_channel(tm_address, self.tls_dir or None, "worker", options=[
            ("grpc.max_receive_message_length", 256 << 20),
            ("grpc.max_send_message_length", 256 << 20),
            # workers start alongside the TM: retry the connection within tens of ms, not
            # gRPC's default 1 s reconnect back-off
            ("grpc.initial_reconnect_backoff_ms", 10),
            ("grpc.min_reconnect_backoff_ms", 10),
            ("grpc.max_reconnect_backoff_ms", 50)])
        self.stub = pb_grpc.TopologyMasterStub(self.channel)
        self.tasks_stopping = False
        self.tasks_generation = 0
        self.lost_reported = -1
        self.incarnation = f"{os.getpid()}-{os.urandom(4).hex()}"  # fencing: snapshot keys
        self.credit_totals = GrantTotals()  # remote channels into my tasks
        self.peer_addresses: dict[int, tuple[str, int]] = {}
        self.shutdown = threading.Event()
        self.heartbeat_now = threading.Event()  # set: send a heartbeat without waiting
        self.exit_code = 0
        self.topology: Topology | None = None
        self.config: Config | None = None
        self.backend: StateBackend | None = None
        self.transport: Transport | None = None
        self.component_blobs: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self._proc: Any = None

    # -- start-up ------------------------------------------------------------------------------
    def fetch_topology(self, timeout_s: float = 60.0) -> None:
        """Fetch the topology and config from the TM (retrying while it starts)."""
        deadline = time.monotonic() + timeout_s
        self.wait_for_tm_port(deadline)
        pause = 0.005
        while True:
            try:
                # the TM may still be starting: wait_for_ready sends the call the moment the
                # channel connects (it retries every 10-50 ms) instead of failing fast
                request = pb.TopologyRequest(worker_id=self.worker_id)
                blob = self.stub.GetTopology(
                    request, metadata=auth_metadata(self.secret, "GetTopology", request),
                    timeout=max(0.1, min(10.0, deadline - time.monotonic())),
                    wait_for_ready=True)
                break
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                    raise SystemExit(f"worker {self.worker_id}: the Topology Master refused "
                                     f"our secret: {exc.details()}") from exc
                if time.monotonic() > deadline:
                    raise SystemExit(f"worker {self.worker_id}: Topology Master at "
                                     f"{self.tm_address} unreachable: {exc.details()}") from exc
                self.shutdown.wait(pause)
                pause = min(pause * 2, 0.2)
        if blob.package:  # gray release: this worker's assigned code package
            from jstormpy.operations.codepkg import load_package_topology

            self.topology = load_package_topology(blob.package, blob.entry, blob.digest,
                                                  blob.code_version)
        else:
            self.topology = cloudpickle.loads(blob.topology)
        self.code_version = blob.code_version or self.code_version
        self.config = Config.from_dict(json.loads(blob.config_json))
        self.guarantee = self.config.guarantee
        assert self.topology is not None
        for spec in self.topology.components.values():
            self.component_blobs[spec.name] = pickling.dumps(spec.obj)
        if self.config.state_backend:
            self.backend = DeadlineBackend(  # a hung backend fails the upload, in time
                open_backend(self.config.state_backend, **self.config.state_backend_options),
                self.config.state_backend_timeout_ms)
        # the run the TM drives (run_identity.py), from the TM itself: a worker restarted
        # while the state backend is unreachable must not fail on reading it there
        self.run = RunIdentity.from_dict(json.loads(blob.run_json)) if blob.run_json else None

    def wait_for_tm_port(self, deadline: float) -> None:
        """Return once the TM's port accepts a TCP connection (or at ``deadline``).

        A worker starts together with the TM and usually before it listens. A gRPC channel
        whose first connection is refused waits out its reconnect back-off, measured at
        about 200 ms whatever the channel's back-off options say; a plain connect every
        5 ms costs nothing, so the channel's first attempt goes out once the TM listens
        (``bench/startup_bench.py``: ``first_register``)."""
        host, _, port = self.tm_address.rpartition(":")
        while not self.shutdown.is_set():
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=0.1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # the RPC below reports the TM unreachable, with gRPC's reason
                self.shutdown.wait(0.005)

    @property
    def host(self) -> str:
        """The address this worker binds and advertises: ``$JSTORM_WORKER_HOST`` if set (a
        launcher whose workers run on other machines than the TM, e.g. Spark executors,
        sets it), else ``Config.host``."""
        return os.environ.get(WORKER_HOST_ENV) or (self.config.host if self.config
                                                   else "127.0.0.1")

    def start_transport(self) -> None:
        """Bind the data-plane server."""
        assert self.config is not None
        self.transport = Transport(self.worker_id, self.secret, self._deliver, host=self.host,
                                   max_frame_bytes=self.config.max_frame_bytes,
                                   send_buffer_bytes=self.config.send_buffer_bytes,
                                   deliver_generation=True, on_credit=self._credit_granted,
                                   on_loss=lambda worker, _why: self._frames_lost(worker),
                                   tls_dir=self.tls_dir)  # mutual TLS on the data plane
        self.transport.start()

    # -- data plane ----------------------------------------------------------------------------
    def prepare_inboxes(self, generation: int) -> None:
        """Tag the task queues with ``generation`` (a partial Prepare keeps the running
        tasks' queues; after ``stop_tasks`` there are none)."""
        if self.inboxes.generation != generation:
            self.inboxes = Inboxes(generation, dict(self.inboxes.queues))

    def add_inbox(self, task_id: int, inbox: TaskInbox) -> None:
        """The input queue of a task being built for the current generation."""
        self.inboxes.queues[task_id] = inbox

    def _deliver(self, dst_task: int, item: Any, generation: int) -> None:
        inboxes = self.inboxes  # one read: a Prepare replaces them whole (hole 8)
        if generation != inboxes.generation:
            return
        q = inboxes.queues.get(dst_task)
        if q is not None:
            q.put(item)  # never blocks: the sender spent a credit for it

    def _credit_granted(self, src: int, dst: int, total: int, generation: int) -> None:
        """A CREDIT frame: the receiver of ``src -> dst`` has returned ``total`` credits."""
        if generation == self.inboxes.generation:
            self.gate.release_total(src, dst, total)

    def channel_credits(self, dst: int) -> int:
        """Credits of each channel into task ``dst``: its queue budget over its inputs."""
        assert self.config is not None
        return max(2, self.config.queue_capacity // max(1, self.task_inputs.get(dst, 1)))

    def _stopping(self) -> bool:
        return self.tasks_stopping

    def send(self, dst: int, item: Any) -> None:
        """Send an item to task ``dst`` (in memory if local, else over the transport),
        after spending one credit of the channel (blocks while it has none)."""
        chained = self.chained.get(dst)
        if chained is not None:  # a chained consumer: run it here, in the sender's thread
            chained.run_chained(item)
            return
        try:
            self.gate.acquire(item[0], dst, self._stopping)
        except Stopped:
            raise TaskStopped from None
        q = self.inboxes.queues.get(dst)
        if q is not None:
            q.put(item)
            return
        worker = self.task_workers.get(dst)
        if worker is None:
            return
        assert self.transport is not None
        if not self.transport.send(worker, dst, item, self.tasks_generation):
            if self.tasks_stopping:
                raise TaskStopped
            self._frames_lost(worker)

    def return_credit(self, src: int, dst: int, n: int) -> None:
        """The task ``dst`` here processed ``n`` items of channel ``src → dst``."""
        worker = self.task_workers.get(src)
        if worker == self.worker_id:
            self.gate.release(src, dst, n)
        elif worker is not None and self.transport is not None:
            total = self.credit_totals.add(src, dst, n)
            self.transport.send_credit(worker, src, dst, total, self.tasks_generation)

    def resend_credit_totals(self) -> None:
        """Re-send every remote channel's credit total (heals a lost grant). Never waits
        for a peer (it runs on the heartbeat thread): a channel still (re)connecting gets
        its total with a later heartbeat."""
        for (src, dst), total in self.credit_totals.items():
            worker = self.task_workers.get(src)
            if worker is not None and worker != self.worker_id and self.transport is not None:
                self.transport.send_credit(worker, src, dst, total, self.tasks_generation,
                                           wait=False)

    def _frames_lost(self, worker: int) -> None:
        """A frame to ``worker`` was dropped (connection lost). Under exactly-/at-least-once
        that is a failure: report it once per generation so the TM rolls back."""
        if self.guarantee == "at_most_once" or self.lost_reported == self.tasks_generation:
            return
        self.lost_reported = self.tasks_generation
        exc = JStormError(f"transport dropped frames to worker {worker} (connection lost)")
        self.report_error(-1, "transport", exc, None)

    # -- TaskHost ------------------------------------------------------------------------------
    def write_snapshot(self, checkpoint_id: int, task_id: int, data: bytes | Iterable[bytes],
                       refs: bytes | None = None, *, generation: int | None = None) -> str:
        if self.backend is None:
            raise JStormError("no state backend configured")
        gen = self.generation if generation is None else generation
        return self.backend.put_snapshot(checkpoint_id, task_id, data, gen,
                                         self.incarnation, refs=refs)

    def ack_checkpoint(self, checkpoint_id: int, task_id: int, handle: str, size: int,
                       finished: bool, alignment_ms: float, snapshot_ms: float, *,
                       generation: int | None = None, pause_ms: float = 0.0) -> None:
        gen = self.generation if generation is None else generation
        task = self.executors.get(task_id)
        if finished or (task is not None and task.inputs_finished):
            # a task past its input's end acks the checkpoint the run may drain at: its
            # final counts go first, on the same ordered stream, so the TM holds them when
            # the run drains (a user reading metrics() after wait() sees every tuple)
            self.outbox.put(self._heartbeat())
        self.outbox.put(pb.WorkerMessage(checkpoint_ack=pb.CheckpointAck(
            checkpoint_id=checkpoint_id, generation=gen, task_id=task_id,
            handle=handle, size_bytes=size, finished=finished, alignment_ms=alignment_ms,
            snapshot_ms=snapshot_ms, pause_ms=pause_ms)))

    def fail_checkpoint(self, checkpoint_id: int, task_id: int, reason: str, *,
                        generation: int | None = None) -> None:
        gen = self.generation if generation is None else generation
        self.outbox.put(pb.WorkerMessage(checkpoint_failed=pb.CheckpointFailed(
            checkpoint_id=checkpoint_id, generation=gen, task_id=task_id,
            reason=reason)))

    def report_error(self, task_id: int, component: str, exc: BaseException,
                     tup: Any) -> None:
        self.outbox.put(pb.WorkerMessage(task_error=pb.TaskError(
            task_id=task_id, component=component, message=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc))[-8000:],
            tuple_repr=repr(tup)[:2000], generation=self.generation)))

    def report_committed(self, checkpoint_id: int, task_id: int) -> None:
        self.outbox.put(pb.WorkerMessage(sink_committed=pb.SinkCommitted(
            checkpoint_id=checkpoint_id, task_id=task_id, generation=self.generation)))

    # -- task lifecycle ------------------------------------------------------------------------
    def stop_tasks(self, timeout_s: float = 30.0, new_generation: int | None = None) -> None:
        """Stop every task thread and forget the tasks.

        Order matters for exactly-once: flag the tasks, switch the transport to the new
        generation (which unblocks senders and makes it refuse frames of the old tasks),
        then join, and only then replace the input queues.
        """
        self.tasks_stopping = True
        for ex in self.executors.values():
            ex.stop()
        if new_generation is not None and self.transport is not None:
            self.generation = new_generation
            self.transport.set_generation(new_generation)
        elif self.transport is not None:  # a send waiting for a peer would hold us up
            self.transport.interrupt_sends()  # the next Prepare switches sending back on
        deadline = time.monotonic() + timeout_s
        for ex in self.executors.values():
            if not ex.join(max(deadline - time.monotonic(), 0.01)):
                log.error("task %s did not stop within %.0f s (stuck in user code); "
                          "exiting so the worker is restarted", ex.task_id, timeout_s)
                os._exit(3)
        self.executors = {}
        self._close_state_stores()
        self.chained = {}
        self.inboxes = Inboxes(self.generation, {})
        self.gate = CreditGate()
        self.credit_totals = GrantTotals()
        self.tasks_stopping = False

    def prepare(self, msg: Any) -> pb.Ready | None:
        """Handle Prepare: rebuild and restore this worker's tasks for a new generation, in
        the one order of ``runtime/prepare_steps.py``; None for a stale Prepare (a newer one
        overtook it: it is not answered)."""
        assert self.topology is not None and self.config is not None
        assert self.transport is not None
        port = _PreparePort(self, msg)
        prepare_steps.perform(prepare_steps.PrepareOrder(
            msg.generation, tuple(msg.task_ids), {r.task_id: r.handle for r in msg.restores},
            msg.partial), port)
        return port.answer

    def _connect_channels(self, tasks: Iterable[int]) -> None:
        """Open the data-plane connections to the workers of ``tasks`` (a task's consumers
        get its data, its remote sources its credit) now, while the tasks are built and
        the other workers prepare: TCP, TLS and the handshake then happen before Start,
        not on the first frame of the run."""
        assert self.transport is not None
        self.transport.connect({w for w in map(self.task_workers.get, tasks)
                                if w is not None and w != self.worker_id})

    def _begin_build(self, task_ids: list[int]) -> _Wiring:
        """The worker-wide wiring of the new generation's ``task_ids`` (chaining, input
        channels, input queues), once every snapshot is read and before a task is built."""
        topo = self.topology
        conf = self.config
        assert topo is not None and conf is not None
        component_tasks = topo.task_ids()
        self.max_parallelism = resolve_max_parallelism(
            conf.max_parallelism, (len(ts) for ts in component_tasks.values()))
        chained = chain_plan(topo.components, component_tasks, self.task_workers, conf.chaining)
        channels_in = input_channels(topo.components, component_tasks, chained)
        self.task_inputs = {t: len(srcs) for t, srcs in channels_in.items()}
        for task_id in task_ids:
            self.add_inbox(task_id, TaskInbox(conf.queue_capacity))
        self._drop_foreign_state_stores(task_ids)
        return _Wiring(component_tasks, {t: name for name, ts in component_tasks.items()
                                         for t in ts},
                       {**conf.to_dict(), **conf.user}, chained, channels_in)

    def _build_task(self, wiring: _Wiring, task_id: int, snapshot: dict[str, Any] | None,
                    checkpoint_id: int, restored: bool, handle: str) -> TaskExecutor:
        """Build task ``task_id`` from ``snapshot`` (None: fresh state), not started.
        ``checkpoint_id``: the id floor (new transactions start above it); ``restored``:
        the tasks restore a checkpoint, or the other workers' tasks keep running (a
        partial Prepare)."""
        topo = self.topology
        conf = self.config
        assert topo is not None and conf is not None
        component_tasks, chained = wiring.component_tasks, wiring.chained
        self.building_task = task_id  # named in the Ready of a failed prepare
        name = wiring.task_component[task_id]
        spec = topo.components[name]
        obj = cloudpickle.loads(self.component_blobs[name])
        comp = obj() if isinstance(obj, type) else obj
        consumers = [(c.name, g) for c, g in topo.consumers(name)]
        routes, channels = build_routes(task_id, name, spec.streams, consumers,
                                        component_tasks, self.task_workers, self.send,
                                        conf.batch_size, self.max_parallelism, chained,
                                        self._combining)
        collector = OutputCollector(task_id, name, routes, channels, self.send,
                                    streams=dict(spec.streams))
        collector.restore_forwarded(restored_bound(snapshot, restored))
        bind_task(comp, collector, self.task_ops.task_logger(name, task_id))
        inputs = wiring.channels_in[task_id]
        self._connect_channels((*collector.channels, *inputs))
        context = TopologyContext(
            topology=topo.name, component=name, task_id=task_id,
            task_index=component_tasks[name].index(task_id), worker_id=self.worker_id,
            component_tasks=component_tasks, input_tasks=inputs,
            output_fields=spec.streams, generation=self.generation, run=self.run)
        groups = key_group_range(self.max_parallelism, len(component_tasks[name]),
                                 component_tasks[name].index(task_id))
        where = f"task snapshot {handle}"
        native = self._native_restore(snapshot, comp, groups, where)
        snap = restore_component(comp, snapshot, self.max_parallelism,
                                 f"component {name!r}, task {task_id}")
        self._open_state_store(comp, task_id, groups, native, where)
        source_index = input_field_index(topo, name, component_tasks)
        incremental = None if self.guarantee == "at_most_once" else make_incremental(
            comp, task_id, key_group_range(self.max_parallelism, context.parallelism,
                                           context.task_index),
            self.max_parallelism, conf, snap)
        if spec.kind == "spout":
            comp.open(wiring.user_conf, context)
        else:
            comp.prepare(wiring.user_conf, context)
        credit_batch = {
            src: 1 if self.task_workers.get(src) == self.worker_id
            else max(1, self.channel_credits(task_id) // 2) for src in inputs}
        ex = TaskExecutor(task_id, name, spec.kind, comp, collector, self,
                          is_sink=spec.is_sink, inq=self.inboxes.queues.get(task_id),
                          input_channels=inputs, source_index=source_index,
                          linger_s=conf.batch_linger_ms / 1000.0, restored=snap,
                          credit_batch=credit_batch,
                          id_floor=checkpoint_id or 0,
                          incremental=incremental)
        self.gate.reset({(task_id, dst): self.channel_credits(dst)
                         for dst in collector.channels})
        # a rebuilt task's input channels count from 0 again
        self.credit_totals.forget(lambda _src, dst: dst == task_id)
        if task_id in chained:  # runs in its source task's thread (channel_plan.py)
            ex.chained = True
            self.chained[task_id] = ex
            log.info("task %d (%s) runs chained into task %d", task_id, name, chained[task_id])
        return ex

    def _combining(self, consumer: str, grouping: Any) -> SenderAggregation | None:
        """Where a subscription may be combined before the shuffle: the aggregation of
        a fresh copy of the consumer (``window/combine.py``), else None."""
        topo = self.topology
        assert topo is not None
        if combine_refusal(topo.components[consumer].obj) is not None:
            return None
        obj = cloudpickle.loads(self.component_blobs[consumer])
        bolt = obj() if isinstance(obj, type) else obj
        late = getattr(bolt, "late_stream", None)
        late_consumed = any(g.stream == late for _, g in topo.consumers(consumer))
        aggregation = sender_aggregation(consumer, bolt, grouping.kind, grouping.fields,
                                         late_consumed)
        if aggregation is not None:
            log.info("task %d (%s) combines before the shuffle towards %r",
                     self.building_task, grouping.source, consumer)
        return aggregation

    def _native_restore(self, snap: dict[str, Any] | None, comp: Any, groups: range,
                        where: str) -> dict[str, Any] | None:
        """The native RocksDB checkpoint (``snap["rocksdb"]``) the task opens as it is: one
        of the same key groups, max parallelism and state version. Any other is read into
        ``snap["states"]`` here (the memory format: a rescale, a migration) and None is
        returned."""
        if snap is None or not snap.get("rocksdb"):
            return None
        entry = snap["rocksdb"]
        same = (entry.get("key_groups") == [groups.start, groups.stop]
                and entry.get("max_parallelism") == self.max_parallelism
                and snap.get("state_version") == getattr(type(comp), "state_version", None))
        assert self.backend is not None  # the snapshot came from it
        if not same:
            materialise_into(self.backend, snap, None, where)
            return None
        return snap.pop("rocksdb")  # type: ignore[no-any-return]

    def _open_state_store(self, comp: Any, task_id: int, groups: range,
                          native: dict[str, Any] | None = None, where: str = "") -> None:
        """Give the task its state store (``Config.state_store``); restored states move
        into it (RocksDB: a fresh database under the store directory, or the files of
        ``native``, a native checkpoint of the same key groups, downloaded into it)."""
        conf = self.config
        assert conf is not None
        if conf.state_store == "memory":
            return  # component.state's default: dicts, as restored
        old = self.state_stores.pop(task_id, None)
        if old is not None:  # an earlier prepare of this task failed part-way
            old.close()
        memory = self.rocksdb_memory
        budget = conf.rocksdb_memory_mb
        if budget is None or conf.state_store != "rocksdb":
            memory = None
        elif memory is None or memory.budget_mb != budget:
            memory = self.rocksdb_memory = RocksDBMemory(budget)
        store = open_store(conf.state_store, self._state_store_dir() / f"task-{task_id}",
                           self.max_parallelism,
                           level0_trigger=conf.rocksdb_level0_compaction_trigger,
                           memory=memory, compaction_style=conf.rocksdb_compaction_style)
        self.state_stores[task_id] = store
        if isinstance(store, RocksDBStore):
            store.key_groups = groups
            # incremental checkpoints of a RocksDB store: its native files, shared
            store.native_checkpoints = (conf.incremental()
                                        and self.backend is not None
                                        and self.guarantee != "at_most_once")
            if store.native_checkpoints or native is not None:  # local recovery
                store.local = LocalCopies(self._state_store_dir() / "local", task_id)
            if native is not None:
                assert self.backend is not None
                got = download_checkpoint(self.backend, native, store.path, where,
                                          store.local)
                store.local.seed(native)
                log.info("task %s: opened the RocksDB checkpoint of %s: %d SST file(s) "
                         "from local copies, %d downloaded (%d bytes)", task_id, where,
                         got.local, got.downloaded, got.downloaded_bytes)
                managed_states(comp).update(store.open_restored(
                    native["states"], got.files, native.get("crc32")))
        use_state_store(comp, store)
        store.adopt(managed_states(comp))

    def _state_store_dir(self) -> Path:
        """This worker's directory of task databases (``Config.state_store_dir``)."""
        conf = self.config
        assert conf is not None
        if conf.state_store_dir:
            base = Path(conf.state_store_dir)
        elif os.environ.get("JSTORM_RUN_DIR"):
            base = Path(os.environ["JSTORM_RUN_DIR"]) / "state-store"
        else:  # no run directory (e.g. on Spark): this process's own, never another job's
            if self.own_state_store_dir is None:
                self.own_state_store_dir = Path(process_temp_dir("jstorm-state-store-"))
            base = self.own_state_store_dir
        return base / f"worker-{self.worker_id}"

    def _drop_foreign_state_stores(self, task_ids: list[int]) -> None:
        """Delete the databases of tasks this worker no longer runs (a rescale or a new
        assignment moved them): their state lives in the checkpoint and their new home."""
        if self.config is None or self.config.state_store == "memory":
            return
        mine = {f"task-{t}" for t in task_ids} | {f"task-{t}.frozen" for t in task_ids}
        folder = self._state_store_dir()
        if folder.is_dir():
            for entry in folder.iterdir():
                if entry.name.startswith("task-") and entry.name not in mine:
                    shutil.rmtree(entry, ignore_errors=True)
            LocalCopies.drop_others(folder / "local", task_ids)  # and their local copies

    def _close_state_stores(self) -> None:
        for task_id, store in list(self.state_stores.items()):
            try:
                store.close()
            except Exception:
                log.exception("closing the state store of task %s failed", task_id)
        self.state_stores = {}

    def start_tasks(self) -> None:
        """Start every built task thread."""
        for ex in self.executors.values():
            if ex.thread is None:
                ex.start()

    # -- control stream ------------------------------------------------------------------------
    def _outbound(self, sent_all: threading.Event) -> Iterator[Any]:
        try:
            while True:
                item = self.outbox.get()
                if item is _STOP:
                    return
                yield item
        finally:
            sent_all.set()

    def _heartbeat_loop(self) -> None:
        assert self.config is not None
        period = self.config.heartbeat_interval_ms / 1000.0
        self._process()  # now, not in the heartbeat that may report the end of input
        while True:
            self.heartbeat_now.wait(period)
            self.heartbeat_now.clear()
            if self.shutdown.is_set():
                return
            self.outbox.put(self._heartbeat())
            self.resend_credit_totals()

    def spout_finished(self, task_id: int) -> None:
        """A spout finished: report it now (the TM then triggers the final checkpoint)."""
        self.heartbeat_now.set()

    def _heartbeat(self) -> Any:
        """A Heartbeat message with every task's current metrics."""
        return heartbeat_message(self.worker_id, self.generation, self.executors.values(),
                                 self._process(), self.state_stores)

    def _process(self) -> Any:
        """This process's ``psutil.Process`` (for its memory and CPU figures)."""
        if self._proc is None:
            import psutil  # the zygote imported it: free in a forked worker

            self._proc = psutil.Process()
        return self._proc

    def _register_message(self) -> Any:
        assert self.transport is not None
        return pb.WorkerMessage(register=pb.Register(
            worker_id=self.worker_id, pid=os.getpid(), host=self.host,
            data_port=self.transport.port, generation=self.generation,
            code_version=self.code_version, launch_attempt=self.launch_attempt))

    def serve(self, reconnect_timeout_s: float = 60.0) -> int:
        """Run the control loop until shutdown; reconnect if the TM restarts."""
        threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True).start()
        lost_since: float | None = None
        while not self.shutdown.is_set():
            self.outbox = queue.Queue()
            self.outbox.put(self._register_message())
            sent_all = threading.Event()
            try:
                responses = self.stub.Control(self._outbound(sent_all),
                                              metadata=auth_metadata(self.secret, "Control"))
                for msg in responses:
                    lost_since = None
                    self._dispatch(msg)
                    if self.shutdown.is_set():
                        break
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                    log.error("Topology Master refused our secret: %s", exc.details())
                    return 2
                log.warning("control stream to the Topology Master lost (%s): pausing tasks "
                            "and reconnecting", exc.code())
            finally:
                self.outbox.put(_STOP)
            if self.shutdown.is_set():
                # let the final heartbeat (queued with the shutdown) reach the TM
                sent_all.wait(2.0)
                break
            self.stop_tasks()
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since > reconnect_timeout_s:
                log.error("Topology Master gone for %.0f s; exiting", reconnect_timeout_s)
                return 4
            self.shutdown.wait(0.2)
        self.stop_tasks()
        if self.transport is not None:
            self.transport.close()
        return self.exit_code

    def _dispatch(self, msg: Any) -> None:
        body = msg.WhichOneof("body")
        if body == "prepare":
            ready = self.prepare(msg.prepare)
            if ready is not None:  # (a stale Prepare is not answered)
                self.outbox.put(pb.WorkerMessage(ready=ready))
        elif body == "start":
            if msg.start.generation == self.generation:
                self.start_tasks()
        elif body == "trigger":
            if msg.trigger.generation == self.generation:
                cmd = TaskCommand.TRIGGER_PAUSE if msg.trigger.pause else TaskCommand.TRIGGER
                for ex in self.executors.values():
                    if ex.kind == "spout":
                        ex.command(cmd, msg.trigger.checkpoint_id)
        elif body == "resume":  # gray release: end of a quiescent pause
            if msg.resume.generation == self.generation:
                # the upgrade keeps the generation: frames dropped to the restarted workers
                # during the pause are expected; a later real drop must be reported again
                self.lost_reported = -1
                for ex in self.executors.values():
                    ex.command(TaskCommand.RESUME, None)  # spouts emit, bolts tick again
        elif body == "complete":
            if msg.complete.generation == self.generation:
                for ex in self.executors.values():
                    ex.command(TaskCommand.COMPLETE, msg.complete.checkpoint_id)
        elif body == "peers":
            assert self.transport is not None
            new = {p.worker_id: (p.host, p.port) for p in msg.peers.peers}
            changed = {w for w, addr in new.items() if self.peer_addresses.get(w) != addr}
            self.peer_addresses = new
            self.transport.set_peers(new)
            # a restarted peer starts with empty queues: channels into it get full credit
            self.gate.reset({(src, dst): self.channel_credits(dst)
                             for src, ex in self.executors.items()
                             for dst in ex.collector.channels
                             if self.task_workers.get(dst) in changed})
            # a restarted sender's gate counts from 0 again
            self.credit_totals.forget(lambda src, _dst: self.task_workers.get(src) in changed)
        elif body == "throttle":
            until = 0.0 if msg.throttle.release else (
                time.monotonic() + msg.throttle.lease_ms / 1000.0)
            for t in msg.throttle.spout_tasks:
                spout = self.executors.get(t)
                if spout is not None:
                    spout.command(TaskCommand.THROTTLE, until)
        elif body == "shutdown":
            log.info("shutdown requested: %s", msg.shutdown.reason)
            # final metrics: without this, `metrics()` after a drain shows the counts of
            # the last periodic heartbeat, which may predate the end of the run
            self.outbox.put(self._heartbeat())
            self.exit_code = msg.shutdown.exit_code or self.exit_code  # 75: restart (upgrade)
            self.shutdown.set()
            self.heartbeat_now.set()
        elif body in ("set_log_level", "set_config"):  # operations: jstorm loglevel/config
            self.task_ops.apply(msg)


def pin_to(cpu: int) -> None:
    """Put this process's thread, and every thread it starts from now on, on ``cpu``
    (``Config.worker_cpu_affinity``); where the OS refuses, say so and run anywhere."""
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError) as exc:
        log.warning("could not run on CPU %d (%s): the OS places this worker's threads", cpu,
                    exc)


def main(argv: list[str] | None = None) -> int:
    """Entry point of a worker process."""
    ignore_terminal_interrupt()  # the launcher owns Ctrl-C (jstormpy/terminal.py)
    parser = argparse.ArgumentParser(prog="jstormpy.runtime.worker")
    parser.add_argument("--tm", required=True, help="Topology Master address host:port")
    parser.add_argument("--worker-id", type=int, required=True)
    parser.add_argument("--log-level", default=os.environ.get("JSTORM_LOG_LEVEL", "INFO"))
    parser.add_argument("--cpu", type=int, default=None,
                        help="run on this CPU (the launcher's placement, "
                             "jstormpy/deploy/cpu_placement.py)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s worker-{args.worker_id} pid={os.getpid()} "
               "%(name)s: %(message)s")
    host, _, port = args.tm.rpartition(":")
    tm = "%s:%d" % chaos_route(args.worker_id, "tm", (host, int(port)))  # chaos tests only
    set_process_title(f"jstorm worker {args.worker_id}")
    title_threads()
    if args.cpu is not None:
        pin_to(args.cpu)
    worker = Worker(tm, args.worker_id, secret_from_env())
    worker.fetch_topology()
    assert worker.topology is not None
    set_process_title(f"jstorm worker {args.worker_id} {worker.topology.name}")
    seed = topology_hash_seed(worker.topology.name)
    if os.environ.get("PYTHONHASHSEED") != seed:
        # fields grouping needs the same str/bytes hash in every worker: re-exec with the seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        os.execve(sys.executable, [sys.executable, "-m", "jstormpy.runtime.worker", *sys.argv[1:]],
                  env)
    worker.start_transport()
    socket.setdefaulttimeout(None)
    # fewer GIL hand-overs between a worker's task threads (they pass whole batches)
    sys.setswitchinterval(0.02)
    return worker.serve()


if __name__ == "__main__":
    sys.exit(main())
