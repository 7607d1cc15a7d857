"""The Nexmark queries in Flink SQL through PyFlink (JVM operators, for reference).

Run with PyFlink's interpreter from the repository's root:

    python -m bench.nexmark.engine_pyflink_sql --query q5 --events events.jsonl --out DIR

The events file is a ``filesystem`` table in JSON format, with ``dt`` its event-time
attribute (``dateTime``) and a watermark of the generator's delay (+1 ms: a SQL
watermark is ``max - delay``, and a record at the watermark is late); ``person``,
``auction`` and ``bid`` are views on it, as in Nexmark's Flink setup. Each query is its
Nexmark SQL with two changes that keep its meaning: times come out as epoch ms (BIGINT)
rather than TIMESTAMP, and q11's session bounds are MIN(dateTime) and MAX(dateTime) +
10 s, which is what SESSION_START / SESSION_END are. No Python function runs, except
q4's: its result is updating, which the filesystem sink does not take, so its
changelog's inserts and updates are written by a DataStream FileSink (retractions
dropped: the last row per category is the result). Parallelism 2, exactly-once
checkpoints every 1 s, the filesystem sink committing on checkpoints.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from bench.nexmark.flink_env import flink_environment

TS = "UNIX_TIMESTAMP(DATE_FORMAT({0}, 'yyyy-MM-dd HH:mm:ss')) * 1000"

QUERIES = {
    "q0": "SELECT auction, bidder, price, `dateTime`, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, `dateTime`, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id
             FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
             WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    "q4": """SELECT Q.category AS id, AVG(Q.final) AS final
             FROM (SELECT MAX(B.price) AS final, A.category
                   FROM auction A, bid B
                   WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
                   GROUP BY A.id, A.category) Q
             GROUP BY Q.category""",
    "q5": """SELECT AuctionBids.auction, AuctionBids.num
             FROM (SELECT auction, count(*) AS num, window_start AS starttime,
                          window_end AS endtime
                   FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dt), INTERVAL '2' SECOND,
                                  INTERVAL '10' SECOND))
                   GROUP BY auction, window_start, window_end) AS AuctionBids
             JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
                   FROM (SELECT count(*) AS num, window_start AS starttime,
                                window_end AS endtime
                         FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dt), INTERVAL '2' SECOND,
                                        INTERVAL '10' SECOND))
                         GROUP BY auction, window_start, window_end) AS CountBids
                   GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
             ON AuctionBids.starttime = MaxBids.starttime
                AND AuctionBids.endtime = MaxBids.endtime
                AND AuctionBids.num >= MaxBids.maxn""",
    "q7": """SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra
             FROM bid B
             JOIN (SELECT MAX(price) AS maxprice, window_end AS `dateTime`
                   FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), INTERVAL '10' SECOND))
                   GROUP BY window_start, window_end) B1
             ON B.price = B1.maxprice
             WHERE B.dt BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`""",
    "q8": """SELECT P.id, P.name, P.starttime
             FROM (SELECT id, name, window_start, window_end,
                          MIN(`dateTime`) - MOD(MIN(`dateTime`), 10000) AS starttime
                   FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dt), INTERVAL '10' SECOND))
                   GROUP BY id, name, window_start, window_end) P
             JOIN (SELECT seller, window_start, window_end
                   FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dt), INTERVAL '10' SECOND))
                   GROUP BY seller, window_start, window_end) A
             ON P.id = A.seller AND P.window_start = A.window_start
                AND P.window_end = A.window_end""",
    "q11": """SELECT B.bidder, count(*) AS bid_count, MIN(B.`dateTime`) AS starttime,
                     MAX(B.`dateTime`) + 10000 AS endtime
              FROM bid B
              GROUP BY B.bidder, SESSION(B.dt, INTERVAL '10' SECOND)""",
    "q12": f"""SELECT bidder, count(*) AS bid_count, {TS.format('window_start')} AS starttime,
                      {TS.format('window_end')} AS endtime
               FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
               GROUP BY bidder, window_start, window_end""",
}

COLUMNS = {
    "q0": "auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` BIGINT, extra STRING",
    "q1": "auction BIGINT, bidder BIGINT, price DOUBLE, `dateTime` BIGINT, extra STRING",
    "q2": "auction BIGINT, price BIGINT",
    "q3": "name STRING, city STRING, state STRING, id BIGINT",
    "q5": "auction BIGINT, num BIGINT",
    "q7": "auction BIGINT, price BIGINT, bidder BIGINT, `dateTime` BIGINT, extra STRING",
    "q8": "id BIGINT, name STRING, starttime BIGINT",
    "q11": "bidder BIGINT, bid_count BIGINT, starttime BIGINT, endtime BIGINT",
    "q12": "bidder BIGINT, bid_count BIGINT, starttime BIGINT, endtime BIGINT",
}


