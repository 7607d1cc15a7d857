"""Faithfulness of the WebHDFS test server against Hadoop's own Java WebHDFS client
(``org.apache.hadoop.hdfs.web.WebHdfsFileSystem`` from PySpark's Hadoop jars): Spark
reads a ``webhdfs://`` file and writes a dataset back through the FileOutputCommitter
(mkdirs, create, rename, list, delete, _SUCCESS), then reads it again.

PySpark ships Hadoop's *shaded* client jars, which lack a JAX-RS runtime for the
``MediaType.valueOf`` call in ``WebHdfsFileSystem.jsonParse`` (a Hadoop packaging gap,
unrelated to the server). ``java/ShadedJaxRsDelegate.java`` supplies that one piece;
it is compiled here with ``javac`` and put on the driver classpath.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jstormpy.testing.webhdfs import WebHdfsServer

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def jaxrs_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    pyspark = pytest.importorskip("pyspark")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (java + javac)")
    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars",
                                  "hadoop-client-runtime-*.jar"))
    if not jars:
        pytest.skip("PySpark without hadoop-client-runtime jar")
    out = tmp_path_factory.mktemp("jaxrs")
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", jars[0],
                    str(HERE / "java" / "ShadedJaxRsDelegate.java")], check=True,
                   capture_output=True, timeout=120)
    services = out / "META-INF" / "services"
    services.mkdir(parents=True)
    (services / "org.apache.hadoop.shaded.javax.ws.rs.ext.RuntimeDelegate").write_text(
        "jstormpy.testsupport.ShadedJaxRsDelegate\n")
    return str(out)


@pytest.fixture(scope="module")
def spark(jaxrs_classpath: str) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("jstormpy-webhdfs-test")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.extraClassPath", jaxrs_classpath)
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_spark_reads_and_writes_webhdfs(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "hdfs"
    (root / "in").mkdir(parents=True)
    (root / "in" / "file.txt").write_text("alpha\nbeta\ngamma\n")
    with WebHdfsServer(root) as server:
        base = f"webhdfs://127.0.0.1:{server.port}"
        df = spark.read.text(f"{base}/in/file.txt")
        assert [r.value for r in df.collect()] == ["alpha", "beta", "gamma"]

        out = spark.createDataFrame([(f"line-{i}",) for i in range(1000)], ["value"])
        out.repartition(3).write.text(f"{base}/out")
        assert (root / "out" / "_SUCCESS").exists()
        assert not (root / "out" / "_temporary").exists()
        parts = sorted(p.name for p in (root / "out").glob("part-*"))
        assert len(parts) == 3

        back = spark.read.text(f"{base}/out")
        assert sorted(r.value for r in back.collect()) == sorted(f"line-{i}"
                                                                 for i in range(1000))
        # overwrite mode goes through delete + recreate
        out.limit(5).write.mode("overwrite").text(f"{base}/out")
        assert spark.read.text(f"{base}/out").count() == 5
