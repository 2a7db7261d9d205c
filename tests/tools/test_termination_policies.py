"""Which instances a scale-in takes in the sandbox, as Auto Scaling picks them: the custom
termination policy obeyed (and asked again when it gives none or fails), else the default
policy; never a protected instance. moto alone takes the oldest unprotected instance."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from nodescaler_sandbox.moto_gaps import TerminationPolicies
from nodescaler_sandbox.provision import create_group, group_sizes, launch_configuration

from tests.aws import REGION, aws, client  # noqa: F401  (moto for every test here)

START = datetime.fromisoformat("2026-11-23T09:00:00+00:00")


class Clock:
    def __init__(self) -> None:
        self.at = START + timedelta(minutes=90)

    def now(self) -> datetime:
        return self.at


def instances() -> list[str]:
    return sorted(group_sizes(REGION)["web"][1])


def group_of_three(policies: TerminationPolicies) -> list[str]:
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.large")
    create_group(
        autoscaling, "web", region=REGION, tags={}, desired=3, launch_configuration="web-lc"
    )
    policies.watch(autoscaling)
    return instances()


def scale_to(desired: int) -> None:
    client("autoscaling").set_desired_capacity(AutoScalingGroupName="web", DesiredCapacity=desired)


def test_the_default_policy_takes_the_instance_closest_to_its_next_billing_hour() -> None:
    clock = Clock()
    launched: dict[str, datetime] = {}
    policies = TerminationPolicies(REGION, launched.get, clock.now)
    first, second, third = group_of_three(policies)
    # at 10:30: launched 09:00 (30 min to its hour), 09:10 (40 min), 09:45 (15 min)
    launched.update(
        {first: START, second: START + timedelta(minutes=10), third: START + timedelta(minutes=45)}
    )
    scale_to(2)
    assert instances() == sorted([first, second])
    scale_to(1)
    assert instances() == [second]


def test_the_custom_policy_chooses_and_a_protected_instance_is_never_taken() -> None:
    asked: list[dict[str, Any]] = []

    def custom(group: str, payload: dict[str, Any]) -> dict[str, list[str]]:
        asked.append(payload)
        return {"InstanceIDs": [i["InstanceId"] for i in payload["Instances"]][-2:]}

    policies = TerminationPolicies(REGION, lambda _: None, Clock().now, custom=custom)
    policies.custom_groups.add("web")
    first, second, third = group_of_three(policies)
    client("autoscaling").set_instance_protection(
        AutoScalingGroupName="web", InstanceIds=[third], ProtectedFromScaleIn=True
    )
    scale_to(2)
    (payload,) = asked
    assert payload["AutoScalingGroupName"] == "web"
    assert payload["CapacityToTerminate"] == [
        {"AvailabilityZone": f"{REGION}a", "Capacity": 1, "InstanceMarketOption": "on-demand"}
    ]
    assert sorted(i["InstanceId"] for i in payload["Instances"]) == sorted([first, second])
    assert third in instances() and len(instances()) == 2  # the protected one stayed


@pytest.mark.parametrize("answer", [{"InstanceIDs": []}, RuntimeError("Task timed out")])
def test_no_answer_or_a_failure_leaves_the_instances_and_the_group_asks_again_a_minute_on(
    answer: Any,
) -> None:
    clock = Clock()
    answers: list[Any] = [answer]

    def custom(group: str, payload: dict[str, Any]) -> Any:
        given = (
            answers.pop(0) if answers else {"InstanceIDs": [payload["Instances"][0]["InstanceId"]]}
        )
        if isinstance(given, Exception):
            raise given
        return given

    policies = TerminationPolicies(REGION, lambda _: None, clock.now, custom=custom)
    policies.custom_groups.add("web")
    group_of_three(policies)
    scale_to(2)
    assert len(instances()) == 3  # desired 2, three still there
    assert group_sizes(REGION)["web"][0] == 2
    policies.retry()  # too soon
    assert len(instances()) == 3
    clock.at += timedelta(minutes=1)
    policies.retry()
    assert len(instances()) == 2 and "web" not in policies.waiting
