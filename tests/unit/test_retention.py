"""Retention's decision (state_backends/retention.py), which the state backends and the
simulator both perform."""

from __future__ import annotations

from jstormpy.state_backends.retention import eligible, plan_retention


def test_the_newest_completed_are_kept_and_everything_older_goes_incomplete_ones_too() -> None:
    done = eligible([1, 2, 3, 4])
    plan = plan_retention(done, [1, 2, 3, 4], present=[1, 2, 3, 4, 5], keep=2)
    # 5 is in flight above the newest completed checkpoint: untouched
    assert (plan.keep, plan.doomed, plan.newest) == (frozenset({3, 4}), (1, 2), 4)


def test_a_bad_or_late_commit_point_is_not_among_the_newest_and_nothing_above_is_touched(
        ) -> None:
    # 4 is bad; 304 a deposed leader's commit point above every id this TM knows
    done = eligible([2, 3, 4, 304], bad={4}, upto=10)
    assert done == [2, 3]
    plan = plan_retention(done, [2, 3, 4, 304], present=[1, 2, 3, 4, 304], keep=1)
    assert (plan.keep, plan.doomed) == (frozenset({3}), (1, 2))


def test_a_pinned_checkpoint_is_kept() -> None:
    plan = plan_retention([1, 2, 3], [1, 2, 3], present=[1, 2, 3], keep=1, pinned=[1, 9])
    assert (plan.keep, plan.doomed) == (frozenset({1, 3}), (2,))