def events_table(path: str, delay_ms: int) -> str:
    """The DDL of the events file's table."""
    return f"""CREATE TABLE events (
        type STRING, id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
        city STRING, state STRING, `dateTime` BIGINT, extra STRING, itemName STRING,
        description STRING, initialBid BIGINT, reserve BIGINT, expires BIGINT,
        seller BIGINT, category BIGINT, auction BIGINT, bidder BIGINT, price BIGINT,
        channel STRING, url STRING,
        dt AS TO_TIMESTAMP_LTZ(`dateTime`, 3),
        p_time AS PROCTIME(),
        WATERMARK FOR dt AS dt - INTERVAL '{(delay_ms + 1) / 1000:.3f}' SECOND
    ) WITH ('connector' = 'filesystem', 'path' = 'file://{path}', 'format' = 'json')"""


VIEWS = {
    "person": "id, name, emailAddress, creditCard, city, state, `dateTime`, dt, extra",
    "auction": "id, itemName, description, initialBid, reserve, `dateTime`, dt, expires, "
               "seller, category, extra",
    "bid": "auction, bidder, price, channel, url, `dateTime`, dt, p_time, extra",
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--query", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--parallelism", type=int, default=2)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="nexmark-flinksql-")
    from pyflink.common import Encoder, Types
    from pyflink.common.types import RowKind
    from pyflink.datastream.connectors.file_system import FileSink
    from pyflink.table import StreamTableEnvironment

    env = flink_environment(work, a.parallelism)
    t_env = StreamTableEnvironment.create(env)
    t_env.get_config().set("table.local-time-zone", "UTC")
    try:
        t_env.execute_sql(events_table(os.path.abspath(a.events), a.delay_ms))
        for view, cols in VIEWS.items():
            t_env.execute_sql(f"CREATE VIEW {view} AS SELECT {cols} FROM events "
                              f"WHERE type = '{view}'")
        out = os.path.abspath(a.out)
        if a.query == "q4":
            import json

            changes = t_env.to_changelog_stream(t_env.sql_query(QUERIES["q4"]))
            (changes.filter(lambda r: r.get_row_kind() in (RowKind.INSERT,
                                                            RowKind.UPDATE_AFTER))
                    .map(lambda r: json.dumps({"id": r[0], "final": r[1]}),
                         output_type=Types.STRING())
                    .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder())
                             .build()))
            result = env.execute("nexmark-q4-sql")
            seconds = result.get_net_runtime() / 1000.0
        else:
            t_env.execute_sql(f"CREATE TABLE sink ({COLUMNS[a.query]}) WITH ("
                              f"'connector' = 'filesystem', 'path' = 'file://{out}', "
                              "'format' = 'json')")
            job = t_env.execute_sql(f"INSERT INTO sink {QUERIES[a.query]}")
            job.wait()
            status = job.get_job_client().get_job_execution_result().result()
            seconds = status.get_net_runtime() / 1000.0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("GUARANTEE=exactly-once (checkpoints every 1 s, filesystem sink commits on "
          "checkpoints)")
    print(f"PROCESSING_SECONDS={seconds:.6f}")


if __name__ == "__main__":
    main()
