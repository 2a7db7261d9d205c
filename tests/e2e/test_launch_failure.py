"""Airbnb's case, event-driven: the preferred group can't launch, so it is backed off and
the next group in the expander chain takes its pending pods within the same re-plan.

moto always launches, so `fail_launches` removes what it launched (the failure) and
`ScalingActivities` answers DescribeScalingActivities as Auto Scaling would; both say so.
A launch-failure event counts only when the group's scaling activities show the failure.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.outside_text import outside
from nodescaler.errors import EventUnconfirmableError, UnmanagedGroupError
from nodescaler_sandbox.kube.apiserver import KubeApiServer
from nodescaler_sandbox.moto_gaps import ScalingActivities

from tests.aws import (
    CallCounter,
    client,
    desired_capacity,
    fail_launches,
    make_asg,
    refusing,
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
    """The group's launch-failure event for `activity`, to dispatch."""
    at = deployment.clock.now().isoformat().replace("+00:00", "Z")
    failure = event("launch-unsuccessful.json", time=at, id=f"event-{activity}")
    failure["detail"] = failure["detail"] | {"AutoScalingGroupName": group, "ActivityId": activity}
    return deployment.dispatch(failure)


def failed_launch(
    deployment: Deployment, activities: ScalingActivities, group: str, activity: str
) -> dict[str, Any]:
    """A launch that failed: Auto Scaling lists it among the group's scaling activities,
    then sends its event."""
    message = event("launch-unsuccessful.json")["detail"]["StatusMessage"]
    activities.launch_failed(group, deployment.clock.now(), message, activity)
    return launch_failure(deployment, group, activity)


def sizes() -> tuple[int, int]:
    return desired_capacity("spot-ng"), desired_capacity("on-demand-ng")


def backoff_of(group: str) -> Any:
    return DynamoStateStore(client("dynamodb"), TABLE).load(group).backoff


def test_a_launch_failure_moves_the_pods_to_the_next_group_in_one_replan(
    airbnb: Deployment, activities: ScalingActivities, output: Any
) -> None:
    airbnb.tick()
    assert sizes() == (1, 0)  # the preferred group is asked first

    fail_launches("spot-ng")
    airbnb.clock.advance(seconds=20)
    answer = failed_launch(airbnb, activities, "spot-ng", "activity-1")
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
    airbnb: Deployment, api_server: KubeApiServer, activities: ScalingActivities
) -> None:
    airbnb.tick()
    fail_launches("spot-ng")
    failed_launch(airbnb, activities, "spot-ng", "activity-1")
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
    airbnb: Deployment, activities: ScalingActivities
) -> None:
    airbnb.tick()
    failed_launch(airbnb, activities, "spot-ng", "activity-1")
    launch_failure(airbnb, "spot-ng", "activity-1")  # EventBridge delivers at least once
    assert backoff_of("spot-ng").seconds == 300
    airbnb.clock.advance(minutes=6)
    failed_launch(airbnb, activities, "spot-ng", "activity-2")
    assert backoff_of("spot-ng").seconds == 600
    airbnb.clock.advance(hours=3, minutes=11)
    failed_launch(airbnb, activities, "spot-ng", "activity-3")
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


def test_a_launch_failure_of_a_forged_group_name_is_ignored_in_clean_lines_with_no_group_metric(
    airbnb: Deployment, output: Any
) -> None:
    # Given an event, sent by anyone allowed to invoke dispatch, naming a group that does
    # not exist: 255 characters (Auto Scaling's limit) holding a terminal escape and a newline
    forged = ("\x1b]0;pwned\x07\nng-" * 20)[:255]

    # When it is dispatched
    answer = launch_failure(airbnb, forged, "activity-9")

    # Then it is ignored, said in clean lines naming the group as one line, and counted
    # without a NodeGroup dimension: forged names can't make a metric each
    assert answer == {"cause": f"launch failure in {outside(forged, 255)}", "queued": []}
    printed = output()
    for line in printed.logs:
        shown = json.dumps(line)
        assert not any(escape in shown for escape in ("\\u001b", "\\u0007", "\\n"))
    (warning,) = printed.messages("WARNING")
    assert warning.startswith("launch failure activity-9: node group ]0;pwned ng- ]0;pwned ng-")
    assert printed.metric("IgnoredEvents") == [1]
    assert all("NodeGroup" not in record for record in printed.emf)


