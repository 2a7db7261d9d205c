"""What each scaling event says, field by field, as a rule's target receives it: a resize,
a backoff and a drain's end, built from the decision, backoff or drain that made them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.groups.scaling_events import backed_off, drain_finished, resized
from nodescaler.domain.scale_down.drain import DrainOutcome, DrainResult, LifecycleResult, PodNote
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scaling.decision import Decision, Limit

AT = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def decision(current: int, desired: int) -> Decision:
    return Decision(
        node_group="web",
        policy="cpu-target",
        at=AT,
        current=current,
        desired=desired,
        in_service=current - 1,
        min_replicas=2,
        max_replicas=20,
        recommendation=desired + 3,
        metrics=(),
        limited_by=(Limit.SCALE_UP_RATE, Limit.MAX),
        reason="cpu 90% of 60%",
    )


def test_given_a_scale_up_then_its_event_tells_every_field_of_the_decision() -> None:
    # Given a decision that grows node group web from 4 to 9
    # When it is told on the bus
    event = resized(decision(4, 9), "prod")

    # Then the event is a Node Group Resized of that time, saying all the decision said
    assert event.detail_type == "Node Group Resized"
    assert event.at == AT
    assert json.loads(event.detail_json()) == {
        "cluster": "prod",
        "nodeGroup": "web",
        "policy": "cpu-target",
        "direction": "up",
        "previous": 4,
        "desired": 9,
        "inService": 3,
        "minReplicas": 2,
        "maxReplicas": 20,
        "recommendation": 12,
        "limitedBy": ["scale-up-rate", "max"],
        "reason": "cpu 90% of 60%",
        "decidedAt": "2026-11-23T09:00:00Z",
    }


@pytest.mark.parametrize(
    ("current", "desired", "direction"), [(4, 5, "up"), (5, 4, "down")], ids=["up", "down"]
)
def test_given_a_change_of_one_node_then_its_event_says_which_way(
    current: int, desired: int, direction: str
) -> None:
    # Given a decision that grows or shrinks the group by one (the smallest change)
    # When it is told
    event = resized(decision(current, desired), "prod")

    # Then its direction says which way
    assert json.loads(event.detail_json())["direction"] == direction


def test_given_a_backoff_then_its_event_tells_until_when_why_and_who_noticed() -> None:
    # Given a scale-up of group web that failed at 09:00, backed off for ten minutes
    failed = AT + timedelta(minutes=1)
    backoff = Backoff(
        until=failed + timedelta(minutes=10), seconds=600, last_failure=failed, reason="no capacity"
    )

    # When an evaluation watching the scale-up tells it
    event = backed_off("web", backoff, "prod", "evaluation")

    # Then the event, of the failure's time, says all of it
    assert event.detail_type == "Node Group Backed Off"
    assert event.at == failed
    assert json.loads(event.detail_json()) == {
        "cluster": "prod",
        "nodeGroup": "web",
        "until": "2026-11-23T09:11:00Z",
        "seconds": 600,
        "reason": "no capacity",
        "failedAt": "2026-11-23T09:01:00Z",
        "noticedBy": "evaluation",
    }


def test_given_a_failed_drain_then_its_event_names_node_problem_time_and_milliseconds() -> None:
    # Given a drain of node n1 that failed part-way after 12.34567 s
    result = DrainResult(
        "i-0abc",
        "spot-interruption",
        DrainOutcome.FAILED,
        node="n1",
        node_group="web",
        evicted=("shop/cart-1",),
        remaining=(PodNote("shop/api-2", "eviction refused: 500"),),
        lifecycle_result=LifecycleResult.ABANDON,
        seconds=12.34567,
        problem="the API server went away",
    )
    ended = AT + timedelta(seconds=13)

    # When its end is told
    event = drain_finished(result, "prod", ended)

    # Then the event is of the drain's end, and names the node, the problem and the seconds
    # to the millisecond
    assert event is not None
    assert event.at == ended
    assert json.loads(event.detail_json()) == {
        "cluster": "prod",
        "nodeGroup": "web",
        "instanceId": "i-0abc",
        "node": "n1",
        "cause": "spot-interruption",
        "lifecycleResult": "ABANDON",
        "evicted": ["shop/cart-1"],
        "remaining": [{"pod": "shop/api-2", "reason": "eviction refused: 500"}],
        "disruptionBudgets": [],
        "seconds": 12.346,
        "problem": "the API server went away",
        "outcome": "failed",
    }
