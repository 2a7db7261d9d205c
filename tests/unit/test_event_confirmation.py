"""Whether AWS's own record bears an event out, as rules: a lifecycle action only for an
instance its hook holds in the event's group, a Spot warning only for a Spot Instance, a
launch failure only for a launch activity that failed. Anyone allowed to invoke the drain
or dispatch function could send any of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.groups.node_group import ScalingActivity, unconfirmed_launch_failure
from nodescaler.domain.scale_down.drain import (
    DrainCause,
    LifecycleAction,
    Membership,
    SpotWarning,
    unconfirmed_action,
    unconfirmed_warning,
)

ACTION = LifecycleAction("web", "nodescaler-drain", "i-0a", "6f1a2c3e-0000-4000-8000-00000000a001")
EVENT = "lifecycle action for instance i-0a in node group web"


# A terminate hook holds its instance in Terminating:Wait (a warm pool's in
# Warmed:Terminating:Wait) until its action is completed; then Terminating:Proceed:
# https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html
# https://docs.aws.amazon.com/autoscaling/ec2/userguide/warm-pool-instance-lifecycle.html
@pytest.mark.parametrize(
    ("member", "why"),
    [
        (Membership("web", "Terminating:Wait"), None),
        (Membership("web", "Warmed:Terminating:Wait"), None),
        (Membership("web", "InService"), "the instance is InService, not held by a terminate hook"),
        (
            Membership("web", "Terminating:Proceed"),
            "the instance is Terminating:Proceed, not held by a terminate hook",
        ),
        (Membership("api", "Terminating:Wait"), "the instance is in node group api"),
        (None, "Auto Scaling has the instance in no group"),
    ],
)
def test_a_lifecycle_action_is_borne_out_only_while_its_hook_holds_the_instance_there(
    member: Membership | None, why: str | None
) -> None:
    assert unconfirmed_action(ACTION, member) == (why and f"{EVENT}: {why}")


# EC2 sends interruption notices and rebalance recommendations for Spot Instances only, and
# DescribeInstances gives a Spot Instance's InstanceLifecycle as "spot":
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
@pytest.mark.parametrize(
    ("cause", "market", "why"),
    [
        (DrainCause.SPOT_INTERRUPTION, "spot", None),
        (DrainCause.REBALANCE_RECOMMENDATION, "spot", None),
        (DrainCause.SPOT_INTERRUPTION, "on-demand", "its market is on-demand, not spot"),
        (DrainCause.REBALANCE_RECOMMENDATION, "scheduled", "its market is scheduled, not spot"),
        (DrainCause.SPOT_INTERRUPTION, None, "EC2 has no such instance"),
    ],
)
def test_a_spot_warning_is_borne_out_only_for_a_spot_instance(
    cause: DrainCause, market: str | None, why: str | None
) -> None:
    warning = SpotWarning("i-0a", cause, "event-1", ISSUED)
    event = f"{cause.value.replace('-', ' ')} for instance i-0a in node group web"
    now = ISSUED + timedelta(seconds=3)
    assert unconfirmed_warning(warning, "web", market, now) == (why and f"{event}: {why}")


ISSUED = datetime(2026, 11, 23, 9, tzinfo=UTC)


# EC2 interrupts two minutes after its warning
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html);
# a rebalance recommendation comes before that
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html).
# Five minutes (the drain target's maximum event age) is as old as a current one gets.
@pytest.mark.parametrize(
    ("age", "why"),
    [
        (timedelta(0), None),
        (timedelta(minutes=5), None),
        (
            timedelta(minutes=5, seconds=1),
            "issued at 2026-11-23T09:00:00Z, 301 s ago, longer than the 300 s a current one "
            "can be: a replay",
        ),
    ],
)
@pytest.mark.parametrize(
    "cause", [DrainCause.SPOT_INTERRUPTION, DrainCause.REBALANCE_RECOMMENDATION]
)
def test_a_spot_warning_is_borne_out_only_while_it_is_current(
    cause: DrainCause, age: timedelta, why: str | None
) -> None:
    warning = SpotWarning("i-0a", cause, "event-1", ISSUED)
    event = f"{cause.value.replace('-', ' ')} for instance i-0a in node group web"
    assert unconfirmed_warning(warning, "web", "spot", ISSUED + age) == (why and f"{event}: {why}")


# A failed launch is StatusCode Failed or Cancelled:
# https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeScalingActivities.html
@pytest.mark.parametrize(
    ("activity", "why"),
    [
        (ScalingActivity("a-1", "Failed", launch=True), None),
        (ScalingActivity("a-1", "Cancelled", launch=True), None),
        (ScalingActivity("a-1", "Successful", launch=True), "the launch is Successful, not failed"),
        (ScalingActivity("a-1", "InProgress", launch=True), "the launch is InProgress, not failed"),
        (ScalingActivity("a-1", "Failed", launch=False), "the activity launched no instances"),
        (None, "the group has no such scaling activity"),
    ],
)
def test_a_launch_failure_is_borne_out_only_by_a_failed_launch_activity(
    activity: ScalingActivity | None, why: str | None
) -> None:
    event = "launch failure a-1 of node group spot-ng"
    assert unconfirmed_launch_failure("spot-ng", "a-1", activity) == (why and f"{event}: {why}")


# Auto Scaling keeps six weeks of activities: an event about a failure older than an hour
# replays one the group has moved past, and is refused by the function's clock.
@pytest.mark.parametrize(
    ("minutes_ago", "why"),
    [
        (59, None),
        (
            61,
            "the launch failed at 2026-11-23 07:59Z, over 60 minutes ago: a stale or replayed event",
        ),
    ],
)
def test_a_launch_failure_is_borne_out_only_within_an_hour_of_its_launch(
    minutes_ago: int, why: str | None
) -> None:
    now = datetime(2026, 11, 23, 9, tzinfo=UTC)
    started = now - timedelta(minutes=minutes_ago)
    activity = ScalingActivity("a-1", "Failed", launch=True, started=started)
    event = "launch failure a-1 of node group spot-ng"
    found = unconfirmed_launch_failure("spot-ng", "a-1", activity, now)
    assert found == (why and f"{event}: {why}")
