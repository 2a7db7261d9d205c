"""Backoff after a failed scale-up, and what it, and scale-in protection, do to a decision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.scale_up.backoff import (
    BackoffRules,
    Provisioning,
    after_failure,
    provision_check,
)
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.group_size import GroupSize

from tests.builders import T0, minutes, policy, queue_metric, readings, run

RULES = BackoffRules()
IMMEDIATE_SCALE_IN = {
    "scaleDown": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
    }
}


def test_the_first_failure_backs_off_5_minutes_each_later_one_doubles_up_to_30() -> None:
    backoff, lengths, now = None, [], T0
    for _ in range(5):
        backoff = after_failure(backoff, now, "no capacity", RULES)
        lengths.append(backoff.seconds // 60)
        now = backoff.until + minutes(1)  # fails again a minute after the backoff ends
    assert lengths == [5, 10, 20, 30, 30]


def test_three_hours_without_a_failure_start_the_backoff_afresh() -> None:
    first = after_failure(None, T0, "no capacity", RULES)
    second = after_failure(first, T0 + minutes(10), "no capacity", RULES)
    assert second.seconds == 600
    again = after_failure(second, T0 + minutes(10) + timedelta(hours=3), "no capacity", RULES)
    assert again.seconds == 300


def test_failures_during_a_backoff_are_one_incident_and_do_not_double_it() -> None:
    backoff = after_failure(None, T0, "first", RULES)
    during = after_failure(backoff, T0 + minutes(1), "retried launch failed", RULES)
    assert (during.until, during.seconds) == (backoff.until, 300)
    assert (during.last_failure, during.reason) == (T0 + minutes(1), "retried launch failed")


def test_backoff_rules_are_configurable() -> None:
    rules = BackoffRules(initial=timedelta(minutes=1), maximum=timedelta(minutes=3))
    first = after_failure(None, T0, "x", rules)
    second = after_failure(first, first.until, "x", rules)
    third = after_failure(second, second.until, "x", rules)
    assert [first.seconds, second.seconds, third.seconds] == [60, 120, 180]


@pytest.mark.parametrize(
    ("desired", "in_service", "waited", "in_flight", "failed"),
    [
        (10, 10, 20, False, False),  # all in service: done
        (6, 4, 20, False, False),  # sized below the target since: done
        (10, 7, 14, True, False),  # still within the provision time
        (10, 7, 16, False, True),  # overdue: a failure, and the scale-up ends
    ],
)
def test_a_scale_up_is_watched_until_in_service_or_overdue(
    desired: int, in_service: int, waited: int, in_flight: bool, failed: bool
) -> None:
    provisioning = Provisioning(since=T0, target=10)
    still, failure = provision_check(
        provisioning, desired=desired, in_service=in_service, now=T0 + minutes(waited), rules=RULES
    )
    assert (still is not None, failure is not None) == (in_flight, failed)
    if failure:
        assert failure == (
            "3 of the instances asked for at 12:00:00Z were not ready after 15 minutes"
        )


# --- the decision ------------------------------------------------------------------------


def test_a_backed_off_group_does_not_grow_and_stops_asking_for_what_it_could_not_launch() -> None:
    backoff = after_failure(None, T0, "We currently do not have sufficient capacity", RULES)
    # desired 8 (asked before the failure), 5 instances launched; 60 jobs want 15
    decision = run(
        policy(queue_metric("jobs", per_node=4)),
        8,
        readings(jobs=60),
        size=GroupSize(current=8, ready=5, launched=5),
        backoff=backoff,
    ).decision
    assert (decision.desired, decision.limited_by, decision.backoff) == (
        5,
        (Limit.BACKOFF,),
        backoff,
    )
    assert decision.reason.endswith(
        "backed off until 12:05:00Z after a failed scale-up: We currently do not have "
        "sufficient capacity"
    )


def test_an_expired_backoff_no_longer_holds_a_scale_up() -> None:
    backoff = after_failure(None, T0, "no capacity", RULES)
    decision = run(
        policy(queue_metric("jobs", per_node=4)),
        5,
        readings(T0 + minutes(6), jobs=60),
        now=T0 + minutes(6),
        size=GroupSize(current=5, launched=5),
        backoff=backoff,
    ).decision
    assert (decision.desired, decision.backoff) == (15, None)


def test_a_backed_off_group_below_its_minimum_still_goes_to_its_minimum() -> None:
    backoff = after_failure(None, T0, "no capacity", RULES)
    decision = run(
        policy(queue_metric("jobs", per_node=4), min_replicas=3),
        0,
        readings(jobs=0),
        size=GroupSize(current=0, launched=0),
        backoff=backoff,
    ).decision
    assert (decision.desired, decision.limited_by) == (3, (Limit.MIN,))


def test_protected_instances_hold_a_scale_in_and_the_decision_says_so() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), behavior=IMMEDIATE_SCALE_IN)
    decision = run(
        the_policy, 10, readings(jobs=8), size=GroupSize(current=10, protected=7)
    ).decision
    assert (decision.desired, decision.limited_by) == (7, (Limit.PROTECTED,))
    assert decision.reason.endswith("7 instances are protected from scale-in")


def test_the_minimum_holding_a_scale_in_says_so() -> None:
    the_policy = policy(
        queue_metric("jobs", per_node=4), min_replicas=4, behavior=IMMEDIATE_SCALE_IN
    )
    decision = run(the_policy, 6, readings(jobs=0)).decision
    assert (decision.desired, decision.limited_by) == (4, (Limit.MIN,))
    assert "at the minimum 4" in decision.reason


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_a_scale_up_exactly_at_its_provision_time_is_not_yet_overdue() -> None:
    rules = BackoffRules()
    flight = Provisioning(since=T, target=5)
    at_limit = T + rules.max_provision_time
    assert provision_check(flight, desired=5, in_service=3, now=at_limit, rules=rules) == (
        flight,
        None,
    )
    late = at_limit + timedelta(seconds=1)
    assert provision_check(flight, desired=5, in_service=3, now=late, rules=rules)[1] == (
        "2 of the instances asked for at 12:00:00Z were not ready after 15 minutes"
    )
