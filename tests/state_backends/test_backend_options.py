"""Backend settings travel from Config.state_backend_options to the TM and the workers."""

from __future__ import annotations

import happybase
import pytest

from jstormpy import Config, FileSink, LocalCluster, SequenceSpout, TopologyBuilder, read_committed
from jstormpy.api.errors import ConfigError
from jstormpy.state_backends import open_backend


def test_unknown_options_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"\['usr'\] are not settings of hdfs://"):
        open_backend("hdfs://127.0.0.1:1/x", usr="a")
    with pytest.raises(ConfigError, match="file:// takes no options"):
        open_backend("file:///tmp/x", user="a")


def test_submit_refuses_bad_options_before_starting_anything(tmp_path):
    b = TopologyBuilder("bad-options")
    b.set_spout("s", SequenceSpout(keys=1, per_key=10))
    b.set_bolt("out", FileSink(str(tmp_path / "out"))).shuffle_grouping("s")
    conf = Config(state_backend="hbase://127.0.0.1:1/t", state_backend_options={"colfam": "x"})
    with LocalCluster() as cluster, pytest.raises(ConfigError, match="colfam"):
        cluster.submit(b.build(), conf)



class _NoSpark:
    """Stands in for a SparkSession: the launcher may read the master URL, nothing more."""

    class sparkContext:  # noqa: N801 - SparkSession's attribute name
        master = "local[2]"

        @staticmethod
        def getConf():  # noqa: N802 - touching Spark at all means checking too late
            raise AssertionError("SparkCluster.submit used Spark before validating the config")


def test_spark_submit_refuses_bad_options_before_starting_anything(tmp_path):
    from jstormpy.deploy.spark import SparkCluster

    b = TopologyBuilder("bad-options-spark")
    b.set_spout("s", SequenceSpout(keys=1, per_key=10))
    b.set_bolt("out", FileSink(str(tmp_path / "out"))).shuffle_grouping("s")
    cluster = SparkCluster(_NoSpark(), home=tmp_path)
    conf = Config(state_backend="hbase://127.0.0.1:1/t", state_backend_options={"colfam": "x"})
    with pytest.raises(ConfigError, match="colfam"):
        cluster.submit(b.build(), conf)
    assert not (tmp_path / "runs").exists()  # nothing was written or started


def test_hbase_column_family_option_reaches_tm_and_workers(tmp_path, hbase_server):
    b = TopologyBuilder("hbase-options")
    b.set_spout("s", SequenceSpout(keys=2, per_key=500), parallelism=2)
    b.set_bolt("out", FileSink(str(tmp_path / "out")), parallelism=1).global_grouping("s")
    conf = Config(workers=2, checkpoint_interval_ms=200,
                  state_backend=f"hbase://127.0.0.1:{hbase_server.port}/jstorm_opts",
                  state_backend_options={"column_family": "cf2"})
    with LocalCluster() as cluster:
        cluster.submit(b.build(), conf).wait(timeout=120)
    assert len(read_committed(tmp_path / "out")) == 1000
    conn = happybase.Connection("127.0.0.1", port=hbase_server.port, autoconnect=True)
    try:
        table = conn.table("jstorm_opts")
        assert set(table.families()) == {b"cf2"}
        rows = list(table.scan(row_prefix=b"chk-"))
        assert rows and all(k.decode().startswith("cf2:") for _, d in rows for k in d)
    finally:
        conn.close()
