"""The recovery's restore decision in isolation (master/restore_plan.py)."""

import dataclasses
import typing

import pytest

from jstormpy.master.restore_plan import (
    LATEST,
    ListCompleted,
    PersistEpochStart,
    PersistFloor,
    PersistGeneration,
    ReadMetadata,
    Refuse,
    Restore,
    RestoreAction,
    RestorePlan,
    RetryLater,
    Unusable,
    prepare_ids,
)


def plan(**kw):
    args = dict(generation=3, target=LATEST, stateful=True, persisted_generation=2,
                completed_floor=0, bad=())
    args.update(kw)
    return RestorePlan(args.pop("generation"), args.pop("target"), **args)


def test_the_steps_and_outcomes_cannot_be_changed_once_handed_out():
    """Every kind of step and outcome the plan hands its performer is a value: what the
    plan decided is what is performed, whoever holds it (the TM's backend thread, the
    simulator), and equal ones compare equal."""
    actions = [PersistGeneration(3), ListCompleted(), ReadMetadata(4), PersistEpochStart(2, 4),
               PersistFloor(4), RetryLater("why"), Unusable(4, "why"), Refuse("why"),
               Restore(4, {1: "handle"})]
    assert {type(a) for a in actions} == set(typing.get_args(RestoreAction))
    for action in actions:
        assert action == dataclasses.replace(action)
        name = next((f.name for f in dataclasses.fields(action)), "checkpoint_id")
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(action, name, 5)


def test_the_generation_is_stored_before_anything_is_listed():
    p = plan()
    assert p.begin() == [PersistGeneration(3)]
    assert p.generation_persisted() == [ListCompleted()]


def test_a_generation_that_cannot_be_stored_prepares_nobody():
    p = plan()
    p.begin()
    [retry] = p.generation_not_persisted("disk full")
    assert isinstance(retry, RetryLater) and "generation 3" in retry.reason


def test_an_already_stored_generation_goes_straight_to_the_listing():
    assert plan(persisted_generation=3).begin() == [ListCompleted()]


def test_the_newest_usable_checkpoint_is_read_and_restored():
    p = plan(persisted_generation=3, bad={9}, persisted_floor=8)
    p.begin()
    assert p.listed([7, 8, 9]) == [ReadMetadata(8)]
    meta = {"tasks": {"0": {"handle": "h0"}, "1": {"handle": "h1"}}}
    assert p.metadata_read(8, meta) == [Restore(8, {0: "h0", 1: "h1"})]


def test_a_failed_listing_is_never_read_as_no_checkpoints():
    p = plan(persisted_generation=3)
    p.begin()
    [retry] = p.listing_failed("EIO")
    assert isinstance(retry, RetryLater) and "EIO" in retry.reason
    assert not p.listing_ok


def test_a_listing_missing_the_newest_completed_checkpoint_is_refused():
    p = plan(persisted_generation=3, completed_floor=12)
    p.begin()
    [retry] = p.listed([5, 6])
    assert isinstance(retry, RetryLater)
    assert "checkpoint 12 completed in this run" in retry.reason
    # only when that checkpoint turned out unusable may the recovery go below it
    p = plan(persisted_generation=3, completed_floor=12, bad={12})
    p.begin()
    assert p.listed([5, 6]) == [ReadMetadata(6)]


def test_an_empty_store_with_no_floor_restores_fresh_state():
    p = plan(persisted_generation=3)
    p.begin()
    assert p.listed([]) == [Restore(None)]


def test_corrupt_metadata_makes_the_target_unusable_and_a_timeout_retries():
    p = plan(persisted_generation=3)
    p.begin()
    p.listed([4])
    assert p.metadata_unusable(4, "bad pickle") == [Unusable(4, "bad pickle")]
    assert isinstance(p.metadata_read(4, {"nope": 1})[0], Unusable)
    assert isinstance(p.metadata_failed(4, "timeout")[0], RetryLater)


