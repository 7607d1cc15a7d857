"""The per-tuple executor reuses a Tuple only when the user kept no reference to it."""

from __future__ import annotations

from typing import Any

from jstormpy import Bolt
from jstormpy.api.component import Tuple
from tests.fake_task_host import FakeTaskHost
from tests.unit.test_batch_api import Sent, executor

ROWS = [(f"w{i}",) for i in range(50)]


class Keeper(Bolt):
    """Keeps every other tuple (in a list) and the last one (in an attribute)."""

    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.kept: list[Tuple] = []
        self.last: Tuple | None = None
        self.seen: list[str] = []
        self.ids: set[int] = set()

    def execute(self, tup: Tuple) -> None:
        self.seen.append(tup["word"])
        self.ids.add(id(tup))
        if int(tup["word"][1:]) % 2 == 0:
            self.kept.append(tup)
        self.last = tup


class Forgetter(Bolt):
    """Looks at each tuple and keeps nothing."""

    outputs = ("word", "count")

    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: list[str] = []
        self.ids: set[int] = set()

    def execute(self, tup: Tuple) -> None:
        self.seen.append(tup.values[0])
        self.ids.add(id(tup))


def test_tuples_the_user_keeps_keep_their_values() -> None:
    comp = Keeper()
    ex = executor(comp, Sent(), FakeTaskHost(guarantee="at_most_once", errors_fail=False))
    ex._execute_batch(1, "default", list(ROWS))
    ex._execute_batch(1, "default", [("w99",)])
    assert comp.seen == [r[0] for r in ROWS] + ["w99"]
    assert [t["word"] for t in comp.kept] == [f"w{i}" for i in range(0, 50, 2)]
    assert len({id(t) for t in comp.kept}) == 25
    assert comp.last is not None and comp.last["word"] == "w99"
    assert all(isinstance(t, Tuple) and t.source == "split" and t.task == 1 for t in comp.kept)


def test_tuples_nobody_keeps_are_recycled_and_each_execute_sees_its_own_values() -> None:
    comp = Forgetter()
    ex = executor(comp, Sent(), FakeTaskHost(guarantee="at_most_once", errors_fail=False))
    ex._execute_batch(1, "default", list(ROWS))
    assert comp.seen == [r[0] for r in ROWS]
    assert len(comp.ids) == 1  # one object served the whole batch
