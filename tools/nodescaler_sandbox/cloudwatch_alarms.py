"""CloudWatch's alarm evaluation, which moto lacks: each alarm moto holds evaluated on its
latest datapoints when its evaluation is due, as CloudWatch evaluates it; a change of
state set on the alarm and announced as EventBridge's `CloudWatch Alarm State Change`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any


def changes(
    cloudwatch: Any, now: datetime, states: dict[str, str], *, region: str
) -> Iterator[tuple[dict[str, Any], str]]:
    """The alarms whose evaluation is due now, on their latest datapoints, as
    CloudWatch evaluates them: an alarm of a period of a minute or more every minute,
    on the minute; one of 10 or 30 seconds every 10 seconds ("Alarm evaluation",
    https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html).
    Called at any step, an alarm not due is left as it is. Each change of state (from
    `states`, each alarm's last, updated) set on the alarm, then yielded as the `CloudWatch
    Alarm State Change` event's detail and the alarm's ARN, before the next is evaluated."""
    if not any(_evaluated_at(period, now) for period in _alarm_periods(region)):
        return  # none due at this step: no call (most steps of a world in seconds)
    for alarm in cloudwatch.describe_alarms()["MetricAlarms"]:
        if not _evaluated_at(alarm["Period"], now):
            continue
        state, values = _state_of(cloudwatch, alarm, now)
        previous = states.get(alarm["AlarmName"], "INSUFFICIENT_DATA")
        if state == previous:
            continue
        states[alarm["AlarmName"]] = state
        threshold = alarm["Threshold"]
        reason = f"Threshold Crossed: datapoints {values} against the threshold ({threshold})."
        cloudwatch.set_alarm_state(
            AlarmName=alarm["AlarmName"], StateValue=state, StateReason=reason
        )
        detail = {
            "alarmName": alarm["AlarmName"],
            "state": {"value": state, "reason": reason, "timestamp": now.isoformat()},
            "previousState": {"value": previous, "timestamp": now.isoformat()},
            "configuration": {"description": alarm.get("AlarmDescription", "")},
        }
        yield detail, alarm["AlarmArn"]


def _state_of(cloudwatch: Any, alarm: dict[str, Any], now: datetime) -> tuple[str, list[Any]]:
    """The alarm's state on its latest `EvaluationPeriods` datapoints, and their values:
    too few is INSUFFICIENT_DATA, every one breaching is ALARM, else OK."""
    periods = alarm["EvaluationPeriods"]
    points = cloudwatch.get_metric_statistics(
        Namespace=alarm["Namespace"],
        MetricName=alarm["MetricName"],
        Dimensions=alarm["Dimensions"],
        StartTime=now - timedelta(seconds=alarm["Period"] * periods),
        EndTime=now + timedelta(seconds=1),
        Period=alarm["Period"],
        Statistics=[alarm["Statistic"]],
    )["Datapoints"]
    latest = sorted(points, key=lambda p: p["Timestamp"])[-periods:]
    values = [p[alarm["Statistic"]] for p in latest]
    if len(values) < periods:
        return "INSUFFICIENT_DATA", values
    if all(_breaches(v, alarm["ComparisonOperator"], alarm["Threshold"]) for v in values):
        return "ALARM", values
    return "OK", values


def _evaluated_at(period: int, now: datetime) -> bool:
    """Whether CloudWatch evaluates an alarm of this period now: on the minute for a
    period of a minute or more, every 10 seconds for a shorter one."""
    return int(now.timestamp()) % (60 if period >= 60 else 10) == 0


def _alarm_periods(region: str) -> list[int]:
    """The periods of the alarms moto holds, read from its store (no request)."""
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.core.models import DEFAULT_ACCOUNT_ID

    return [int(a.period) for a in cloudwatch_backends[DEFAULT_ACCOUNT_ID][region].alarms.values()]


def _breaches(value: float, comparison: str, threshold: float) -> bool:
    return {
        "GreaterThanThreshold": value > threshold,
        "GreaterThanOrEqualToThreshold": value >= threshold,
        "LessThanThreshold": value < threshold,
        "LessThanOrEqualToThreshold": value <= threshold,
    }[comparison]
