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
from pathlib import Path

import pytest

from jstormpy.testing.servers.webhdfs import WebHdfsServer

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


# The Spark side runs in its own Python process: a JVM's classpath is fixed when it starts,
# and other tests in this process may already have started one without the JAX-RS piece.
SPARK_SIDE = r"""
import json, sys
from pyspark.sql import SparkSession

base, classpath = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").appName("jstormpy-webhdfs-test")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.extraClassPath", classpath)
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
result = {"read": [r.value for r in spark.read.text(f"{base}/in/file.txt").collect()]}
out = spark.createDataFrame([(f"line-{i}",) for i in range(1000)], ["value"])
out.repartition(3).write.text(f"{base}/out")
result["after_write"] = True
print("STAGE " + json.dumps({"written": True}), flush=True)
sys.stdin.readline()  # the test checks the files the committer left, then lets us go on
result["back"] = sorted(r.value for r in spark.read.text(f"{base}/out").collect())
out.limit(5).write.mode("overwrite").text(f"{base}/out")  # delete + recreate
result["overwritten_count"] = spark.read.text(f"{base}/out").count()
spark.stop()
print("RESULT " + json.dumps(result), flush=True)
"""


def test_spark_reads_and_writes_webhdfs(jaxrs_classpath: str, tmp_path: Path) -> None:
    import json
    import sys

    root = tmp_path / "hdfs"
    (root / "in").mkdir(parents=True)
    (root / "in" / "file.txt").write_text("alpha\nbeta\ngamma\n")
    with WebHdfsServer(root) as server:
        base = f"webhdfs://127.0.0.1:{server.port}"
        proc = subprocess.Popen([sys.executable, "-c", SPARK_SIDE, base, jaxrs_classpath],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdin is not None
            line = proc.stdout.readline()
            assert line.startswith("STAGE "), line + proc.stderr.read()[-3000:]
            assert (root / "out" / "_SUCCESS").exists()
            assert not (root / "out" / "_temporary").exists()
            parts = sorted(p.name for p in (root / "out").glob("part-*"))
            assert len(parts) == 3
            proc.stdin.write("go on\n")
            proc.stdin.flush()
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        result_line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), "")
        assert result_line, err[-3000:]
        result = json.loads(result_line[len("RESULT "):])
        assert result["read"] == ["alpha", "beta", "gamma"]
        assert result["back"] == sorted(f"line-{i}" for i in range(1000))
        assert result["overwritten_count"] == 5
