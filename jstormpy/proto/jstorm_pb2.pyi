from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkerMessage(_message.Message):
    __slots__ = ("register", "heartbeat", "checkpoint_ack", "checkpoint_failed", "ready", "task_error", "sink_committed")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ACK_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FAILED_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    TASK_ERROR_FIELD_NUMBER: _ClassVar[int]
    SINK_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    register: Register
    heartbeat: Heartbeat
    checkpoint_ack: CheckpointAck
    checkpoint_failed: CheckpointFailed
    ready: Ready
    task_error: TaskError
    sink_committed: SinkCommitted
    def __init__(self, register: _Optional[_Union[Register, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., checkpoint_ack: _Optional[_Union[CheckpointAck, _Mapping]] = ..., checkpoint_failed: _Optional[_Union[CheckpointFailed, _Mapping]] = ..., ready: _Optional[_Union[Ready, _Mapping]] = ..., task_error: _Optional[_Union[TaskError, _Mapping]] = ..., sink_committed: _Optional[_Union[SinkCommitted, _Mapping]] = ...) -> None: ...

class Register(_message.Message):
    __slots__ = ("worker_id", "pid", "host", "data_port", "generation", "code_version", "launch_attempt")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    DATA_PORT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CODE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    pid: int
    host: str
    data_port: int
    generation: int
    code_version: str
    launch_attempt: int
    def __init__(self, worker_id: _Optional[int] = ..., pid: _Optional[int] = ..., host: _Optional[str] = ..., data_port: _Optional[int] = ..., generation: _Optional[int] = ..., code_version: _Optional[str] = ..., launch_attempt: _Optional[int] = ...) -> None: ...

class TaskMetrics(_message.Message):
    __slots__ = ("task_id", "emitted", "executed", "queue_depth", "queue_capacity", "latency_ms_sum", "latency_samples", "latency_buckets", "finished", "errors", "late_records", "throttled", "cpu_seconds", "state_records", "store")
    class StoreEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_SUM_FIELD_NUMBER: _ClassVar[int]
    LATENCY_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    LATENCY_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    LATE_RECORDS_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STATE_RECORDS_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    emitted: int
    executed: int
    queue_depth: int
    queue_capacity: int
    latency_ms_sum: float
    latency_samples: int
    latency_buckets: _containers.RepeatedScalarFieldContainer[int]
    finished: bool
    errors: int
    late_records: int
    throttled: bool
    cpu_seconds: float
    state_records: int
    store: _containers.ScalarMap[str, float]
    def __init__(self, task_id: _Optional[int] = ..., emitted: _Optional[int] = ..., executed: _Optional[int] = ..., queue_depth: _Optional[int] = ..., queue_capacity: _Optional[int] = ..., latency_ms_sum: _Optional[float] = ..., latency_samples: _Optional[int] = ..., latency_buckets: _Optional[_Iterable[int]] = ..., finished: _Optional[bool] = ..., errors: _Optional[int] = ..., late_records: _Optional[int] = ..., throttled: _Optional[bool] = ..., cpu_seconds: _Optional[float] = ..., state_records: _Optional[int] = ..., store: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("worker_id", "generation", "tasks", "rss_bytes", "cpu_percent")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    generation: int
    tasks: _containers.RepeatedCompositeFieldContainer[TaskMetrics]
    rss_bytes: int
    cpu_percent: float
    def __init__(self, worker_id: _Optional[int] = ..., generation: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[TaskMetrics, _Mapping]]] = ..., rss_bytes: _Optional[int] = ..., cpu_percent: _Optional[float] = ...) -> None: ...

class CheckpointAck(_message.Message):
    __slots__ = ("checkpoint_id", "generation", "task_id", "handle", "size_bytes", "finished", "alignment_ms", "snapshot_ms", "pause_ms")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENT_MS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_MS_FIELD_NUMBER: _ClassVar[int]
    PAUSE_MS_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    generation: int
    task_id: int
    handle: str
    size_bytes: int
    finished: bool
    alignment_ms: float
    snapshot_ms: float
    pause_ms: float
    def __init__(self, checkpoint_id: _Optional[int] = ..., generation: _Optional[int] = ..., task_id: _Optional[int] = ..., handle: _Optional[str] = ..., size_bytes: _Optional[int] = ..., finished: _Optional[bool] = ..., alignment_ms: _Optional[float] = ..., snapshot_ms: _Optional[float] = ..., pause_ms: _Optional[float] = ...) -> None: ...

class CheckpointFailed(_message.Message):
    __slots__ = ("checkpoint_id", "generation", "task_id", "reason")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    generation: int
    task_id: int
    reason: str
    def __init__(self, checkpoint_id: _Optional[int] = ..., generation: _Optional[int] = ..., task_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Ready(_message.Message):
    __slots__ = ("worker_id", "generation", "ok", "error", "failed_task", "corrupt_snapshot")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILED_TASK_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    generation: int
    ok: bool
    error: str
    failed_task: int
    corrupt_snapshot: bool
    def __init__(self, worker_id: _Optional[int] = ..., generation: _Optional[int] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ..., failed_task: _Optional[int] = ..., corrupt_snapshot: _Optional[bool] = ...) -> None: ...

class TaskError(_message.Message):
    __slots__ = ("task_id", "component", "message", "traceback", "tuple_repr", "generation")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    TUPLE_REPR_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    component: str
    message: str
    traceback: str
    tuple_repr: str
    generation: int
    def __init__(self, task_id: _Optional[int] = ..., component: _Optional[str] = ..., message: _Optional[str] = ..., traceback: _Optional[str] = ..., tuple_repr: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class SinkCommitted(_message.Message):
    __slots__ = ("checkpoint_id", "task_id", "generation")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    task_id: int
    generation: int
    def __init__(self, checkpoint_id: _Optional[int] = ..., task_id: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class MasterMessage(_message.Message):
    __slots__ = ("prepare", "start", "trigger", "complete", "abort", "peers", "shutdown", "throttle", "resume", "set_log_level", "set_config")
    PREPARE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    SET_LOG_LEVEL_FIELD_NUMBER: _ClassVar[int]
    SET_CONFIG_FIELD_NUMBER: _ClassVar[int]
    prepare: Prepare
    start: Start
    trigger: TriggerCheckpoint
    complete: CompleteCheckpoint
    abort: AbortCheckpoint
    peers: Peers
    shutdown: Shutdown
    throttle: Throttle
    resume: ResumeSpouts
    set_log_level: LogLevelCommand
    set_config: ConfigCommand
    def __init__(self, prepare: _Optional[_Union[Prepare, _Mapping]] = ..., start: _Optional[_Union[Start, _Mapping]] = ..., trigger: _Optional[_Union[TriggerCheckpoint, _Mapping]] = ..., complete: _Optional[_Union[CompleteCheckpoint, _Mapping]] = ..., abort: _Optional[_Union[AbortCheckpoint, _Mapping]] = ..., peers: _Optional[_Union[Peers, _Mapping]] = ..., shutdown: _Optional[_Union[Shutdown, _Mapping]] = ..., throttle: _Optional[_Union[Throttle, _Mapping]] = ..., resume: _Optional[_Union[ResumeSpouts, _Mapping]] = ..., set_log_level: _Optional[_Union[LogLevelCommand, _Mapping]] = ..., set_config: _Optional[_Union[ConfigCommand, _Mapping]] = ...) -> None: ...

class WorkerAddress(_message.Message):
    __slots__ = ("worker_id", "host", "port")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    host: str
    port: int
    def __init__(self, worker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class TaskRestore(_message.Message):
    __slots__ = ("task_id", "handle")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    handle: str
    def __init__(self, task_id: _Optional[int] = ..., handle: _Optional[str] = ...) -> None: ...

class Prepare(_message.Message):
    __slots__ = ("generation", "checkpoint_id", "task_ids", "restores", "peers", "task_workers", "partial", "restored_checkpoint_id")
    class TaskWorkersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    RESTORES_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    TASK_WORKERS_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    RESTORED_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    generation: int
    checkpoint_id: int
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    restores: _containers.RepeatedCompositeFieldContainer[TaskRestore]
    peers: _containers.RepeatedCompositeFieldContainer[WorkerAddress]
    task_workers: _containers.ScalarMap[int, int]
    partial: bool
    restored_checkpoint_id: int
    def __init__(self, generation: _Optional[int] = ..., checkpoint_id: _Optional[int] = ..., task_ids: _Optional[_Iterable[int]] = ..., restores: _Optional[_Iterable[_Union[TaskRestore, _Mapping]]] = ..., peers: _Optional[_Iterable[_Union[WorkerAddress, _Mapping]]] = ..., task_workers: _Optional[_Mapping[int, int]] = ..., partial: _Optional[bool] = ..., restored_checkpoint_id: _Optional[int] = ...) -> None: ...

class Start(_message.Message):
    __slots__ = ("generation",)
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: int
    def __init__(self, generation: _Optional[int] = ...) -> None: ...

class TriggerCheckpoint(_message.Message):
    __slots__ = ("checkpoint_id", "generation", "pause")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    generation: int
    pause: bool
    def __init__(self, checkpoint_id: _Optional[int] = ..., generation: _Optional[int] = ..., pause: _Optional[bool] = ...) -> None: ...

class ResumeSpouts(_message.Message):
    __slots__ = ("generation",)
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: int
    def __init__(self, generation: _Optional[int] = ...) -> None: ...

class CompleteCheckpoint(_message.Message):
    __slots__ = ("checkpoint_id", "generation")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    generation: int
    def __init__(self, checkpoint_id: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class AbortCheckpoint(_message.Message):
    __slots__ = ("checkpoint_id", "generation", "reason")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    generation: int
    reason: str
    def __init__(self, checkpoint_id: _Optional[int] = ..., generation: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Peers(_message.Message):
    __slots__ = ("peers", "generation")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[WorkerAddress]
    generation: int
    def __init__(self, peers: _Optional[_Iterable[_Union[WorkerAddress, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ("reason", "exit_code")
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    exit_code: int
    def __init__(self, reason: _Optional[str] = ..., exit_code: _Optional[int] = ...) -> None: ...

class Throttle(_message.Message):
    __slots__ = ("spout_tasks", "lease_ms", "release")
    SPOUT_TASKS_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    spout_tasks: _containers.RepeatedScalarFieldContainer[int]
    lease_ms: int
    release: bool
    def __init__(self, spout_tasks: _Optional[_Iterable[int]] = ..., lease_ms: _Optional[int] = ..., release: _Optional[bool] = ...) -> None: ...

class LogLevelCommand(_message.Message):
    __slots__ = ("component", "level")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    component: str
    level: str
    def __init__(self, component: _Optional[str] = ..., level: _Optional[str] = ...) -> None: ...

class ConfigCommand(_message.Message):
    __slots__ = ("key", "value_json")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    key: str
    value_json: str
    def __init__(self, key: _Optional[str] = ..., value_json: _Optional[str] = ...) -> None: ...

class TopologyRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    def __init__(self, worker_id: _Optional[int] = ...) -> None: ...

class TopologyBlob(_message.Message):
    __slots__ = ("topology", "config_json", "name", "descriptor_json", "code_version", "package", "entry", "digest", "run_json")
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_JSON_FIELD_NUMBER: _ClassVar[int]
    CODE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PACKAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    RUN_JSON_FIELD_NUMBER: _ClassVar[int]
    topology: bytes
    config_json: str
    name: str
    descriptor_json: str
    code_version: str
    package: bytes
    entry: str
    digest: str
    run_json: str
    def __init__(self, topology: _Optional[bytes] = ..., config_json: _Optional[str] = ..., name: _Optional[str] = ..., descriptor_json: _Optional[str] = ..., code_version: _Optional[str] = ..., package: _Optional[bytes] = ..., entry: _Optional[str] = ..., digest: _Optional[str] = ..., run_json: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("wait_terminal_s",)
    WAIT_TERMINAL_S_FIELD_NUMBER: _ClassVar[int]
    wait_terminal_s: float
    def __init__(self, wait_terminal_s: _Optional[float] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class MetricsRequest(_message.Message):
    __slots__ = ("component",)
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    component: str
    def __init__(self, component: _Optional[str] = ...) -> None: ...

class MetricsReply(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class KillRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class KillReply(_message.Message):
    __slots__ = ("ok",)
    OK_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    def __init__(self, ok: _Optional[bool] = ...) -> None: ...

class CheckpointRequest(_message.Message):
    __slots__ = ("timeout_s",)
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    timeout_s: float
    def __init__(self, timeout_s: _Optional[float] = ...) -> None: ...

class CheckpointReply(_message.Message):
    __slots__ = ("checkpoint_id", "completed", "error")
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    completed: bool
    error: str
    def __init__(self, checkpoint_id: _Optional[int] = ..., completed: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ("checkpoint_id",)
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: int
    def __init__(self, checkpoint_id: _Optional[int] = ...) -> None: ...

class RollbackReply(_message.Message):
    __slots__ = ("ok", "checkpoint_id", "generation", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    checkpoint_id: int
    generation: int
    error: str
    def __init__(self, ok: _Optional[bool] = ..., checkpoint_id: _Optional[int] = ..., generation: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class UpgradeRequest(_message.Message):
    __slots__ = ("action", "package", "entry", "workers", "component", "count")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PACKAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    action: str
    package: bytes
    entry: str
    workers: _containers.RepeatedScalarFieldContainer[int]
    component: str
    count: int
    def __init__(self, action: _Optional[str] = ..., package: _Optional[bytes] = ..., entry: _Optional[str] = ..., workers: _Optional[_Iterable[int]] = ..., component: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class UpgradeReply(_message.Message):
    __slots__ = ("ok", "error", "state_json")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    state_json: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., state_json: _Optional[str] = ...) -> None: ...

class RescaleRequest(_message.Message):
    __slots__ = ("parallelism", "workers")
    class ParallelismEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    parallelism: _containers.ScalarMap[str, int]
    workers: int
    def __init__(self, parallelism: _Optional[_Mapping[str, int]] = ..., workers: _Optional[int] = ...) -> None: ...

class RescaleReply(_message.Message):
    __slots__ = ("ok", "error", "state_json")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    state_json: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., state_json: _Optional[str] = ...) -> None: ...

class SetLogLevelRequest(_message.Message):
    __slots__ = ("component", "level")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    component: str
    level: str
    def __init__(self, component: _Optional[str] = ..., level: _Optional[str] = ...) -> None: ...

class SetLogLevelReply(_message.Message):
    __slots__ = ("ok", "error", "workers")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    workers: int
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., workers: _Optional[int] = ...) -> None: ...

class SetConfigRequest(_message.Message):
    __slots__ = ("key", "value_json")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_JSON_FIELD_NUMBER: _ClassVar[int]
    key: str
    value_json: str
    def __init__(self, key: _Optional[str] = ..., value_json: _Optional[str] = ...) -> None: ...

class SetConfigReply(_message.Message):
    __slots__ = ("ok", "error", "applied_json", "scope")
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    APPLIED_JSON_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    error: str
    applied_json: str
    scope: str
    def __init__(self, ok: _Optional[bool] = ..., error: _Optional[str] = ..., applied_json: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...
