"""The fast path's asks at their edges: a backlog at or below the group's size asks
nothing, and what SQS accepted is the most a queue asked for."""

from __future__ import annotations

from nodescaler.domain.scale_up.fast_path_rules import Debounce, queue_need

from tests.builders import T0, policy, queue_metric
from tests.unit.test_fast_path_rules import group


def test_a_backlog_for_the_size_or_less_asks_for_nothing() -> None:
    jobs = policy(queue_metric("jobs", per_node=4))
    (metric,) = jobs.spec.metrics
    assert queue_need(metric, 40, group(10), jobs) == 0  # exactly on target
    assert queue_need(metric, 8, group(10), jobs) == 0  # a scale-in is the tick's


def test_a_first_need_of_one_node_is_a_rise() -> None:
    assert Debounce().need_rose("jobs", 1)


def test_a_smaller_need_accepted_later_does_not_lower_the_one_asked() -> None:
    debounce = Debounce()
    debounce.accepted("g", (), {"jobs": 5}, T0)
    debounce.accepted("g", (), {"jobs": 3}, T0)
    assert not debounce.need_rose("jobs", 4)
    assert debounce.need_rose("jobs", 6)


def test_a_need_of_nothing_accepted_leaves_a_need_of_one_a_rise() -> None:
    debounce = Debounce()
    debounce.accepted("g", (), {"jobs": 0}, T0)
    assert debounce.need_rose("jobs", 1)
