"""Real servers for tests and examples, on free ports in temporary directories.

* :mod:`.webhdfs` / :mod:`.hbase` — protocol-level WebHDFS and HBase Thrift servers
  (``jstorm testing webhdfs|hbase``);
* :mod:`.postgres` / :mod:`.redis_server` — throw-away PostgreSQL and Redis servers run from
  the installed binaries;
* :mod:`.zookeeper` — a throw-away ZooKeeper server (the standby Topology Master's tests);
  :mod:`.process` is the life of these child-process servers (stop, close, ``with``);
* :mod:`.fault_proxy` — a TCP proxy that injects network faults (delay, stall, reset).
"""
