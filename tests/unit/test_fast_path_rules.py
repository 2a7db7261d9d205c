"""The fast path's rules (domain/scale_up/fast_path_rules.py): a queue is past its target only beyond the
HPA's tolerance, a pod is asked of the groups whose nodes could take it, a group is asked
again only for something new SQS has not taken yet, a request's id is what it asks, and
failed looks back off doubling to a cap."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Placement, Pod, Resources, Taint, Toleration
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scale_up.fast_path_rules import (
    SLOT_SECONDS,
    Backoff,
    Debounce,
    fitting_groups,
    queue_need,
    request_event_id,
)

from tests.builders import T0, policy, queue_metric


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


AT = datetime(2026, 11, 23, 9, 0, 0, tzinfo=UTC)


def test_given_the_same_pods_then_only_what_sqs_took_is_not_new_and_gone_ones_are_forgotten() -> (
    None
):
    debounce = Debounce()
    assert debounce.new_pods({"a": ["x"], "b": ["x", "y"]}) == {"x": {"a", "b"}, "y": {"b"}}
    # nothing accepted yet (a send refused): still new
    assert debounce.new_pods({"a": ["x"], "b": ["x", "y"]}) == {"x": {"a", "b"}, "y": {"b"}}
    debounce.accepted("x", {"a", "b"}, {}, AT)  # y's request was refused
    assert debounce.new_pods({"a": ["x"], "b": ["x", "y"]}) == {"y": {"b"}}
    debounce.accepted("y", {"b"}, {}, AT)
    assert debounce.new_pods({"a": ["x"], "b": ["x", "y"]}) == {}
    assert debounce.new_pods({"b": ["x", "y"], "c": ["x"]}) == {"x": {"c"}}
    assert debounce.new_pods({"b": ["y"]}) == {}
    assert debounce.new_pods({"a": ["x"]}) == {"x": {"a"}}  # gone, then back: new again


def test_given_a_group_just_asked_then_it_rests_for_the_slot() -> None:
    debounce = Debounce()
    assert not debounce.resting("x", AT)
    debounce.accepted("x", {"a"}, {}, AT)
    assert debounce.resting("x", AT + timedelta(seconds=SLOT_SECONDS - 1))
    assert not debounce.resting("x", AT + timedelta(seconds=SLOT_SECONDS))
    assert not debounce.resting("y", AT)


def test_given_a_queue_need_then_only_a_rise_sqs_has_not_taken_asks_again() -> None:
    debounce = Debounce()
    assert debounce.need_rose("jobs", 5)
    assert debounce.need_rose("jobs", 5)  # not taken yet: asked again
    debounce.accepted("jobs-nodes", (), {"jobs": 5}, AT)
    assert not debounce.need_rose("jobs", 5)
    assert not debounce.need_rose("jobs", 3)
    assert not debounce.need_rose("jobs", 4)  # asked for 5 already
    assert debounce.need_rose("jobs", 6)
    assert not debounce.need_rose("jobs", 0)
    assert debounce.need_rose("jobs", 2)  # a new rise after the backlog was drained


GIB = 2**30
GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")


def pending(cpu: int = 1000, **placement: object) -> Pod:
    return Pod(
        "default",
        "p",
        None,
        Resources(cpu, GIB, 1),
        phase="Pending",
        unschedulable=True,
        placement=Placement(**placement),  # type: ignore[arg-type]
    )


TEMPLATES = {
    "small": NodeTemplate("small", Resources(2000, 8 * GIB, 110), {"pool": "web"}),
    "big": NodeTemplate("big", Resources(16000, 64 * GIB, 110), {"pool": "batch"}),
    "gpu": NodeTemplate("gpu", Resources(16000, 64 * GIB, 110), {}, (GPU_TAINT,)),
}
GROUPS = ("small", "big", "gpu", "new")  # "new": no live node, no template


def test_a_daemon_sets_pod_is_asked_of_no_group() -> None:
    # it waits for the one node it is made for: no new node helps it
    assert fitting_groups(replace(pending(), daemon_set=True), TEMPLATES, GROUPS) == ()


def test_a_pod_is_asked_of_the_groups_whose_nodes_could_take_it_by_the_planners_test() -> None:
    assert fitting_groups(pending(), TEMPLATES, GROUPS) == ("small", "big", "new")
    assert fitting_groups(pending(cpu=4000), TEMPLATES, GROUPS) == ("big", "new")
    assert fitting_groups(pending(node_selector={"pool": "web"}), TEMPLATES, GROUPS) == (
        "small",
        "new",
    )
    tolerates = (Toleration("nvidia.com/gpu", "Exists"),)
    assert fitting_groups(pending(cpu=8000, tolerations=tolerates), TEMPLATES, GROUPS) == (
        "big",
        "gpu",
        "new",
    )
    assert fitting_groups(pending(cpu=99000), TEMPLATES, ("small", "big")) == ()


def test_a_requests_id_is_what_it_asks_not_when() -> None:
    assert request_event_id("batch", ["uid-1", "uid-2"]) == request_event_id(
        "batch", ["uid-2", "uid-1"]
    )
    assert request_event_id("batch", ["uid-1"]) != request_event_id("batch", ["uid-1", "uid-2"])
    assert request_event_id("batch", ["uid-1"]) != request_event_id("other", ["uid-1"])
    assert request_event_id("batch", ["uid-1"]).startswith("fast-")
    assert len(request_event_id("batch", ["uid-1"])) <= 128  # EvaluationRequest.event_id


def test_failed_looks_back_off_doubling_to_the_cap() -> None:
    backoff = Backoff(initial=1, maximum=30)
    assert [backoff.delay(n) for n in range(8)] == [0, 1, 2, 4, 8, 16, 30, 30]


# The fast path's asks at their edges: a backlog at or below the group's size asks nothing,
# and what SQS accepted is the most a queue asked for.


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