# --- forged launch failures: anyone allowed to invoke dispatch could send one -------------
# Auto Scaling lists a launch that failed among the group's scaling activities with StatusCode
# Failed or Cancelled; unknown ActivityIds are ignored without an error:
# https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeScalingActivities.html


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (None, "the group has no such scaling activity"),
        ("Successful", "the launch is Successful, not failed"),
    ],
    ids=["no such activity", "a launch that succeeded"],
)
def test_a_launch_failure_the_groups_activities_do_not_show_is_refused_and_the_group_scales_on(
    airbnb: Deployment,
    activities: ScalingActivities,
    output: Any,
    status: str | None,
    why: str,
) -> None:
    # Given spot-ng scaling up to its one instance, which launched
    airbnb.tick()
    assert sizes() == (1, 0)
    if status is not None:
        activities.launch_failed("spot-ng", airbnb.clock.now(), "", "activity-1", status)

    # When someone allowed to invoke dispatch sends a launch failure for it
    answer = launch_failure(airbnb, "spot-ng", "activity-1")

    # Then it is refused, named in one line, counted, and the group is not backed off
    refusal = f"launch failure activity-1 of node group spot-ng: {why}"
    assert answer == {"cause": "launch failure in spot-ng", "queued": [], "refused": refusal}
    printed = output()
    assert printed.messages("WARNING") == [f"refused: {refusal}"]
    assert printed.metric("UnconfirmedEvents") == [1, 1]  # service-wide, and for the group
    assert printed.metric("UnconfirmedEvents", "spot-ng") == [1]
    assert printed.metric("LaunchFailures") == []
    assert backoff_of("spot-ng") is None
    airbnb.clock.advance(minutes=1)
    airbnb.tick()
    assert sizes() == (1, 0)  # still spot-ng's, which goes on with its scale-up


def test_a_cancelled_launch_is_a_failure_and_backs_the_group_off(
    airbnb: Deployment, activities: ScalingActivities
) -> None:
    airbnb.tick()
    fail_launches("spot-ng")
    activities.launch_failed("spot-ng", airbnb.clock.now(), "", "activity-1", "Cancelled")

    answer = launch_failure(airbnb, "spot-ng", "activity-1")
    airbnb.evaluations.drain()

    assert answer["queued"] == ["spot-ng", "on-demand-ng"]
    assert backoff_of("spot-ng").seconds == 300
    assert sizes() == (0, 1)


def test_another_groups_failed_activity_does_not_back_this_group_off(
    airbnb: Deployment, activities: ScalingActivities, output: Any
) -> None:
    airbnb.tick()
    activities.launch_failed("on-demand-ng", airbnb.clock.now(), "no capacity", "activity-1")

    answer = launch_failure(airbnb, "spot-ng", "activity-1")

    assert answer["refused"] == (
        "launch failure activity-1 of node group spot-ng: the group has no such scaling activity"
    )
    assert backoff_of("spot-ng") is None
    assert output().metric("UnconfirmedEvents", "spot-ng") == [1]


def test_when_the_activities_cannot_be_read_nothing_is_done_and_the_event_is_retried(
    airbnb: Deployment, activities: ScalingActivities, output: Any
) -> None:
    airbnb.tick()
    fail_launches("spot-ng")
    activities.launch_failed("spot-ng", airbnb.clock.now(), "no capacity", "activity-1")

    # Given DescribeScalingActivities refused, when the event comes
    refused = refusing(airbnb.clients.autoscaling, "autoscaling", "DescribeScalingActivities")
    with refused, pytest.raises(EventUnconfirmableError):  # Lambda tries the event again
        launch_failure(airbnb, "spot-ng", "activity-1")
    assert backoff_of("spot-ng") is None
    (error,) = output().messages("ERROR")
    assert error.startswith(
        "launch failure activity-1 of node group spot-ng: its scaling activities could not be "
        "read to confirm it (ClientError: An error occurred (AccessDenied)"
    )
    assert error.endswith("nothing was done, the event will be retried")

    # Then its retry, with AWS answering, backs the group off
    launch_failure(airbnb, "spot-ng", "activity-1")
    assert backoff_of("spot-ng").seconds == 300


