"""A heronpy word count, written as Heron's own examples are (nothing jstormpy in it):
``jstorm run wordcount.py`` runs it. Each count_bolt task writes its counts to
``$WORDCOUNT_OUT/task-N.json`` on every tick tuple."""

import json
import os
import sys
from collections import Counter

import heronpy.api.api_constants as constants
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]


def corpus(n):
    """n words, a skewed mix (word i about 1/(i+1) as often as the first)."""
    return [WORDS[(i * i + i // 3) % (1 + i % len(WORDS))] for i in range(n)]


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, config, context):
        words = corpus(int(config["wordcount.words"]))
        index = context.get_component_tasks(context.get_component_id()).index(
            context.get_task_id())
        self.words = words[index::int(config[constants.TOPOLOGY_COMPONENT_PARALLELISM])]
        self.next = 0
        self.log(f"emitting {len(self.words)} words")

    def next_tuple(self):
        if self.next < len(self.words):
            self.emit([self.words[self.next]], tup_id=self.next)
            self.next += 1


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = Counter()
        self.out = config["wordcount.out"]
        self.task = context.get_task_id()

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] += 1
        self.emit([word, self.counts[word]], anchors=[tup])
        self.ack(tup)

    def process_tick(self, tup):
        assert self.is_tick(tup)
        path = os.path.join(self.out, f"task-{self.task}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.counts, f)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("Topology's name is not specified")
        sys.exit(1)
    builder = TopologyBuilder(name=sys.argv[1])
    word_spout = builder.add_spout("word_spout", WordSpout, par=2,
                                   config={"wordcount.words": 2000})
    builder.add_bolt("count_bolt", CountBolt, par=2, inputs={word_spout: Grouping.fields("word")},
                     config={constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1,
                             "wordcount.out": os.environ["WORDCOUNT_OUT"]})
    builder.set_config({constants.TOPOLOGY_RELIABILITY_MODE:
                        constants.TopologyReliabilityMode.ATLEAST_ONCE})
    builder.build_and_submit()
