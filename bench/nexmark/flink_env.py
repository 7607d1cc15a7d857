"""The Flink environment both PyFlink engines run in (``engine_pyflink.py``, the DataStream
API, and ``engine_pyflink_sql.py``, SQL): a local mini-cluster bound to 127.0.0.1, the heap
state backend with checkpoints in ``work``, exactly-once checkpoints every second, and the
engine's own interpreter for the Python workers. Imported only in the PyFlink interpreter."""

from __future__ import annotations

import os
import sys
from typing import Any


def flink_environment(work: str, parallelism: int, **settings: str) -> Any:
    """A streaming ``StreamExecutionEnvironment``; ``settings`` are extra Flink options
    (dots as underscores are not translated: pass them with ``**{"a.b": "v"}``)."""
    from pyflink.common import Configuration
    from pyflink.datastream import (
        CheckpointingMode,
        RuntimeExecutionMode,
        StreamExecutionEnvironment,
    )

    conf = Configuration()
    for k, v in {"execution.checkpointing.dir": "file://" + os.path.join(work, "ckpt"),
                 "state.backend.type": "hashmap", "python.executable": sys.executable,
                 "python.client.executable": sys.executable,
                 "rest.bind-address": "127.0.0.1", "rest.address": "127.0.0.1",
                 "taskmanager.host": "127.0.0.1",
                 "jobmanager.rpc.address": "127.0.0.1", **settings}.items():
        conf.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)
    return env