def test_sinks_recover_to_the_restored_checkpoint_and_ids_resume_above_the_floor():
    assert prepare_ids(5, 7, stateful=True) == (5, 7)
    assert prepare_ids(None, 7, stateful=True) == (0, 7)
    assert prepare_ids(9, 7, stateful=True) == (9, 9)
    assert prepare_ids(9, 7, stateful=False) == (0, 0)


def test_a_target_above_the_stored_floor_is_stored_as_the_floor_before_any_prepare():
    """Simulator seed 36835: a TM died between checkpoint 4's commit point and its floor;
    the next restored 4 (the sinks committed it again), died too, and the third, reading
    floor 3 and a short listing, restored 3 below what the sinks had committed."""
    p = plan(persisted_generation=3, completed_floor=3, persisted_floor=3)
    p.begin()
    assert p.listed([3, 4]) == [ReadMetadata(4)]
    meta = {"tasks": {"0": {"handle": "h0"}}}
    assert p.metadata_read(4, meta) == [PersistFloor(4)]
    [retry] = p.floor_not_persisted("disk full")
    assert isinstance(retry, RetryLater) and "checkpoint 4" in retry.reason
    assert p.floor_persisted() == [Restore(4, {0: "h0"})]


def test_no_usable_checkpoint_after_one_completed_fails_instead_of_restoring_nothing():
    """Every checkpoint this run completed turned out unusable (corrupt snapshots, a
    damaged SST file): empty state would replay committed output, so the recovery
    refuses, naming the checkpoints; before one completed, fresh state is right."""
    p = plan(persisted_generation=3, completed_floor=5, bad={4, 5})
    p.begin()
    [refuse] = p.listed([4, 5])
    assert isinstance(refuse, Refuse) and "[4, 5]" in refuse.reason
    assert "checkpoint 5 completed" in refuse.reason
    p = plan(persisted_generation=3, completed_floor=0, bad={1})
    p.begin()
    assert p.listed([1]) == [Restore(None)]


def meta_of(epoch):
    return {"tasks": {"0": {"handle": "h0"}}, "run": {"job_id": "j", "epoch": epoch}}


def test_an_epochs_first_restore_is_stored_before_the_restore_then_the_floor():
    from jstormpy.master.restore_plan import PersistEpochStart

    p = plan(persisted_generation=3, epoch=2, epoch_starts={1: 0})
    p.begin()
    assert p.listed([4, 5]) == [ReadMetadata(5)]
    assert p.metadata_read(5, meta_of(1)) == [PersistEpochStart(2, 5)]
    assert p.epoch_start_persisted() == [PersistFloor(5)]
    assert p.floor_persisted() == [Restore(5, {0: "h0"})]


def test_an_epoch_start_that_cannot_be_stored_prepares_nobody():
    p = plan(persisted_generation=3, epoch=2, persisted_floor=5)
    p.begin()
    p.listed([5])
    p.metadata_read(5, meta_of(1))
    [retry] = p.epoch_start_not_persisted("EIO")
    assert isinstance(retry, RetryLater) and "epoch 2" in retry.reason


def test_an_older_epochs_checkpoint_above_a_later_epochs_restore_is_unusable():
    p = plan(persisted_generation=3, epoch=3, epoch_starts={2: 5, 3: 5}, persisted_floor=7)
    p.begin()
    assert p.listed([5, 6, 7]) == [ReadMetadata(7)]
    [unusable] = p.metadata_read(7, meta_of(1))  # landed after epoch 2 restored 5
    assert isinstance(unusable, Unusable) and "epoch 1" in unusable.reason
    assert "epoch 2 restored checkpoint 5" in unusable.reason
    # epoch 2's too (epoch 3 restored 5); epoch 3's own, or one at or below 5: restorable
    q = plan(persisted_generation=3, epoch=3, epoch_starts={2: 5, 3: 5}, persisted_floor=7)
    q.begin()
    q.listed([7])
    assert isinstance(q.metadata_read(7, meta_of(2))[0], Unusable)
    for cid, epoch in ((7, 3), (5, 1), (5, 2)):
        q = plan(persisted_generation=3, epoch=3, epoch_starts={2: 5, 3: 5}, persisted_floor=7)
        q.begin()
        q.listed([cid])
        assert q.metadata_read(cid, meta_of(epoch)) == [Restore(cid, {0: "h0"})]


