"""Which tasks chain into their source, and the channels that follow from it
(jstormpy/runtime/channel_plan.py)."""

from __future__ import annotations

from jstormpy import Bolt, FileSink, Spout, TopologyBuilder
from jstormpy.runtime.channel_plan import chain_plan, input_channels, output_targets


class Src(Spout):
    outputs = ("x",)

    def next_tuple(self) -> None:
        self.finish()


class Pass(Bolt):
    outputs = ("x",)

    def execute(self, tup: object) -> None:
        pass


def plan_of(builder: TopologyBuilder, workers: dict[int, int], enabled: bool = True):
    topo = builder.build()
    tasks = topo.task_ids()
    chained = chain_plan(topo.components, tasks, workers, enabled)
    return tasks, chained, input_channels(topo.components, tasks, chained)


def two_stage(consumer_parallelism: int = 2) -> TopologyBuilder:
    b = TopologyBuilder("plan")
    b.set_spout("src", Src(), parallelism=2)
    b.set_bolt("pass", Pass, parallelism=consumer_parallelism).local_or_shuffle_grouping("src")
    b.set_bolt("sink", FileSink("/tmp/unused-plan-out"), parallelism=1).global_grouping("pass")
    return b


def test_one_pair_per_worker_chains_and_connects_only_the_pair() -> None:
    tasks, chained, inputs = plan_of(two_stage(), {1: 0, 2: 1, 3: 0, 4: 1, 5: 0})
    assert tasks["src"] == (1, 2) and tasks["pass"] == (3, 4)
    assert chained == {3: 1, 4: 2}
    assert inputs[3] == (1,) and inputs[4] == (2,)
    assert inputs[5] == (3, 4)  # the global grouping is not chained
    assert output_targets(1, [3, 4], chained) == [3]
    assert output_targets(2, [3, 4], chained) == [4]
    assert output_targets(3, [5], chained) == [5]


def test_no_chaining_when_the_tasks_do_not_pair_up() -> None:
    # both pass tasks in worker 0 with one source task: neither chains
    _, chained, inputs = plan_of(two_stage(), {1: 0, 2: 1, 3: 0, 4: 0, 5: 1})
    assert chained == {}
    assert inputs[3] == inputs[4] == (1, 2)
    # three consumer tasks for two source tasks
    _, chained, _ = plan_of(two_stage(3), {1: 0, 2: 1, 3: 0, 4: 1, 5: 0, 6: 1})
    assert chained == {}


def test_no_chaining_with_a_second_subscription_or_when_off() -> None:
    b = TopologyBuilder("plan2")
    b.set_spout("src", Src(), parallelism=2)
    b.set_spout("other", Src(), parallelism=2)
    b.set_bolt("pass", Pass, parallelism=2).local_or_shuffle_grouping("src") \
        .shuffle_grouping("other")
    topo = b.build()
    tasks = topo.task_ids()
    workers = {t: i % 2 for ts in tasks.values() for i, t in enumerate(ts)}
    assert chain_plan(topo.components, tasks, workers, True) == {}
    _, chained, inputs = plan_of(two_stage(), {1: 0, 2: 1, 3: 0, 4: 1, 5: 0}, enabled=False)
    assert chained == {} and inputs[3] == (1, 2)
