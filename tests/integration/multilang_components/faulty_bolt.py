"""A pystorm bolt that misbehaves once, at seq 50: argv MODE MARKER (crash, hang,
malformed, huge), or the environment's FAULTY_ARGS="MODE MARKER" when it runs as
``python -m streamparse.run faulty_bolt.FaultyBolt``; the marker file makes the restarted
subprocess behave."""

import os
import sys
import time

from pystorm import Bolt

MODE, MARKER = sys.argv[1:3] if len(sys.argv) > 2 else os.environ["FAULTY_ARGS"].split()


class FaultyBolt(Bolt):
    def process(self, tup):
        seq, key = tup.values[0], tup.values[1]
        if seq == 50 and not os.path.exists(MARKER):
            open(MARKER, "w").close()
            sys.stderr.write(f"faulty bolt: about to {MODE} at seq 50\n")
            sys.stderr.flush()
            if MODE == "crash":
                os._exit(3)
            elif MODE == "hang":
                time.sleep(3600)
            elif MODE == "malformed":
                os.write(1, b"{this is not json\nend\n")
                time.sleep(3600)
            elif MODE == "huge":
                self.emit([seq, "x" * 200_000])
                time.sleep(3600)
        self.emit([seq, key])


if __name__ == "__main__":
    FaultyBolt().run()