def test_a_run_without_epochs_has_no_epoch_check():
    p = plan(persisted_generation=3, epoch_starts={2: 1}, persisted_floor=7)
    p.begin()
    p.listed([7])
    assert p.metadata_read(7, meta_of(1)) == [Restore(7, {0: "h0"})]


def test_a_workers_answer_to_a_prepare_is_one_order_of_values():
    """The worker's side of a recovery (``runtime/prepare_steps.py``): a Prepare's steps
    are values in one order, equal for equal Prepares, whoever performs them (the worker,
    the simulator, the inline runner), and cannot be changed once handed out; a stale
    Prepare has none."""
    from jstormpy.runtime.prepare_steps import (
        AnswerReady,
        BuildTasks,
        PrepareOrder,
        ReadSnapshots,
        RestoreSinks,
        StopTasks,
        TakeGeneration,
        steps,
    )

    order = PrepareOrder(3, (2, 1), {1: "h1"})
    assert steps(order, 2) == (StopTasks(3), TakeGeneration(3), ReadSnapshots({1: "h1"}),
                               BuildTasks((1, 2)), RestoreSinks(), AnswerReady())
    assert steps(order, 4) == ()
    # a Prepare of the generation the worker runs is no stale one: an at_most_once worker
    # that registers again in its generation gets a partial Prepare of it
    assert steps(PrepareOrder(3, (1,), partial=True), 3) == (
        TakeGeneration(3), ReadSnapshots({}), BuildTasks((1,)), RestoreSinks(), AnswerReady())
    for step in steps(order, 2):
        with pytest.raises(dataclasses.FrozenInstanceError):
            step.generation = 5  # type: ignore[misc, union-attr]


def test_a_task_that_fails_to_build_is_the_prepares_answer_not_the_workers_crash():
    """``runtime/prepare_steps.py``: a task whose build fails with an error the runtime
    answers (a user component's ``ValueError`` here) is answered ``Ready(ok=False)``
    naming the task and the error, and the tasks after it are not built; an error the
    runtime does not answer (a bug of its own) propagates."""
    from jstormpy.runtime.prepare_steps import PrepareOrder, Ready
    from jstormpy.runtime.prepare_steps import perform as perform_prepare

    class BuildFails:
        generation = 2

        def __init__(self, error: Exception) -> None:
            self.error = error
            self.calls: list[tuple] = []
            self.answers: list[Ready] = []

        def stop_tasks(self, generation: int) -> None:
            self.calls.append(("stop_tasks", generation))

        def take_generation(self, generation: int) -> None:
            self.calls.append(("take_generation", generation))

        def read_snapshot(self, task_id, handle, then) -> None:  # type: ignore[no-untyped-def]
            then(None, None)

        def current(self, generation: int) -> bool:
            return True

        def begin_build(self, tasks) -> None:  # type: ignore[no-untyped-def]
            self.calls.append(("begin_build", tuple(tasks)))

        def build_task(self, task_id: int, snapshot: object) -> None:
            self.calls.append(("build_task", task_id))
            if task_id == 1:
                raise self.error

        def built(self, tasks) -> None:  # type: ignore[no-untyped-def]
            self.calls.append(("built", tuple(tasks)))

        def sinks(self) -> list[int]:
            return []

        def restore_sink(self, task_id: int) -> None:
            self.calls.append(("restore_sink", task_id))

        def answerable(self, error: Exception) -> bool:
            return isinstance(error, ValueError)

        def ready(self, ready: Ready) -> None:
            self.answers.append(ready)

    port = BuildFails(ValueError("bad parallelism hint"))
    perform_prepare(PrepareOrder(3, (2, 1)), port)
    assert port.answers == [Ready(3, False, False, "ValueError: bad parallelism hint", 1)]
    assert ("build_task", 2) not in port.calls and not any(c[0] == "built" for c in port.calls)

    bug = BuildFails(RuntimeError("a bug of the runtime"))
    with pytest.raises(RuntimeError, match="a bug of the runtime"):
        perform_prepare(PrepareOrder(3, (2, 1)), bug)
    assert bug.answers == []


