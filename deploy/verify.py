"""``jstorm verify``: a PySpark batch job recomputes the expected result from the source
files and compares it with a FileSink's committed output.

    jstorm verify wordcount --input 'corpus/*.txt' --output out/ [--format jsonl|parquet]
    jstorm verify last-value --expected expected.jsonl --output out/ --key k --value v

Both compare the **last value per key** of the committed output (records ordered by part
file, i.e. checkpoint then task, then position in the file) with the expected table, and
report keys missing, keys unexpected and values that differ. ``wordcount`` computes the
expected table itself (words = runs of non-whitespace in each line of the input text
files) and also reports duplicated ``(word, count)`` records: a word count that emits the
running count at every occurrence must emit each count exactly once.

Spark reads the committed output directory directly: the sink's ``_staging/`` and
``_inprogress/`` folders start with ``_`` and are ignored by Spark's file sources.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jstormpy.api.errors import JStormError


@dataclass
class VerifyReport:
    """What a verification found."""

    expected_keys: int = 0
    output_keys: int = 0
    output_records: int = 0
    missing: list[tuple[Any, Any]] = field(default_factory=list)
    """(key, expected value) absent from the output (first ``limit``)."""
    unexpected: list[tuple[Any, Any]] = field(default_factory=list)
    """(key, last value) in the output but not expected."""
    wrong: list[tuple[Any, Any, Any]] = field(default_factory=list)
    """(key, expected, last value in output)."""
    duplicates: list[tuple[Any, Any, int]] = field(default_factory=list)
    """(key, value, times) records committed more than once."""
    counts: dict[str, int] = field(default_factory=dict)
    """Totals of each kind of difference (the lists above are truncated)."""

    @property
    def ok(self) -> bool:
        """No difference of any kind."""
        return not any(self.counts.values())

    def render(self) -> str:
        """A readable report."""
        lines = [f"expected keys {self.expected_keys}, output keys {self.output_keys}, "
                 f"output records {self.output_records}"]
        if self.ok:
            lines.append("OK: the committed output equals the recomputed result")
            return "\n".join(lines)
        lines.append("DIFFERENCES: " + ", ".join(f"{k} {v}" for k, v in self.counts.items()
                                                  if v))
        lines += [f"  missing     {k!r}: expected {v!r}" for k, v in self.missing]
        lines += [f"  unexpected  {k!r}: output {v!r}" for k, v in self.unexpected]
        lines += [f"  wrong       {k!r}: expected {e!r}, output {g!r}" for k, e, g in self.wrong]
        lines += [f"  duplicate   {k!r}={v!r} committed {n} times" for k, v, n in self.duplicates]
        return "\n".join(lines)


def _output_format(output: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    path = Path(output.removeprefix("file://"))
    if path.is_dir():
        names = [n for n in os.listdir(path) if not n.startswith(("_", "."))]
        if any(n.endswith(".parquet") for n in names):
            return "parquet"
    return "jsonl"


def read_output(spark: Any, output: str, fmt: str = "auto") -> Any:
    """The committed records of a FileSink directory as a DataFrame, with ``_file`` and
    ``_pos`` columns giving commit order. Empty output → empty DataFrame."""
    from pyspark.sql import functions as F  # noqa: N812

    fmt = _output_format(output, fmt)
    local = Path(output.removeprefix("file://"))
    if local.is_dir() and not any(
            n.startswith("part-") for n in os.listdir(local)):
        return None
    reader = spark.read.option("pathGlobFilter", f"part-*.{fmt}")
    df = reader.parquet(output) if fmt == "parquet" else reader.json(output)
    return (df.withColumn("_file", F.input_file_name())
              .withColumn("_pos", F.monotonically_increasing_id()))


def compare_last_values(spark: Any, expected: Any, output: str, key: str, value: str,
                        fmt: str = "auto", check_duplicates: bool = False,
                        limit: int = 20) -> VerifyReport:
    """Compare ``expected`` (a DataFrame with columns ``key``, ``value``) with the last
    value per key of the committed output."""
    from pyspark.sql import functions as F  # noqa: N812

    report = VerifyReport()
    exp = expected.select(F.col(key).alias("k"), F.col(value).alias("expected"))
    out = read_output(spark, output, fmt)
    if out is None:
        out = spark.createDataFrame([], exp.schema).select(
            F.col("k").alias(key), F.col("expected").alias(value),
            F.lit("").alias("_file"), F.lit(0).cast("long").alias("_pos"))
    missing_cols = [c for c in (key, value) if c not in out.columns]
    if missing_cols:
        raise JStormError(f"output {output!r} has no column(s) {missing_cols}; it has "
                          f"{[c for c in out.columns if not c.startswith('_')]}")
    last = (out.groupBy(F.col(key).alias("k"))
               .agg(F.max_by(F.col(value), F.struct("_file", "_pos")).alias("got"),
                    F.count(F.lit(1)).alias("records")))
    joined = exp.join(last, "k", "full_outer").cache()
    has_exp, has_got = F.col("expected").isNotNull(), F.col("got").isNotNull()
    conds = {"missing": has_exp & ~has_got, "unexpected": has_got & ~has_exp,
             "wrong": has_exp & has_got & (F.col("expected") != F.col("got"))}

    def flag(cond: Any) -> Any:
        return F.sum(F.when(cond, 1).otherwise(0))

    totals = joined.agg(flag(has_exp).alias("expected_keys"), flag(has_got).alias("output_keys"),
                        F.sum("records").alias("output_records"),
                        *(flag(c).alias(n) for n, c in conds.items())).collect()[0]
    report.expected_keys = int(totals["expected_keys"] or 0)
    report.output_keys = int(totals["output_keys"] or 0)
    report.output_records = int(totals["output_records"] or 0)
    report.counts = {n: int(totals[n] or 0) for n in conds}
    report.counts["duplicates"] = 0

    def first(name: str) -> list[Any]:
        if not report.counts[name]:
            return []
        return joined.where(conds[name]).orderBy("k").limit(limit).collect()

    report.missing = [(r["k"], r["expected"]) for r in first("missing")]
    report.unexpected = [(r["k"], r["got"]) for r in first("unexpected")]
    report.wrong = [(r["k"], r["expected"], r["got"]) for r in first("wrong")]
    if check_duplicates:
        dups = (out.groupBy(key, value).agg(F.count(F.lit(1)).alias("_times"))
                   .where(F.col("_times") > 1).orderBy(key, value).cache())
        report.counts["duplicates"] = dups.count()
        if report.counts["duplicates"]:
            report.duplicates = [(r[key], r[value], r["_times"])
                                 for r in dups.limit(limit).collect()]
        dups.unpersist()
    joined.unpersist()
    return report


def verify_wordcount(spark: Any, input_glob: str | list[str], output: str, fmt: str = "auto",
                     key: str = "word", value: str = "count", limit: int = 20) -> VerifyReport:
    """Word counts recomputed from the input text files vs the last count per word of the
    committed output (plus duplicated ``(word, count)`` records)."""
    from pyspark.sql import functions as F  # noqa: N812

    paths = [input_glob] if isinstance(input_glob, str) else list(input_glob)
    words = (spark.read.text(paths)
             .select(F.explode(F.split(F.col("value"), r"\s+")).alias(key))
             .where(F.col(key) != ""))
    expected = words.groupBy(key).agg(F.count(F.lit(1)).alias(value))
    return compare_last_values(spark, expected, output, key, value, fmt,
                               check_duplicates=True, limit=limit)


def verify_last_value(spark: Any, expected_path: str, output: str, key: str, value: str,
                      fmt: str = "auto", expected_format: str = "auto",
                      limit: int = 20) -> VerifyReport:
    """An expected table (JSON lines, Parquet or CSV with a header) vs the last value per
    key of the committed output."""
    efmt = expected_format
    if efmt == "auto":
        efmt = ("parquet" if expected_path.endswith(".parquet") else
                "csv" if expected_path.endswith(".csv") else "jsonl")
    reader = spark.read
    expected = (reader.parquet(expected_path) if efmt == "parquet" else
                reader.option("header", True).option("inferSchema", True).csv(expected_path)
                if efmt == "csv" else reader.json(expected_path))
    return compare_last_values(spark, expected, output, key, value, fmt, limit=limit)


def add_verify_parser(sub: Any) -> None:
    """Register ``jstorm verify`` on the CLI's subparsers."""
    v = sub.add_parser("verify", help="recompute the expected result with a PySpark batch "
                                      "job and compare it with a sink's committed output")
    vsub = v.add_subparsers(dest="check", required=True)
    wc = vsub.add_parser("wordcount", help="word counts of text files vs (word, count) output")
    wc.add_argument("--input", required=True, action="append",
                    help="input text files (glob; repeatable)")
    lv = vsub.add_parser("last-value", help="an expected (key, value) table vs the last "
                                            "value per key of the output")
    lv.add_argument("--expected", required=True,
                    help="expected table: .jsonl/.json, .parquet or .csv (with header)")
    lv.add_argument("--expected-format", default="auto",
                    choices=["auto", "jsonl", "parquet", "csv"],
                    help="format of --expected (auto: from its extension)")
    for p, k, val in ((wc, "word", "count"), (lv, None, None)):
        p.add_argument("--output", required=True, help="the FileSink directory")
        p.add_argument("--format", default="auto", choices=["auto", "jsonl", "parquet"],
                       help="format of the part files (auto: from their extension)")
        p.add_argument("--key", default=k, required=k is None, help="key column")
        p.add_argument("--value", default=val, required=val is None, help="value column")
        p.add_argument("--spark-master", default="local[2]",
                       help="master of the verification job ('' = from spark-submit)")
        p.add_argument("--limit", type=int, default=20, help="differences listed per kind")
        p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    """``jstorm verify``: exit 0 if the output matches, 1 if it differs."""
    from jstormpy.deploy.spark import create_session, is_local_master

    conf = {"spark.ui.enabled": "false"}
    if args.spark_master and is_local_master(args.spark_master):
        conf["spark.sql.shuffle.partitions"] = "8"  # small local jobs: not 200 tiny tasks
    spark = create_session(args.spark_master or None, app_name="jstorm-verify", conf=conf)
    try:
        if args.check == "wordcount":
            report = verify_wordcount(spark, args.input, args.output, args.format, args.key,
                                      args.value, args.limit)
        else:
            report = verify_last_value(spark, args.expected, args.output, args.key,
                                       args.value, args.format, args.expected_format,
                                       args.limit)
    finally:
        spark.stop()
    print(report.render())
    sys.stdout.flush()
    return 0 if report.ok else 1
