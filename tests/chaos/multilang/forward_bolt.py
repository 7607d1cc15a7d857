"""A pystorm bolt for the chaos suite: every (key, seq, value) passes on unchanged."""

from pystorm import Bolt


class ForwardBolt(Bolt):
    def process(self, tup):
        self.emit(list(tup.values))


if __name__ == "__main__":
    ForwardBolt().run()
