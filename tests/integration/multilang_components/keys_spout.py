"""A reliable pystorm spout over a tiny durable queue: keys 0..N-1 (its share), each
emitted with the key as message id, re-emitted on fail, and done for good on ack (acks are
appended to a file, as a broker would record them; fails are logged beside). argv:
ACK_DIR N, or the environment's KEYS_ARGS="ACK_DIR N" when it runs as
``python -m streamparse.run keys_spout.KeysSpout``."""

import os
import sys
import time
from collections import deque

from pystorm import Spout

ACK_DIR, _N = sys.argv[1:3] if len(sys.argv) > 2 else os.environ["KEYS_ARGS"].split()
N = int(_N)


class KeysSpout(Spout):
    def initialize(self, conf, context):
        me = context["taskid"]
        tasks = sorted(int(t) for t, c in context["task->component"].items()
                       if c == context["componentid"])
        index, parallelism = tasks.index(me), len(tasks)
        self.ack_file = os.path.join(ACK_DIR, f"acked-{index}.txt")
        acked = set()
        if os.path.exists(self.ack_file):
            with open(self.ack_file) as f:
                acked = {int(line) for line in f if line.strip()}
        self.queue = deque(k for k in range(index, N, parallelism) if k not in acked)
        self.acks = open(self.ack_file, "a")
        self.fails = open(os.path.join(ACK_DIR, f"failed-{index}.log"), "a")

    def next_tuple(self):
        time.sleep(0.004)  # pacing of the source: still emitting when the test kills
        for _ in range(2):
            if not self.queue:
                return
            key = self.queue.popleft()
            self.emit([key, f"k{key}"], tup_id=key)

    def ack(self, tup_id):
        self.acks.write(f"{tup_id}\n")
        self.acks.flush()

    def fail(self, tup_id):
        self.fails.write(f"{tup_id}\n")
        self.fails.flush()
        self.queue.append(tup_id)


if __name__ == "__main__":
    KeysSpout().run()
