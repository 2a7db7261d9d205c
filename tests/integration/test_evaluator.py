"""The evaluator against moto: opt-in, the queue burst 0 → 600 → min, dry-run, duplicates, races."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import SqsQueueMetric
from nodescaler.errors import ActuationError, StateConflictError
from nodescaler.service.evaluation import Evaluator, Outcome, Setup
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers

from tests.aws import (
    CallCounter,
    client,
    desired_capacity,
    fill_queue,
    make_asg,
    make_state_table,
)
from tests.builders import StaleReads, VirtualClock, policy, queue_metric

TABLE = "state"
GPU = policy(
    queue_metric("jobs", per_node=4),
    max_replicas=600,
    name="gpu",
    behavior={
        "scaleUp": {"policies": [{"type": "Replicas", "value": 600, "periodSeconds": 60}]},
        "scaleDown": {
            "stabilizationWindowSeconds": 600,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
        },
    },
)
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "gpu"}


@pytest.fixture
def world(calls: CallCounter) -> dict[str, Any]:
    dynamodb = make_state_table(TABLE)
    sqs = client("sqs")
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    make_asg("gpu-ng", tags=TAGS, max_size=600)
    make_asg("untagged", desired=2)
    make_asg("bad-policy", tags=TAGS | {"nodescaler/policy": "nope"}, desired=2)
    autoscaling = calls.watch(client("autoscaling"))
    clock = VirtualClock()
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(autoscaling, client("eks"), tag_names=TagNames()),
        producers=Producers({SqsQueueMetric: SqsQueueLength(sqs)}),
        state=DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=7)),
        policies=PolicyBook({"gpu": GPU}),
        clock=clock,
    )
    return {"evaluator": evaluator, "clock": clock, "sqs": sqs, "queue": queue_url}


def test_given_a_queue_burst_then_the_group_scales_out_at_once_and_back_to_0_after_the_window(
    world: dict[str, Any], calls: CallCounter
) -> None:
    evaluator, clock = world["evaluator"], world["clock"]
    fill_queue("jobs", 2400)
    result = evaluator.evaluate("gpu-ng", "m-0")
    assert (result.outcome, desired_capacity("gpu-ng")) == (Outcome.ACTED, 600)

    world["sqs"].purge_queue(QueueUrl=world["queue"])
    outcomes = []
    for minute in range(1, 12):
        clock.advance(minutes=1)
        outcomes.append(evaluator.evaluate("gpu-ng", f"m-{minute}").outcome)
    assert outcomes == [Outcome.UNCHANGED] * 9 + [Outcome.ACTED, Outcome.UNCHANGED]
    assert desired_capacity("gpu-ng") == 0
    assert calls.calls["SetDesiredCapacity"] == 2


def test_an_evaluation_that_changes_nothing_writes_nothing_to_auto_scaling(
    world: dict[str, Any], calls: CallCounter
) -> None:
    result = world["evaluator"].evaluate("gpu-ng", "m-0")
    assert result.outcome is Outcome.UNCHANGED
    assert calls.calls["SetDesiredCapacity"] == 0


def test_untagged_and_badly_tagged_groups_are_never_touched(
    world: dict[str, Any], calls: CallCounter
) -> None:
    evaluator = world["evaluator"]
    untagged = evaluator.evaluate("untagged", "m-1")
    bad = evaluator.evaluate("bad-policy", "m-2")
    assert (untagged.outcome, untagged.problems) == (Outcome.SKIPPED, ("not opted in",))
    assert bad.outcome is Outcome.REJECTED
    assert bad.problems == (
        "node group bad-policy: tag nodescaler/policy='nope' names no deployed policy (deployed: gpu)",
    )
    assert calls.calls["SetDesiredCapacity"] == 0
    assert (desired_capacity("untagged"), desired_capacity("bad-policy")) == (2, 2)
    # the problem is kept in the group's state (for `nodescaler status`), written once
    assert evaluator.state.load("bad-policy").problems == bad.problems
    evaluator.evaluate("bad-policy", "m-3")
    assert evaluator.state.load("bad-policy").version == 1


def test_a_group_in_dry_run_records_its_decision_without_acting(world: dict[str, Any]) -> None:
    client("autoscaling").create_or_update_tags(
        Tags=[
            {
                "ResourceId": "gpu-ng",
                "ResourceType": "auto-scaling-group",
                "Key": "nodescaler/dry-run",
                "Value": "true",
                "PropagateAtLaunch": False,
            }
        ]
    )
    fill_queue("jobs", 40)
    result = world["evaluator"].evaluate("gpu-ng", "m-0")
    assert (result.outcome, result.decision.desired, desired_capacity("gpu-ng")) == (
        Outcome.DRY_RUN,
        10,
        0,
    )  # type: ignore[union-attr]


def test_with_the_global_dry_run_setting_no_group_is_resized(world: dict[str, Any]) -> None:
    fill_queue("jobs", 40)
    evaluator = replace(world["evaluator"], setup=Setup(dry_run=True))
    result = evaluator.evaluate("gpu-ng", "m-0")
    assert (result.outcome, desired_capacity("gpu-ng")) == (Outcome.DRY_RUN, 0)


def test_a_redelivered_message_does_not_act_twice(
    world: dict[str, Any], calls: CallCounter
) -> None:
    fill_queue("jobs", 40)
    assert world["evaluator"].evaluate("gpu-ng", "m-0").outcome is Outcome.ACTED
    fill_queue("jobs", 400)
    assert world["evaluator"].evaluate("gpu-ng", "m-0").outcome is Outcome.DUPLICATE
    assert calls.calls["SetDesiredCapacity"] == 1


def test_two_evaluators_racing_on_one_group_act_once(
    world: dict[str, Any], calls: CallCounter
) -> None:
    first = world["evaluator"]
    racing = StaleReads(first.state)
    racing.load("gpu-ng")  # read before the first evaluator writes
    second = type(first)(**{**first.__dict__, "state": racing})
    fill_queue("jobs", 40)
    assert first.evaluate("gpu-ng", "m-1").outcome is Outcome.ACTED
    with pytest.raises(StateConflictError):
        second.evaluate("gpu-ng", "m-2")
    assert calls.calls["SetDesiredCapacity"] == 1


class ThrottledWrites:
    """An Auto Scaling client whose first SetDesiredCapacity is throttled, as AWS can."""

    def __init__(self, autoscaling: Any) -> None:
        self._autoscaling = autoscaling
        self.throttled = 0

    def set_desired_capacity(self, **request: Any) -> Any:
        if not self.throttled:
            self.throttled += 1
            raise ClientError(
                {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "SetDesiredCapacity"
            )
        return self._autoscaling.set_desired_capacity(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._autoscaling, name)


def test_given_a_throttled_resize_then_the_error_names_the_group_and_a_retry_acts_once(
    world: dict[str, Any], calls: CallCounter
) -> None:
    evaluator = world["evaluator"]
    autoscaling = calls.watch(client("autoscaling"))
    throttled = replace(
        evaluator,
        node_groups=AsgNodeGroups(
            ThrottledWrites(autoscaling), client("eks"), tag_names=TagNames()
        ),
    )
    fill_queue("jobs", 40)
    with pytest.raises(
        ActuationError,
        match=r"node group gpu-ng: resizing 0 → 10 failed: .*Throttling.*Rate exceeded",
    ):
        throttled.evaluate("gpu-ng", "m-1")
    assert desired_capacity("gpu-ng") == 0
    assert throttled.evaluate("gpu-ng", "m-1").outcome is Outcome.ACTED  # the redelivered message
    assert desired_capacity("gpu-ng") == 10
    assert calls.calls["SetDesiredCapacity"] == 1


def test_an_evaluation_that_finds_another_ones_resize_claimed_but_not_made_does_not_act(
    world: dict[str, Any], calls: CallCounter
) -> None:
    """Given one evaluation has claimed a resize and not made it yet, when another runs from
    start to end in that moment, then it fails on the conflict (and is retried) instead of
    taking the claim for a failed one and resizing too; retried, it finds the work done."""
    evaluator = world["evaluator"]
    outcomes: list[Any] = []
    started: list[str] = []

    def another_evaluation_in_between(**_: Any) -> None:
        if not started:
            started.append("m-2")
            try:
                outcomes.append(evaluator.evaluate("gpu-ng", "m-2").outcome)
            except StateConflictError as error:
                outcomes.append(error)

    client("autoscaling").meta.events.register(
        "before-call.auto-scaling.SetDesiredCapacity", another_evaluation_in_between
    )
    fill_queue("jobs", 40)
    assert evaluator.evaluate("gpu-ng", "m-1").outcome is Outcome.ACTED
    (in_between,) = outcomes
    assert isinstance(in_between, StateConflictError), in_between
    assert str(in_between) == (
        "node group gpu-ng: a resize to 10 claimed by another evaluation may still be in "
        "progress; this one will be retried"
    )
    assert evaluator.evaluate("gpu-ng", "m-2").outcome is Outcome.UNCHANGED  # delivered again
    assert (desired_capacity("gpu-ng"), calls.calls["SetDesiredCapacity"]) == (10, 1)


def test_each_evaluation_records_what_the_group_needed_and_how_long_its_nodes_took(
    world: dict[str, Any],
) -> None:
    evaluator, clock = world["evaluator"], world["clock"]
    store = DynamoStateStore(client("dynamodb"), TABLE)
    fill_queue("jobs", 2400)
    evaluator.evaluate("gpu-ng", "m-0")  # asks for 600
    world["sqs"].purge_queue(QueueUrl=world["queue"])
    clock.advance(minutes=6)  # moto's instances are in service at once: seen a tick later
    evaluator.evaluate("gpu-ng", "m-1")
    demand = store.load("gpu-ng").demand
    # 600 in the first five-minute slot, then 0 (an empty queue) though the scale-down window
    # holds the group at 600: the demand is what the metrics asked for, not the size
    assert demand.values == (600, 0)
    assert demand.lead_seconds == 6 * 60
