"""The fast path's rules (domain/fast_path.py): a queue is past its target only beyond the
HPA's tolerance, a group is asked again only for something new, and failed looks back off
doubling to a cap."""

from __future__ import annotations

from datetime import UTC, datetime

from nodescaler.domain.fast_path import Backoff, Debounce, queue_need, slot_event_id
from nodescaler.domain.node_group import NodeGroup

from tests.builders import policy, queue_metric


def group(desired: int) -> NodeGroup:
    return NodeGroup("jobs-nodes", desired, 0, 100, desired)


def test_given_a_backlog_beyond_the_tolerance_then_it_asks_for_what_the_target_needs() -> None:
    jobs = policy(queue_metric("jobs", per_node=4))
    (metric,) = jobs.spec.metrics
    assert queue_need(metric, 20, group(1), jobs) == 5
    assert queue_need(metric, 44, group(10), jobs) == 0  # 1.1 of target: within tolerance
    assert queue_need(metric, 48, group(10), jobs) == 12
    assert queue_need(metric, 0, group(10), jobs) == 0  # less is the tick's to decide


def test_given_a_tolerance_of_zero_in_the_policy_then_any_excess_asks() -> None:
    strict = policy(queue_metric("jobs", per_node=4), behavior={"scaleUp": {"tolerance": 0}})
    (metric,) = strict.spec.metrics
    assert queue_need(metric, 41, group(10), strict) == 11


def test_given_the_same_pods_then_nothing_is_new_and_gone_ones_are_forgotten() -> None:
    debounce = Debounce()
    assert debounce.new_pods({"a", "b"}) == {"a", "b"}
    assert debounce.new_pods({"a", "b"}) == frozenset()
    assert debounce.new_pods({"b", "c"}) == {"c"}


def test_given_a_queue_need_then_only_a_rise_asks_again() -> None:
    debounce = Debounce()
    assert debounce.need_rose("jobs", 5)
    assert not debounce.need_rose("jobs", 5)
    assert not debounce.need_rose("jobs", 3)
    assert not debounce.need_rose("jobs", 4)  # asked for 5 already
    assert debounce.need_rose("jobs", 6)
    assert not debounce.need_rose("jobs", 0)
    assert debounce.need_rose("jobs", 2)  # a new rise after the backlog was drained


def test_failed_looks_back_off_doubling_to_the_cap() -> None:
    backoff = Backoff(initial=1, maximum=30)
    assert [backoff.delay(n) for n in range(8)] == [0, 1, 2, 4, 8, 16, 30, 30]


def test_requests_within_one_ten_second_slot_share_their_event_id() -> None:
    at = datetime(2026, 11, 23, 9, 0, 0, tzinfo=UTC)
    assert slot_event_id(at) == slot_event_id(at.replace(second=9))
    assert slot_event_id(at) != slot_event_id(at.replace(second=10))
