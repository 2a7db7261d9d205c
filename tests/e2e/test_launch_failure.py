"""Airbnb's case, event-driven: the preferred group can't launch, so it is backed off and
the next group in the expander chain takes its pending pods within the same re-plan.

moto always launches, so `fail_launches` removes what it launched (the failure) and
`ScalingActivities` answers DescribeScalingActivities as Auto Scaling would; both say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.errors import UnmanagedGroupError
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import (
    CallCounter,
    ScalingActivities,
    client,
    desired_capacity,
    fail_launches,
    make_asg,
)
from tests.builders import VirtualClock
from tests.e2e.conftest import TABLE, Deployment, ScalingEventsCaught, event
from tests.e2e.test_kubernetes_path import BATCH_POLICY, group_at_zero, launch_template
from tests.kube import kubeconfig, node, pod

PRIORITIES = '[{"name": "priority", "priorities": {"10": ["spot-.*"], "1": [".*"]}}]'


@pytest.fixture
def api_server() -> Any:
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def activities() -> ScalingActivities:
    return ScalingActivities()


@pytest.fixture
def airbnb(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    activities: ScalingActivities,
    tmp_path: Path,
) -> Deployment:
    """Two groups at zero for the same pods, spot preferred; one pending pod."""
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    launch_template("general", "m5.large")
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    deployment = Deployment(
        policies, calls, clock, {"KUBECONFIG_PATH": str(config), "EXPANDERS": PRIORITIES}
    )
    activities.watch(deployment.clients.autoscaling)
    group_at_zero("spot-ng", "general")
    group_at_zero("on-demand-ng", "general")
    api_server.cluster.put("pods", pod("job", cpu="1"))
    return deployment


def launch_failure(deployment: Deployment, group: str, activity: str) -> dict[str, Any]:
    at = deployment.clock.now().isoformat().replace("+00:00", "Z")
    failure = event("launch-unsuccessful.json", time=at, id=f"event-{activity}")
    failure["detail"] = failure["detail"] | {"AutoScalingGroupName": group, "ActivityId": activity}
    return deployment.dispatch(failure)


def sizes() -> tuple[int, int]:
    return desired_capacity("spot-ng"), desired_capacity("on-demand-ng")


def backoff_of(group: str) -> Any:
    return DynamoStateStore(client("dynamodb"), TABLE).load(group).backoff


def test_a_launch_failure_moves_the_pods_to_the_next_group_in_one_replan(
    airbnb: Deployment, output: Any
) -> None:
    airbnb.tick()
    assert sizes() == (1, 0)  # the preferred group is asked first

    fail_launches("spot-ng")
    airbnb.clock.advance(seconds=20)
    answer = launch_failure(airbnb, "spot-ng", "activity-1")
    assert answer["queued"] == ["spot-ng", "on-demand-ng"]
    airbnb.evaluations.drain()

    # one re-plan: spot-ng no longer asks for the instance it could not launch, on-demand
    # takes the pod
    assert sizes() == (0, 1)
    printed = output()
    spot = next(
        line["decision"]
        for line in printed.logs
        if line.get("node_group") == "spot-ng"
        and "decision" in line
        and line["decision"]["limited_by"] == ["backoff"]
    )
    assert spot["reason"] == (
        "abort the scale-up 1 → 0 | backed off until 09:05:20Z after a failed scale-up: We currently "
        "do not have sufficient m5.large capacity in the Availability Zone you requested "
        "(eu-west-1a). Our system will be working on provisioning additional capacity."
    )
    assert printed.metric("LaunchFailures", "spot-ng") == [1]
    assert printed.metric("BackedOff", "spot-ng") == [0, 1]


def test_a_pod_pending_while_its_node_boots_adds_no_second_node(airbnb: Deployment) -> None:
    airbnb.tick()
    for _ in range(3):
        airbnb.clock.advance(minutes=1)
        airbnb.tick()
    assert sizes() == (1, 0)


def test_after_the_backoff_the_preferred_group_is_eligible_again(
    airbnb: Deployment, api_server: KubeApiServer
) -> None:
    airbnb.tick()
    fail_launches("spot-ng")
    launch_failure(airbnb, "spot-ng", "activity-1")
    airbnb.evaluations.drain()
    assert sizes() == (0, 1)
    # the on-demand node comes up and takes the pod
    (instance,) = client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=["on-demand-ng"]
    )["AutoScalingGroups"][0]["Instances"]
    provider = f"aws:///eu-west-1a/{instance['InstanceId']}"
    api_server.cluster.put("nodes", node("od-1", None, cpu="2", provider_id=provider))
    api_server.cluster.put("pods", pod("job", "od-1", cpu="1"))

    airbnb.clock.advance(minutes=2)  # still backed off: a new pod goes to on-demand
    api_server.cluster.put("pods", pod("job-2", cpu="1500m"))
    airbnb.tick()
    assert sizes() == (0, 2)
    # the second on-demand node comes up too, and takes job-2
    second = client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=["on-demand-ng"]
    )["AutoScalingGroups"][0]["Instances"][1]
    provider = f"aws:///eu-west-1a/{second['InstanceId']}"
    api_server.cluster.put("nodes", node("od-2", None, cpu="2", provider_id=provider))
    api_server.cluster.put("pods", pod("job-2", "od-2", cpu="1500m"))

    airbnb.clock.advance(minutes=4)  # 6 minutes after the failure: spot is preferred again
    api_server.cluster.put("pods", pod("job-3", cpu="1500m"))
    airbnb.tick()
    assert desired_capacity("spot-ng") == 1


def test_failures_double_the_backoff_and_a_redelivered_event_counts_once(
    airbnb: Deployment,
) -> None:
    airbnb.tick()
    launch_failure(airbnb, "spot-ng", "activity-1")
    launch_failure(airbnb, "spot-ng", "activity-1")  # EventBridge delivers at least once
    assert backoff_of("spot-ng").seconds == 300
    airbnb.clock.advance(minutes=6)
    launch_failure(airbnb, "spot-ng", "activity-2")
    assert backoff_of("spot-ng").seconds == 600
    airbnb.clock.advance(hours=3, minutes=11)
    launch_failure(airbnb, "spot-ng", "activity-3")
    assert backoff_of("spot-ng").seconds == 300  # three quiet hours: afresh


def test_without_the_event_a_failed_scaling_activity_backs_the_group_off(
    airbnb: Deployment,
    activities: ScalingActivities,
    output: Any,
    scaling_events: ScalingEventsCaught,
) -> None:
    airbnb.tick()
    fail_launches("spot-ng")
    airbnb.clock.advance(seconds=30)
    activities.launch_failed("spot-ng", airbnb.clock.now(), "InsufficientInstanceCapacity")
    airbnb.clock.advance(seconds=30)
    airbnb.tick()  # spot-ng finds the failure and backs off; on-demand may go first
    airbnb.clock.advance(minutes=1)
    airbnb.tick()
    assert sizes() == (0, 1)
    assert backoff_of("spot-ng").reason == "InsufficientInstanceCapacity"
    # the same failure arriving as an event later does not back off twice
    (activity,) = [a["ActivityId"] for a in activities.activities]
    launch_failure(airbnb, "spot-ng", activity)
    assert backoff_of("spot-ng").seconds == 300
    told = [
        e["detail"] for e in scaling_events.read() if e["detail-type"] == "Node Group Backed Off"
    ]
    assert [(d["nodeGroup"], d["noticedBy"], d["reason"]) for d in told] == [
        ("spot-ng", "evaluation", "InsufficientInstanceCapacity")
    ]


def test_instances_that_never_become_ready_nodes_back_the_group_off(
    airbnb: Deployment,
) -> None:
    airbnb.tick()  # moto has the instance InService at once; no node ever registers
    airbnb.clock.advance(minutes=14)
    airbnb.tick()
    assert backoff_of("spot-ng") is None
    airbnb.clock.advance(minutes=2)
    airbnb.tick()
    airbnb.clock.advance(minutes=1)
    airbnb.tick()
    assert backoff_of("spot-ng").reason == (
        "1 of the instances asked for at 09:00:00Z were not ready after 15 minutes"
    )
    # the launching instance is kept (it may still come up); the pod goes to on-demand
    assert sizes() == (1, 1)


def test_a_launch_failure_of_a_group_nodescaler_does_not_manage_is_ignored_and_said(
    airbnb: Deployment, output: Any
) -> None:
    make_asg("someone-elses")
    answer = launch_failure(airbnb, "someone-elses", "activity-9")
    assert answer["queued"] == []
    printed = output()
    assert printed.messages("WARNING") == [
        "launch failure activity-9: node group someone-elses is not managed by nodescaler "
        "(not opted in, or opted in for another cluster); nothing to back off"
    ]
    assert printed.metric("IgnoredEvents") == [1]
    with pytest.raises(UnmanagedGroupError):  # what the handler caught
        airbnb.dispatcher.launch_failed("someone-elses", "a", "r", "e", airbnb.clock.now())
