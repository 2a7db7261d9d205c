"""Incoming events: every sample in events/ parses; a malformed one is refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nodescaler.errors import MalformedEventError
from nodescaler.events.dispatch import (
    AlarmStateChangeEvent,
    LaunchUnsuccessfulEvent,
    ScheduledEvent,
    parse_dispatch_event,
    unreplaced_keyword,
)
from nodescaler.events.evaluation_record import EvaluationRecord
from nodescaler.events.termination_policy import parse_termination_request
from pydantic import ValidationError

EVENTS = Path(__file__).parents[2] / "events"


def sample(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


def test_every_sample_has_a_parser_test() -> None:
    assert sorted(p.name for p in EVENTS.glob("*.json")) == [
        "alarm-state-change.json",
        "evaluate-batch.json",
        "instance-refresh-request.json",
        "launch-unsuccessful.json",
        "lifecycle-terminate.json",
        "rebalance-recommendation.json",
        "schedule-tick.json",
        "spot-interruption.json",
        "termination-request.json",
    ]


def test_the_termination_policy_sample_asks_for_one_of_two_instances() -> None:
    request = parse_termination_request(sample("termination-request.json"))
    assert (request.group, request.wanted, request.cause, request.has_more) == (
        "web",
        1,
        "SCALE_IN",
        False,
    )
    assert request.offered == ("i-0b1c2d3e4f5a6b7c8", "i-0a9b8c7d6e5f4a3b2")


def test_the_instance_refresh_sample_asks_for_two_of_three_instances_in_two_zones() -> None:
    # Auto Scaling's payload for an instance refresh: https://docs.aws.amazon.com/autoscaling/
    # ec2/userguide/lambda-custom-termination-policy.html ("Input data")
    request = parse_termination_request(sample("instance-refresh-request.json"))
    assert (request.group, request.wanted, request.cause) == ("web", 2, "INSTANCE_REFRESH")
    assert [c.zone for c in request.capacity] == ["eu-west-1a", "eu-west-1b"]
    assert len(request.offered) == 3


def test_the_schedule_sample_is_a_tick() -> None:
    tick = parse_dispatch_event(sample("schedule-tick.json"))
    assert isinstance(tick, ScheduledEvent)
    assert (tick.cause, tick.time.isoformat()) == ("tick", "2026-11-23T09:00:00+00:00")


def test_the_alarm_sample_names_its_alarm_and_transition() -> None:
    alarm = parse_dispatch_event(sample("alarm-state-change.json"))
    assert isinstance(alarm, AlarmStateChangeEvent)
    assert alarm.detail.alarm_name == "web-requests-high"
    assert alarm.cause == "alarm web-requests-high: OK → ALARM"


def test_the_launch_failure_sample_names_its_group_activity_and_reason() -> None:
    failure = parse_dispatch_event(sample("launch-unsuccessful.json"))
    assert isinstance(failure, LaunchUnsuccessfulEvent)
    assert (failure.detail.group, failure.detail.activity_id) == (
        "spot-ng",
        "5b0ad9a1-5e6f-4d0c-8f57-2a8f3c1e9b10",
    )
    assert failure.reason.startswith("We currently do not have sufficient m5.large capacity")


def test_a_launch_failure_without_its_group_is_refused_naming_the_field() -> None:
    broken = sample("launch-unsuccessful.json")
    del broken["detail"]["AutoScalingGroupName"]
    with pytest.raises(MalformedEventError, match=r"detail\.AutoScalingGroupName: Field required"):
        parse_dispatch_event(broken)


def test_the_sqs_sample_carries_one_evaluation_request_per_record() -> None:
    records = [EvaluationRecord.model_validate(r) for r in sample("evaluate-batch.json")["Records"]]
    assert [(r.body.node_group, r.attributes.MessageGroupId) for r in records] == [
        ("gpu-training", "gpu-training"),
        ("web", "web"),
    ]


def _tick(**changes: Any) -> dict[str, Any]:
    return sample("schedule-tick.json") | changes


def _parsed_tick(**changes: Any) -> ScheduledEvent:
    tick = parse_dispatch_event(_tick(**changes))
    assert isinstance(tick, ScheduledEvent)
    return tick


def test_given_ticks_with_one_id_each_time_is_its_own_tick_and_a_retry_is_the_same_one() -> None:
    # Given the id Scheduler sends (an execution id: new on each attempt) or any other,
    first = _parsed_tick(id="same", time="2026-11-23T09:00:00Z")
    retried = _parsed_tick(id="another-attempt", time="2026-11-23T09:00:00Z")
    next_minute = _parsed_tick(id="same", time="2026-11-23T09:01:00Z")
    # when their identities are taken, then they come from the scheduled time: two ticks
    # never share one (and be skipped as seen), a retry of one tick is recognised.
    assert first.identity == retried.identity == "tick-2026-11-23T09:00:00Z"
    assert next_minute.identity == "tick-2026-11-23T09:01:00Z"
    # the same instant, written in another zone, is the same tick
    assert _parsed_tick(time="2026-11-23T10:00:00+01:00").identity == first.identity


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        ({"id": "tick-<aws.scheduler.scheduled-time>"}, "id"),
        (
            {"id": "<aws.scheduler.execution-id>", "time": "<aws.scheduler.scheduled-time>"},
            "id, time",
        ),
    ],
)
def test_a_tick_holding_an_unreplaced_scheduler_keyword_is_refused_naming_the_fields(
    changes: dict[str, str], fields: str
) -> None:
    refusal = unreplaced_keyword(_tick(**changes))
    assert refusal == (
        f"tick {changes['id']}: {fields}: an EventBridge Scheduler context attribute "
        "(<aws.scheduler.…>) left unreplaced: refused, the next tick comes in its place"
    )
    assert unreplaced_keyword(sample("schedule-tick.json")) is None


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            _tick(**{"detail-type": "EC2 Instance State-change Notification"}),
            "does not match any of the expected tags",
        ),
        (_tick(source="aws.ec2"), "Scheduled Event.source: Input should be 'aws.events'"),
        (_tick(time="yesterday"), "Scheduled Event.time: Input should be a valid datetime"),
        ("not an event", "(event): Input should be a valid dictionary"),
        (
            sample("alarm-state-change.json")
            | {"detail": {"state": {"value": "ALARM", "timestamp": "2026-11-23T09:04:40Z"}}},
            "CloudWatch Alarm State Change.detail.alarmName: Field required",
        ),
        (
            sample("alarm-state-change.json")
            | {
                "detail": {
                    "alarmName": "web-requests-high",
                    "state": {"value": "BROKEN", "timestamp": "2026-11-23T09:04:40Z"},
                }
            },
            "detail.state.value: Input should be 'OK', 'ALARM' or 'INSUFFICIENT_DATA'",
        ),
    ],
)
def test_a_malformed_eventbridge_event_is_refused_naming_the_event_and_field(
    event: Any, message: str
) -> None:
    with pytest.raises(MalformedEventError) as caught:
        parse_dispatch_event(event)
    assert message in str(caught.value)
    if isinstance(event, dict):
        assert str(caught.value).startswith(f"event {event['id']} is not a scheduled tick")


def test_an_evaluation_message_nested_past_the_parsers_recursion_is_malformed() -> None:
    # Given a body that makes the JSON parser recurse past its limit (a RecursionError,
    # which is no ValueError: it was retried three times, holding its group's FIFO stream)
    record = sample("evaluate-batch.json")["Records"][0] | {"body": "[" * 5_000}
    # Then it is refused as malformed, as any body that is not JSON: dead-lettered at once
    with pytest.raises(ValidationError) as caught:
        EvaluationRecord.model_validate(record)
    assert "Invalid JSON: maximum recursion depth exceeded" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "body\n  Invalid JSON"),
        (
            '{"node_group": "g", "node_group": "h", "event_id": "e", "cause": "tick", "requested_at": "2026-11-23T09:00:00Z"}',
            "body\n  Invalid JSON: key 'node_group' given twice",
        ),
        (
            '{"node_group": "", "event_id": "e", "cause": "tick", "requested_at": "2026-11-23T09:00:00Z"}',
            "node_group\n  String should have at least 1 character",
        ),
        (
            '{"node_group": "g", "event_id": "e", "cause": "tick", "requested_at": "2026-11-23T09:00:00"}',
            "requested_at\n  Input should have timezone info",
        ),
        (
            '{"node_group": "g", "event_id": "e", "cause": "tick", "requested_at": "2026-11-23T09:00:00Z", "extra": 1}',
            "extra\n  Extra inputs are not permitted",
        ),
    ],
)
def test_a_malformed_evaluation_message_is_refused_naming_the_field(
    body: str, message: str
) -> None:
    record = sample("evaluate-batch.json")["Records"][0] | {"body": body}
    with pytest.raises(ValidationError) as caught:
        EvaluationRecord.model_validate(record)
    assert message in str(caught.value)
