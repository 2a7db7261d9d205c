"""The drain function's events: every sample parses; a malformed one is refused by field."""

from __future__ import annotations

from typing import Any

import pytest
from nodescaler.errors import MalformedEventError
from nodescaler.events.drain import (
    LifecycleActionEvent,
    LifecycleTestEvent,
    RebalanceRecommendationEvent,
    SpotInterruptionEvent,
    parse_drain_event,
)

from tests.unit.test_events import sample


def test_the_lifecycle_sample_is_a_terminate_action_to_complete() -> None:
    event = parse_drain_event(sample("lifecycle-terminate.json"))
    assert isinstance(event, LifecycleActionEvent)
    action = event.detail
    assert (action.group, action.hook, action.instance_id) == (
        "web",
        "nodescaler-drain",
        "i-0b1c2d3e4f5a6b7c8",
    )
    assert action.token == "87654321-4321-4321-4321-210987654321"
    assert (action.origin, action.destination) == ("AutoScalingGroup", "EC2")
    assert event.cause == "lifecycle-action"


def test_the_spot_samples_name_their_instance() -> None:
    warning = parse_drain_event(sample("spot-interruption.json"))
    rebalance = parse_drain_event(sample("rebalance-recommendation.json"))
    assert isinstance(warning, SpotInterruptionEvent)
    assert isinstance(rebalance, RebalanceRecommendationEvent)
    assert (warning.instance_id, warning.detail.instance_action, warning.cause) == (
        "i-0a1b2c3d4e5f6a7b8",
        "terminate",
        "spot-interruption",
    )
    assert (rebalance.instance_id, rebalance.cause) == (
        "i-0a1b2c3d4e5f6a7b8",
        "rebalance-recommendation",
    )


def test_the_hooks_test_notification_is_recognised_not_refused() -> None:
    event = sample("lifecycle-terminate.json") | {
        "detail": {
            "AccountId": "123456789012",
            "RequestId": "c1f0f2b4-1a2b-4c3d-8e9f-0a1b2c3d4e5f",
            "AutoScalingGroupARN": "arn:aws:autoscaling:eu-west-1:123456789012:autoScalingGroup:4c4f6e1b:autoScalingGroupName/web",
            "AutoScalingGroupName": "web",
            "Service": "AWS Auto Scaling",
            "Event": "autoscaling:TEST_NOTIFICATION",
            "Time": "2026-11-23T09:00:02.112Z",
        }
    }
    parsed = parse_drain_event(event)
    assert isinstance(parsed, LifecycleTestEvent)
    assert parsed.detail.group == "web"


def _lifecycle(**detail: Any) -> dict[str, Any]:
    event = sample("lifecycle-terminate.json")
    event["detail"] |= detail
    return event


def _spot(**detail: Any) -> dict[str, Any]:
    event = sample("spot-interruption.json")
    event["detail"] |= detail
    return event


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            _lifecycle(LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING"),
            "EC2 Instance-terminate Lifecycle Action.detail.LifecycleTransition: Input should be "
            "'autoscaling:EC2_INSTANCE_TERMINATING'",
        ),
        (
            _lifecycle(LifecycleActionToken=None),
            "EC2 Instance-terminate Lifecycle Action.detail.LifecycleActionToken: "
            "Input should be a valid string",
        ),
        (
            _lifecycle(EC2InstanceId="web-1"),
            "detail.EC2InstanceId: String should match pattern",
        ),
        (
            _spot(**{"instance-action": "reboot"}),
            "EC2 Spot Instance Interruption Warning.detail.instance-action: Input should be "
            "'terminate', 'stop' or 'hibernate'",
        ),
        (
            sample("rebalance-recommendation.json") | {"detail": {}},
            "EC2 Instance Rebalance Recommendation.detail.instance-id: Field required",
        ),
        (
            _spot() | {"source": "aws.autoscaling"},
            "EC2 Spot Instance Interruption Warning.source: Input should be 'aws.ec2'",
        ),
        (
            _spot() | {"detail-type": "EC2 Instance State-change Notification"},
            "Input tag 'EC2 Instance State-change Notification' found using detail_type() does "
            "not match any of the expected tags",
        ),
        ("not an event", "(event): Unable to extract tag"),
    ],
)
def test_a_malformed_drain_event_is_refused_naming_the_event_and_field(
    event: Any, message: str
) -> None:
    with pytest.raises(MalformedEventError) as caught:
        parse_drain_event(event)
    assert message in str(caught.value)
    event_id = event["id"] if isinstance(event, dict) else "?"
    assert str(caught.value).startswith(
        f"event {event_id} can't be read as a terminate lifecycle action or an EC2 Spot warning: "
    )
