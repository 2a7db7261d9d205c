"""What the sandbox supplies for moto, as AWS does it: a held lifecycle action answers
heartbeats and one completion, is let go when its heartbeat timeout passes, and holds its
instance in Terminating:Wait meanwhile; scaling activities are listed; a group whose launch
template asks for Spot launches Spot Instances."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodescaler_sandbox.moto_gaps import (
    LifecycleActionRecorder,
    ScalingActivities,
    launched_as_spot,
)

from tests.aws import REGION, aws, calls, client, make_asg, make_spot_asg  # noqa: F401

START = datetime.fromisoformat("2026-11-23T09:00:00+00:00")
TOKEN = "6f1a2c3e-0000-4000-8000-00000000a001"  # Auto Scaling's tokens are UUIDs
OTHER = "6f1a2c3e-0000-4000-8000-00000000b002"
ACTION = {
    "AutoScalingGroupName": "web",
    "LifecycleHookName": "drain",
    "InstanceId": "i-0a",
    "LifecycleActionToken": TOKEN,
}


def test_a_heartbeat_moves_the_timeout_on_and_an_overdue_action_is_let_go() -> None:
    now = START
    recorder = LifecycleActionRecorder(lambda: now, heartbeat_timeout=timedelta(minutes=5))
    autoscaling = recorder.watch(client("autoscaling"))
    recorder.hold("web", "drain", "i-0a", TOKEN)

    now = START + timedelta(minutes=4)
    autoscaling.record_lifecycle_action_heartbeat(**ACTION)  # due at 9:09 now
    recorder.expire_overdue(START + timedelta(minutes=8))
    assert recorder.held == {("web", "drain", "i-0a"): TOKEN}

    recorder.expire_overdue(START + timedelta(minutes=9))
    assert recorder.held == {}
    with pytest.raises(ClientError, match="No active Lifecycle Action found with instance ID"):
        autoscaling.complete_lifecycle_action(**ACTION, LifecycleActionResult="CONTINUE")


def test_a_completed_action_is_not_let_go_again_and_a_wrong_token_keeps_nothing_alive() -> None:
    now = START
    recorder = LifecycleActionRecorder(lambda: now, heartbeat_timeout=timedelta(minutes=5))
    autoscaling = recorder.watch(client("autoscaling"))
    recorder.hold("web", "drain", "i-0a", TOKEN)

    now = START + timedelta(minutes=4)
    with pytest.raises(ClientError):
        autoscaling.record_lifecycle_action_heartbeat(**ACTION | {"LifecycleActionToken": OTHER})
    recorder.expire_overdue(START + timedelta(minutes=5))  # still due at 9:05
    assert recorder.held == {}

    recorder.hold("web", "drain", "i-0a", TOKEN)
    autoscaling.complete_lifecycle_action(**ACTION, LifecycleActionResult="CONTINUE")
    recorder.expire_overdue(START + timedelta(hours=1))
    assert [c.accepted for c in recorder.calls] == [False, True]


# --- DescribeAutoScalingInstances while a hook holds an instance -------------------------
# A terminate hook holds its instance in Terminating:Wait until the action is completed or
# times out: https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html


def states(autoscaling: Any, *instance_ids: str) -> dict[str, tuple[str, str]]:
    found = autoscaling.describe_auto_scaling_instances(InstanceIds=list(instance_ids))
    return {
        i["InstanceId"]: (i["AutoScalingGroupName"], i["LifecycleState"])
        for i in found["AutoScalingInstances"]
    }


def test_an_instance_a_hook_holds_is_terminating_wait_in_its_group_until_completed() -> None:
    # Given web's two instances, one of which its group is terminating (moto drops it)
    recorder = LifecycleActionRecorder()
    autoscaling = recorder.watch(client("autoscaling"))
    make_asg("web", desired=2)
    leaving, staying = sorted(states(autoscaling))
    autoscaling.terminate_instance_in_auto_scaling_group(
        InstanceId=leaving, ShouldDecrementDesiredCapacity=True
    )
    assert states(autoscaling, leaving, staying) == {staying: ("web", "InService")}

    # When the hook holds it, it is in Terminating:Wait, with its zone
    recorder.hold("web", "drain", leaving, TOKEN)
    assert states(autoscaling, leaving, staying) == {
        leaving: ("web", "Terminating:Wait"),
        staying: ("web", "InService"),
    }
    assert states(autoscaling, staying) == {staying: ("web", "InService")}  # only those asked
    (held,) = autoscaling.describe_auto_scaling_instances(InstanceIds=[leaving])[
        "AutoScalingInstances"
    ]
    assert held["AvailabilityZone"] == "eu-west-1a"
    # and its group lists it among its instances, as Auto Scaling does until it terminates
    # (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_Instance.html:
    # LifecycleState Terminating:Wait)
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["web"])[
        "AutoScalingGroups"
    ]
    listed = {i["InstanceId"]: i["LifecycleState"] for i in group["Instances"]}
    assert listed == {leaving: "Terminating:Wait", staying: "InService"}

    # Then, its action completed, the group has let it go
    autoscaling.complete_lifecycle_action(
        AutoScalingGroupName="web",
        LifecycleHookName="drain",
        InstanceId=leaving,
        LifecycleActionToken=TOKEN,
        LifecycleActionResult="CONTINUE",
    )
    assert states(autoscaling, leaving) == {}
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["web"])[
        "AutoScalingGroups"
    ]
    assert [i["InstanceId"] for i in group["Instances"]] == [staying]


# --- DescribeScalingActivities ---------------------------------------------------------
# https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeScalingActivities.html:
# newest first; ActivityIds keeps the ones asked for, unknown ids ignored with no error; a
# group name keeps that group's. A failed launch is StatusCode Failed (or Cancelled).


def test_scaling_activities_are_listed_newest_first_by_group_and_by_id() -> None:
    activities = ScalingActivities()
    autoscaling = activities.watch(client("autoscaling"))
    first = activities.launch_failed("web", START, "no capacity")
    second = activities.launch_failed("web", START + timedelta(minutes=1), "", status="Cancelled")
    activities.launch_failed("api", START, "no capacity", "api-1")

    def listed(**request: Any) -> list[tuple[str, str]]:
        found = autoscaling.describe_scaling_activities(**request)["Activities"]
        return [(a["ActivityId"], a["StatusCode"]) for a in found]

    assert listed(AutoScalingGroupName="web") == [(second, "Cancelled"), (first, "Failed")]
    assert listed(AutoScalingGroupName="web", ActivityIds=[first, "unknown"]) == [(first, "Failed")]
    assert listed(AutoScalingGroupName="web", ActivityIds=["api-1"]) == []
    assert listed(ActivityIds=["api-1"]) == [("api-1", "Failed")]


# --- Spot Instances --------------------------------------------------------------------
# A Spot Instance's DescribeInstances has "InstanceLifecycle": "spot"; an on-demand one has
# none: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html


def markets(group: str) -> dict[str, str]:
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    ids = [i["InstanceId"] for i in described["AutoScalingGroups"][0]["Instances"]]
    reservations = client("ec2").describe_instances(InstanceIds=ids)["Reservations"]
    return {
        i["InstanceId"]: i.get("InstanceLifecycle", "on-demand")
        for r in reservations
        for i in r["Instances"]
    }


def test_a_group_whose_launch_template_asks_for_spot_launches_spot_instances() -> None:
    spot = make_spot_asg("spot-ng", desired=2)
    make_asg("on-demand-ng", desired=1)

    assert markets("spot-ng") == dict.fromkeys(spot, "spot")
    assert launched_as_spot(REGION, "on-demand-ng") == []  # a launch configuration: on demand
    assert set(markets("on-demand-ng").values()) == {"on-demand"}
