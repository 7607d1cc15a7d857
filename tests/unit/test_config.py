"""Config: defaults, validation of every setting, from_dict/to_dict/replace."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jstormpy import Config
from jstormpy.api.errors import ConfigError

INT_KEYS = ("workers", "checkpoint_interval_ms", "checkpoint_timeout_ms",
            "max_concurrent_checkpoints", "checkpoints_retained", "batch_size",
            "queue_capacity", "send_buffer_bytes", "max_frame_bytes",
            "heartbeat_interval_ms", "worker_timeout_ms", "throttle_lease_ms")


def test_defaults_are_valid():
    c = Config()
    assert c.workers == 2
    assert c.guarantee == "exactly_once"
    assert c.checkpoint_interval_ms == 1000
    assert c.state_backend == ""
    assert c.user == {}


@pytest.mark.parametrize("key", INT_KEYS)
@pytest.mark.parametrize("bad", [0, -1])
def test_int_settings_must_be_positive(key, bad):
    with pytest.raises(ConfigError, match=rf"Config\.{key}={bad} is invalid: must be >= 1"):
        Config(**{key: bad})


@pytest.mark.parametrize("key", INT_KEYS)
@pytest.mark.parametrize("bad", [1.5, "3", True, None])
def test_int_settings_must_be_ints(key, bad):
    with pytest.raises(ConfigError, match=rf"Config\.{key}=.* is invalid: must be an int"):
        Config(**{key: bad})


def test_guarantee():
    for g in ("exactly_once", "at_least_once", "at_most_once"):
        assert Config(guarantee=g).guarantee == g
    with pytest.raises(ConfigError, match=r"Config\.guarantee='exactly-once' is invalid: "
                                          r"must be one of"):
        Config(guarantee="exactly-once")


@pytest.mark.parametrize("value", [-1, "5", None])
def test_batch_linger(value):
    with pytest.raises(ConfigError, match=r"batch_linger_ms"):
        Config(batch_linger_ms=value)
    assert Config(batch_linger_ms=0).batch_linger_ms == 0


def test_max_restarts_may_be_zero_not_negative():
    assert Config(max_restarts=0).max_restarts == 0
    with pytest.raises(ConfigError, match=r"max_restarts=-1 is invalid"):
        Config(max_restarts=-1)


@pytest.mark.parametrize("key", ["backpressure_high_watermark", "backpressure_low_watermark"])
@pytest.mark.parametrize("value", [0, -0.1, 1.5])
def test_watermarks_in_unit_interval(key, value):
    with pytest.raises(ConfigError, match=rf"{key}=.* is invalid: must be in \(0, 1\]"):
        Config(**{key: value})


def test_low_watermark_below_high():
    with pytest.raises(ConfigError, match=r"backpressure_low_watermark.*must be below "
                                          r"backpressure_high_watermark"):
        Config(backpressure_low_watermark=0.8, backpressure_high_watermark=0.8)


@pytest.mark.parametrize("uri", ["memory://", "file:///tmp/x", "hdfs://nn:9870/ck",
                                 "hbase://host:9090/table"])
def test_state_backend_schemes(uri):
    assert Config(state_backend=uri).state_backend == uri


@pytest.mark.parametrize("uri", ["s3://bucket", "/tmp/dir", "ftp://x"])
def test_state_backend_bad_scheme(uri):
    with pytest.raises(ConfigError, match=r"state_backend=.* is invalid: must start with"):
        Config(state_backend=uri)


def test_log_level():
    assert Config(log_level="debug").log_level == "debug"
    with pytest.raises(ConfigError, match=r"log_level='LOUD' is invalid"):
        Config(log_level="LOUD")


def test_user_must_be_a_dict():
    assert Config(user={"a": 1}).user == {"a": 1}
    with pytest.raises(ConfigError, match=r"Config\.user=.* is invalid: must be a dict"):
        Config(user=[("a", 1)])


def test_from_dict_refuses_unknown_keys_by_name():
    with pytest.raises(ConfigError) as err:
        Config.from_dict({"workers": 2, "wrkers": 3, "batchsize": 1})
    msg = str(err.value)
    assert "'batchsize', 'wrkers'" in msg
    assert "'batchsize': did you mean 'batch_size'?" in msg
    assert "'wrkers': did you mean 'workers'?" in msg
    with pytest.raises(ConfigError, match="known keys are: .*batch_size"):
        Config.from_dict({"zzz": 1})  # nothing close: every key is listed


def test_from_dict_validates_values():
    with pytest.raises(ConfigError, match="workers"):
        Config.from_dict({"workers": 0})


def test_unknown_keyword_in_constructor():
    with pytest.raises(TypeError):
        Config(wokers=2)  # type: ignore[call-arg]


def test_round_trip_through_json():
    c = Config(workers=3, guarantee="at_least_once", user={"k": [1, 2]})
    d = json.loads(json.dumps(c.to_dict()))
    assert Config.from_dict(d) == c
    assert set(d) == {f.name for f in dataclasses.fields(Config)}


def test_replace_validates_and_copies():
    c = Config(workers=3)
    r = c.replace(batch_size=8)
    assert (r.workers, r.batch_size) == (3, 8)
    assert c.batch_size == 512  # the original is untouched
    with pytest.raises(ConfigError, match="batch_size"):
        c.replace(batch_size=0)
    with pytest.raises(ConfigError, match="unknown Config key"):
        c.replace(nope=1)


def test_validate_catches_later_mutation():
    c = Config()
    c.workers = 0
    with pytest.raises(ConfigError, match="workers"):
        c.validate()
