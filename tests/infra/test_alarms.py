"""What operators are told: the alarms, their thresholds and destinations, read from the
synthesized template (infra/alarms.py)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match, Template

from tests.infra.stack_template import alarm_on, resources
from tests.infra.test_stack import synth, synth_stack


def test_the_alarms_cover_errors_throttles_dead_letters_latency_shortfall_and_drains(
    template: Template,
) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    # errors and throttles of four functions, three dead-letter queues, ticks stopped, groups
    # unserved, evaluation errors, latency, shortfall, backoff, drain failures, drain
    # timeouts, lifecycle actions expired, stored policies unread, drain hooks unread,
    # scaling events not put; the fast path's errors (its own module)
    assert len(alarms) == 28
    for persistent in ("StoredPolicyReadFailures", "DrainHooksUnread"):
        unread = alarm_on(template, persistent)
        assert (unread["EvaluationPeriods"], unread["Period"]) == (3, 300)  # not a blip
    assert alarm_on(template, "ScalingEventsNotPut")["Threshold"] == 1
    shortfall = alarm_on(template, "ShortfallNodes")
    assert (shortfall["EvaluationPeriods"], shortfall["DatapointsToAlarm"]) == (15, 15)
    # every alarm says what happened and what to do about it
    assert all(len(a["Properties"]["AlarmDescription"]) > 40 for a in alarms)
    assert all("AlarmActions" not in a["Properties"] for a in alarms)  # no topic configured


@pytest.mark.parametrize(
    "metric",
    ["MetricSourcesRefused", "UnconfirmedEvents", "TerminationErrors", "TerminationsForced"],
)
def test_a_refused_source_or_event_and_a_forced_or_failed_termination_alarm_at_once(
    template: Template, metric: str
) -> None:
    alarm = alarm_on(template, metric)
    assert (alarm["Statistic"], alarm["Threshold"], alarm["EvaluationPeriods"]) == ("Sum", 1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "nodescaler-my-cluster"}]


def test_a_group_backed_off_for_most_of_half_an_hour_alarms(template: Template) -> None:
    backoff = alarm_on(template, "BackedOff")
    assert backoff["Dimensions"] == [
        {"Name": "service", "Value": "nodescaler-my-cluster"}
    ]  # any group
    assert (backoff["Statistic"], backoff["Period"], backoff["Threshold"]) == ("Maximum", 60, 1)
    assert (backoff["EvaluationPeriods"], backoff["DatapointsToAlarm"]) == (30, 24)


def test_ticks_that_stop_arriving_alarm_after_three_periods_without_a_dispatch(
    template: Template,
) -> None:
    """Given the schedule stops (disabled, deleted, its role refused), no dispatch runs and
    Lambda sends no Invocations datapoint: missing data must breach, or it never alarms."""
    ticks = alarm_on(template, "Invocations")
    assert (ticks["Namespace"], ticks["Statistic"], ticks["Period"]) == ("AWS/Lambda", "Sum", 60)
    assert ticks["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": ticks["Dimensions"][0]["Value"]["Ref"]}}
    ]
    assert ticks["Dimensions"][0]["Value"]["Ref"].startswith("NodescalerDispatchFunction")
    assert (ticks["ComparisonOperator"], ticks["Threshold"]) == ("LessThanThreshold", 1)
    assert (ticks["EvaluationPeriods"], ticks["DatapointsToAlarm"]) == (3, 3)
    assert ticks["TreatMissingData"] == "breaching"


def test_a_group_rejected_or_blind_for_15_minutes_alarms(template: Template) -> None:
    unserved = alarm_on(template, "NodeGroupUnserved")
    assert unserved["Dimensions"] == [{"Name": "service", "Value": "nodescaler-my-cluster"}]
    assert (unserved["Statistic"], unserved["Period"], unserved["Threshold"]) == ("Maximum", 60, 1)
    assert unserved["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert (unserved["EvaluationPeriods"], unserved["DatapointsToAlarm"]) == (15, 15)
    assert unserved["TreatMissingData"] == "notBreaching"  # no evaluation: the ticks alarm's


@pytest.mark.parametrize("metric", ["DrainFailures", "DrainTimeouts", "LifecycleActionsExpired"])
def test_a_failed_or_late_drain_alarms_at_once(template: Template, metric: str) -> None:
    alarm = alarm_on(template, metric)
    assert (alarm["Statistic"], alarm["Threshold"], alarm["EvaluationPeriods"]) == ("Sum", 1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_per_evaluation_alarms_look_at_one_tick_at_a_time() -> None:
    # Groups report once a tick: with 5-minute ticks, 1-minute periods would mostly be empty.
    template = synth(tickMinutes=5)
    shortfall = alarm_on(template, "ShortfallNodes")
    assert (shortfall["Period"], shortfall["EvaluationPeriods"]) == (300, 3)
    backoff = alarm_on(template, "BackedOff")
    assert (backoff["Period"], backoff["EvaluationPeriods"], backoff["DatapointsToAlarm"]) == (
        300,
        6,
        5,
    )
    assert (
        alarm_on(template, "Invocations")["Period"],
        alarm_on(template, "Invocations")["EvaluationPeriods"],
    ) == (300, 3)
    unserved = alarm_on(template, "NodeGroupUnserved")
    assert (unserved["Period"], unserved["EvaluationPeriods"]) == (300, 3)


def test_with_an_email_the_alarms_notify_an_encrypted_ssl_only_topic() -> None:
    template = synth(alarms={"email": "ops@example.com"})
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
        assert len(alarm["Properties"]["AlarmActions"]) == 1
        assert len(alarm["Properties"]["OKActions"]) == 1


def test_with_a_topic_arn_the_alarms_notify_that_topic() -> None:
    arn = "arn:aws:sns:eu-west-1:123456789012:ops"
    template = synth(alarms={"topicArn": arn})
    for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [arn]


def test_alarms_with_no_destination_warn_once_and_with_one_do_not() -> None:
    def warnings(**overrides: Any) -> list[str]:
        found = Annotations.from_stack(synth_stack(**overrides)).find_warning(
            "*", Match.string_like_regexp(".*alarms have no destination.*")
        )
        return [f.id for f in found]

    assert warnings() == ["/Test/Nodescaler/Alarms"]
    assert warnings(alarms={"email": "ops@example.com"}) == []
    assert warnings(alarms={"topicArn": "arn:aws:sns:us-east-1:123456789012:pager"}) == []
