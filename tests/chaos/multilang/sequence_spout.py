"""A reliable pystorm spout for the chaos suite: per key k0..k{KEYS-1} the events
(key, seq, value) for seq 0..PER_KEY-1, as SequenceSpout emits them, each with the id
"key:seq". Acked ids are recorded in a file (as a broker would); a failed id is emitted
again before anything newer; once everything it owns is acked it exits 0 (end of input).
argv: ACK_DIR KEYS PER_KEY, or the environment's SEQUENCE_ARGS="ACK_DIR KEYS PER_KEY" when it
runs as ``python -m streamparse.run sequence_spout.SequenceSpout``."""

import heapq
import os
import sys
import time

from pystorm import Spout

_ARGS = sys.argv[1:4] if len(sys.argv) > 3 else os.environ["SEQUENCE_ARGS"].split()
ACK_DIR, KEYS, PER_KEY = _ARGS[0], int(_ARGS[1]), int(_ARGS[2])


class SequenceSpout(Spout):
    def initialize(self, conf, context):
        tasks = sorted(int(t) for t, c in context["task->component"].items()
                       if c == context["componentid"])
        index, parallelism = tasks.index(context["taskid"]), len(tasks)
        self.ack_file = os.path.join(ACK_DIR, f"acked-{index}.txt")
        acked = set()
        if os.path.exists(self.ack_file):
            with open(self.ack_file) as f:
                acked = {line.strip() for line in f if line.strip()}
        self.todo = [(seq, k) for k in range(index, KEYS, parallelism)
                     for seq in range(PER_KEY) if f"k{k}:{seq}" not in acked]
        heapq.heapify(self.todo)
        self.out = {}
        self.acks = open(self.ack_file, "a")

    def next_tuple(self):
        if not self.todo and not self.out:
            sys.exit(0)  # all acked: end of input
        time.sleep(0.001)  # pacing of the source
        for _ in range(10):
            if not self.todo:
                return
            seq, k = heapq.heappop(self.todo)
            msg_id = f"k{k}:{seq}"
            self.out[msg_id] = (seq, k)
            self.emit([f"k{k}", seq, seq * 7 % 13], tup_id=msg_id)

    def ack(self, tup_id):
        self.out.pop(tup_id, None)
        self.acks.write(tup_id + "\n")
        self.acks.flush()

    def fail(self, tup_id):
        entry = self.out.pop(tup_id, None)
        if entry is not None:
            heapq.heappush(self.todo, entry)


if __name__ == "__main__":
    SequenceSpout().run()