def test_a_launch_failure_events_huge_escaped_message_is_stored_bounded_on_one_line(
    airbnb: Deployment, activities: ScalingActivities
) -> None:
    # Given spot-ng's launch that really failed (its scaling activity says so)
    airbnb.tick()
    fail_launches("spot-ng")
    activities.launch_failed("spot-ng", airbnb.clock.now(), "", "activity-1")

    # When its event, sent by anyone allowed to invoke dispatch, carries a 200 KB message
    # with a terminal escape in it
    at = airbnb.clock.now().isoformat().replace("+00:00", "Z")
    failure = event("launch-unsuccessful.json", time=at, id="event-activity-1")
    hostile = "\x1b[2J\x1b]0;pwned\x07" + "capacity " * 22_000
    failure["detail"] = failure["detail"] | {
        "AutoScalingGroupName": "spot-ng",
        "ActivityId": "activity-1",
        "StatusMessage": hostile,
    }
    airbnb.dispatch(failure)
    airbnb.evaluations.drain()

    # Then the group is backed off with the reason cut to one clean line, its state item
    # stays far below DynamoDB's 400 KB, and the pods go to the next group as usual
    reason = backoff_of("spot-ng").reason
    assert "\x1b" not in reason and "\x07" not in reason
    assert reason.startswith("[2J ]0;pwned capacity capacity")
    assert reason.endswith("… (cut, 198,014 characters)")
    assert sizes() == (0, 1)


def test_a_launch_failure_events_huge_escaped_activity_id_is_refused_in_bounded_clean_lines(
    airbnb: Deployment, output: Any
) -> None:
    # Given spot-ng scaling up
    airbnb.tick()

    # When an event, sent by anyone allowed to invoke dispatch, names a 180 KB activity id
    # with a terminal escape in it
    at = airbnb.clock.now().isoformat().replace("+00:00", "Z")
    failure = event("launch-unsuccessful.json", time=at, id="event-hostile")
    hostile = "\x1b]0;pwned\x07" + "activity-" * 20_000
    failure["detail"] = failure["detail"] | {
        "AutoScalingGroupName": "spot-ng",
        "ActivityId": hostile,
    }
    answer = airbnb.dispatch(failure)

    # Then it is refused, and what is shown of the id is one clean line, cut short
    assert answer["refused"].startswith("launch failure ]0;pwned activity-activity-")
    assert "… (cut, 180,010 characters) of node group spot-ng" in answer["refused"]
    printed = output()
    for line in printed.logs:
        shown = json.dumps(line)
        assert len(shown) < 5_000 and "\\u001b" not in shown and "\\u0007" not in shown
    assert backoff_of("spot-ng") is None


def test_a_launch_failure_event_replaying_an_old_failed_activity_is_refused(
    airbnb: Deployment, activities: ScalingActivities, output: Any
) -> None:
    # Given spot-ng, whose launch failed two hours ago (Auto Scaling keeps six weeks of
    # activities), scaling up now to its one instance, which launched
    activities.launch_failed("spot-ng", airbnb.clock.now() - timedelta(hours=2), "", "old-1")
    airbnb.tick()
    assert sizes() == (1, 0)

    # When someone allowed to invoke dispatch sends that old failure's event again, with a
    # fresh event id and time (its redelivery marker long forgotten)
    answer = launch_failure(airbnb, "spot-ng", "old-1")

    # Then it is refused as stale, the healthy group is not backed off and scales on
    assert answer["refused"] == (
        "launch failure old-1 of node group spot-ng: the launch failed at 2026-11-23 07:00Z, "
        "over 60 minutes ago: a stale or replayed event"
    )
    assert backoff_of("spot-ng") is None
    airbnb.clock.advance(minutes=1)
    airbnb.tick()
    assert sizes() == (1, 0)
