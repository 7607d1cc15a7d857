"""Real servers for tests and examples, on free ports in temporary directories.

* :mod:`.webhdfs` / :mod:`.hbase` — protocol-level WebHDFS and HBase Thrift servers
  (``jstorm testing webhdfs|hbase``);
* :mod:`.postgres` / :mod:`.redis_server` — throw-away PostgreSQL and Redis servers run from
  the installed binaries;
* :mod:`.fault_proxy` — a TCP proxy that injects network faults (delay, stall, reset).
"""