def test_of_several_snapshot_reads_that_fail_the_first_to_answer_is_the_prepares_answer():
    """``runtime/prepare_steps.py``: where the reads answer later (the simulator's storage
    events), every read of a Prepare is issued and several may fail. The Prepare is
    answered once, when the last read answered, with the first failure: here task 2's
    corrupt snapshot (the TM then falls back to an older checkpoint), not task 1's later
    storage error (a failure, counted against the restart strategy)."""
    from jstormpy.api.errors import BackendError, CorruptSnapshotError
    from jstormpy.runtime.prepare_steps import PrepareOrder, Ready
    from jstormpy.runtime.prepare_steps import perform as perform_prepare

    class ReadsLater:
        generation = 2

        def __init__(self) -> None:
            self.reads: dict[int, typing.Callable[[object, BaseException | None], None]] = {}
            self.answers: list[Ready] = []
            self.built: list[int] = []

        def stop_tasks(self, generation: int) -> None:
            pass

        def take_generation(self, generation: int) -> None:
            pass

        def read_snapshot(self, task_id, handle, then) -> None:  # type: ignore[no-untyped-def]
            self.reads[task_id] = then

        def current(self, generation: int) -> bool:
            return True

        def begin_build(self, tasks) -> None:  # type: ignore[no-untyped-def]
            pass

        def build_task(self, task_id: int, snapshot: object) -> None:
            self.built.append(task_id)

        def built(self, tasks) -> None:  # type: ignore[no-untyped-def]
            pass

        def sinks(self) -> list[int]:
            return []

        def restore_sink(self, task_id: int) -> None:
            pass

        def answerable(self, error: Exception) -> bool:
            return True

        def ready(self, ready: Ready) -> None:
            self.answers.append(ready)

    port = ReadsLater()
    perform_prepare(PrepareOrder(3, (1, 2, 3), {1: "h1", 2: "h2", 3: "h3"}), port)
    assert sorted(port.reads) == [1, 2, 3] and port.answers == []
    port.reads[2](None, CorruptSnapshotError("chk-7/task-2: checksum mismatch"))
    port.reads[3](b"state", None)
    assert port.answers == []  # task 1's read has not answered yet
    port.reads[1](None, BackendError("chk-7/task-1: connection reset"))
    assert port.answers == [Ready(3, False, True,
                                  "CorruptSnapshotError: chk-7/task-2: checksum mismatch", 2)]
    assert port.built == []


def test_a_workers_answer_to_the_recovery_is_met_with_values():
    """``recovery_steps.worker_ready``: each outcome of a worker's Ready (wait for the
    others, start all, fall back past a corrupt snapshot, fail the generation) is a
    value, as the plan's steps are: equal ones compare and hash alike, so a performer may
    keep and compare them, and none can be changed once handed out."""
    from jstormpy.master.coordinator import CheckpointCoordinator
    from jstormpy.master.recovery_steps import ReadyOutcome, worker_ready

    c = CheckpointCoordinator(stateful=True, max_concurrent=1, timeout_s=10.0,
                              tolerable_timeouts=1)
    c.set_layout({1: "spout", 2: "sink"}, spout_tasks=[1], sink_tasks=[2])
    c.new_generation(1)
    ready: set[int] = set()
    common = {"target": 4, "workers": 2, "base": 4, "now": 1.0}
    outcomes = [worker_ready(c, ready, 0, ok=True, corrupt=False, **common),
                worker_ready(c, ready, 1, ok=True, corrupt=False, **common),
                worker_ready(c, set(), 0, ok=False, corrupt=False, **common),
                worker_ready(c, set(), 0, ok=False, corrupt=True, **common)]
    assert {type(o) for o in outcomes} == set(typing.get_args(ReadyOutcome))
    for outcome in outcomes:
        copy = dataclasses.replace(outcome)
        assert outcome == copy and hash(outcome) == hash(copy)
        name = next((f.name for f in dataclasses.fields(outcome)), "checkpoint_id")
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(outcome, name, 5)
