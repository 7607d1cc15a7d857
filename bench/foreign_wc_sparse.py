"""The word count's split and count as streamparse bolts (multilang subprocesses), for
bench/foreign_wc.py: run as ``python -m streamparse.run foreign_wc_sparse.SplitBolt`` in
this folder, as ``jstorm run`` runs a streamparse project's components."""

from collections import Counter

from streamparse import Bolt


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counts = Counter()

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] += 1
        self.emit([word, self.counts[word]])
