"""A pystorm bolt that passes (seq, key) on and emits (-1, "tick") on each tick tuple."""

from pystorm import Bolt


class TickBolt(Bolt):
    def process(self, tup):
        self.emit([tup.values[0], tup.values[1]])

    def process_tick(self, tup):
        self.emit([-1, "tick"])


if __name__ == "__main__":
    TickBolt().run()
