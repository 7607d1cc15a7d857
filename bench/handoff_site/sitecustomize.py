"""The hand-off probe of ``bench/handoff_probe.py``, loaded as ``sitecustomize`` by every
process of a run whose ``PYTHONPATH`` holds this folder. It does nothing unless
``JSTORM_HANDOFF_PROBE`` names a directory; then, in each worker process (forked from the
zygote, which imported this first), it counts per call site the ``Condition.notify`` /
``notify_all`` calls (with and without a waiting thread) and the ``Condition.wait`` calls
(woken or timed out), the worker's batches (local, remote, chained), credit returns and
inbox reads, and samples every thread's CPU time and context switches from
``/proc/self/task``; it writes ``probe-PID.json`` into that directory. The engine is not
touched: the counting costs CPU, so time runs without the probe."""

from __future__ import annotations

import collections
import json
import os
import runpy
import sys
import threading
import time

OUT = os.environ.get("JSTORM_HANDOFF_PROBE", "")
_THIS = __file__


def _install() -> None:  # noqa: PLR0915 - one probe, all its patches
    per_thread: dict[int, collections.Counter] = {}
    get_ident = threading.get_ident

    def count(key: tuple) -> None:
        c = per_thread.get(get_ident())
        if c is None:
            c = per_thread[get_ident()] = collections.Counter()
        c[key] += 1

    def site() -> str:
        f = sys._getframe(2)
        while f is not None and (f.f_code.co_filename.endswith("threading.py")
                                 or f.f_code.co_filename == _THIS):
            f = f.f_back
        if f is None:
            return "?"
        return f"{os.path.basename(f.f_code.co_filename)}:{f.f_code.co_name}"

    cond = threading.Condition
    orig_notify, orig_wait = cond.notify, cond.wait

    def notify(self, n=1):
        count(("notify", site(), bool(self._waiters)))
        return orig_notify(self, n)

    def notify_all(self):
        count(("notify_all", site(), bool(self._waiters)))
        return orig_notify(self, len(self._waiters))

    def wait(self, timeout=None):
        got = orig_wait(self, timeout)
        count(("wait", site(), "woken" if got else "timed out"))
        return got

    cond.notify, cond.notify_all, cond.wait = notify, notify_all, wait

    transports: list = []

    def patch_runtime() -> None:
        from jstormpy.runtime import credits as inboxes
        from jstormpy.runtime import outbound, transport, worker

        w_send, w_ret = worker.Worker.send, worker.Worker.return_credit
        w_deliver = worker.Worker._deliver

        def send(self, dst, item):
            kind = ("chained" if dst in self.chained else
                    "local" if dst in self.inboxes.queues else "remote")
            count(("batch sent", kind, item[1]))
            return w_send(self, dst, item)

        def return_credit(self, src, dst, n):
            local = self.task_workers.get(src) == self.worker_id
            count(("credit return", "local" if local else "remote", ""))
            return w_ret(self, src, dst, n)

        def deliver(self, dst, item, generation):
            count(("batch received", "remote", item[1]))
            return w_deliver(self, dst, item, generation)

        worker.Worker.send, worker.Worker.return_credit = send, return_credit
        worker.Worker._deliver = deliver

        i_get = inboxes.TaskInbox.get

        def get(self, timeout):
            if self.items:
                count(("inbox get", "ready", ""))
                return i_get(self, timeout)
            try:
                got = i_get(self, timeout)
            except IndexError:
                count(("inbox get", "waited, nothing", ""))
                raise
            count(("inbox get", "waited, item", ""))
            return got

        inboxes.TaskInbox.get = get

        t_init = transport.Transport.__init__

        def t_new(self, *a, **k):
            t_init(self, *a, **k)
            transports.append(self)

        transport.Transport.__init__ = t_new
        def counting(send):
            def counted(sock, buffers):
                count(("socket send", "sendmsg", len(buffers) // 2))
                return send(sock, buffers)
            return counted

        # plain TCP, and TLS (LocalCluster's default)
        outbound.sendmsg_all = counting(outbound.sendmsg_all)
        outbound.send_buffers = counting(outbound.send_buffers)

    # bench/proc_threads.py, run by its path: the repository is not on sys.path yet
    bench = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    thread_stats = runpy.run_path(os.path.join(bench, "proc_threads.py"))["thread_stats"]

    threads: dict[int, dict] = {}

    def dump() -> None:
        threads.update(thread_stats())
        merged: collections.Counter = collections.Counter()
        for c in list(per_thread.values()):
            for _ in range(5):
                try:
                    merged.update(dict(c))
                    break
                except RuntimeError:  # changed while copied: again
                    continue
        rows = [[*k, v] for k, v in merged.items()]
        data = {"pid": os.getpid(), "argv": sys.argv, "counts": rows,
                "transport": [t.stats for t in transports], "threads": list(threads.values())}
        tmp = os.path.join(OUT, f".probe-{os.getpid()}.json")
        with open(tmp, "w") as f:
            json.dump(data, f, default=str)
        os.replace(tmp, os.path.join(OUT, f"probe-{os.getpid()}.json"))

    def sampler() -> None:
        time.sleep(0.2)
        if "worker" not in " ".join(map(str, sys.argv)):
            return
        while True:
            time.sleep(0.5)
            dump()

    def in_child() -> None:
        patch_runtime()
        orig_exit = os._exit

        def _exit(code):
            if "worker" in " ".join(map(str, sys.argv)):
                try:
                    dump()
                except Exception:  # noqa: BLE001 - never stop the exit
                    pass
            orig_exit(code)

        os._exit = _exit
        threading.Thread(target=sampler, name="handoff-probe", daemon=True).start()

    os.register_at_fork(after_in_child=in_child)


if OUT:
    _install()
