"""Scaling events end to end: the functions as deployed, on moto, with a user's rule on
`source: nodescaler` delivering to an SQS queue. A resize tells one event, a hold none, a
launch failure's backoff one; a bus that refuses them leaves the scaling as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from botocore.awsrequest import AWSResponse
from nodescaler_sandbox.moto_gaps import ScalingActivities

from tests.aws import REGION, CallCounter, desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment, ScalingEventsCaught, event
from tests.e2e.test_handlers import GPU, training_tasks


def test_given_a_scale_up_then_one_node_group_resized_event_tells_who_what_and_why(
    deployment: Deployment, scaling_events: ScalingEventsCaught
) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(40)  # 4 a node: 10 nodes

    deployment.tick()

    assert desired_capacity("gpu") == 10
    (resized,) = scaling_events.read()
    assert (resized["source"], resized["detail-type"]) == ("nodescaler", "Node Group Resized")
    detail = resized["detail"]
    assert {k: detail[k] for k in ("nodeGroup", "policy", "direction", "previous", "desired")} == {
        "nodeGroup": "gpu",
        "policy": "gpu-training",
        "direction": "up",
        "previous": 0,
        "desired": 10,
    }
    assert detail["cluster"] == ""  # the deployment names none
    assert detail["decidedAt"] == "2026-11-23T09:00:00Z"
    assert "10" in detail["reason"]


def test_given_a_group_already_at_its_size_then_a_tick_tells_nothing(
    deployment: Deployment, scaling_events: ScalingEventsCaught
) -> None:
    make_asg("gpu", tags=GPU, desired=10, max_size=600)
    training_tasks(40)

    deliveries = deployment.tick()

    assert [d.failed for d in deliveries] == [()]  # evaluated, and held
    assert desired_capacity("gpu") == 10
    assert scaling_events.read() == []


def test_given_a_launch_failure_then_one_backed_off_event_and_none_for_its_redelivery(
    deployment: Deployment, scaling_events: ScalingEventsCaught
) -> None:
    make_asg("spot-ng", tags=GPU, max_size=600)
    failure = event("launch-unsuccessful.json")
    detail = failure["detail"]
    activities = ScalingActivities()  # what Auto Scaling lists: the failed launch
    activities.watch(deployment.clients.autoscaling)
    activities.launch_failed("spot-ng", deployment.clock.now(), "", detail["ActivityId"])

    deployment.dispatch(failure)
    deployment.dispatch(failure)  # EventBridge delivers at least once

    (backed_off,) = scaling_events.read()
    assert backed_off["detail-type"] == "Node Group Backed Off"
    assert backed_off["detail"] == {
        "cluster": "",
        "nodeGroup": "spot-ng",
        "until": "2026-11-23T09:06:20Z",  # the failure at 09:01:20, and five minutes
        "seconds": 300,
        "reason": failure["detail"]["StatusMessage"],
        "failedAt": "2026-11-23T09:01:20Z",
        "noticedBy": "launch-failure-event",
    }


def test_given_a_bus_that_does_not_exist_then_the_resize_stands_and_the_loss_is_logged_and_counted(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    scaling_events: ScalingEventsCaught,
    output: Any,
) -> None:
    deployment = Deployment(policies, calls, clock, {"EVENT_BUS_NAME": "no-such-bus"})
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(40)

    deliveries = deployment.tick()

    assert [d.failed for d in deliveries] == [()]
    assert desired_capacity("gpu") == 10
    assert deployment.dead_letters() == []
    assert scaling_events.read() == []
    printed = output()
    assert printed.metric("ScalingEventsNotPut") == [1]
    (error,) = printed.messages("ERROR")
    assert error.startswith(
        "1 scaling events not put on EventBridge: Node Group Resized for node group gpu: "
        "PutEvents on bus no-such-bus failed: ResourceNotFoundException: "
    )


def test_given_a_bus_that_refuses_an_entry_then_the_resize_stands_and_the_refusal_is_counted(
    deployment: Deployment, scaling_events: ScalingEventsCaught, output: Any
) -> None:
    refuse_every_entry(deployment.clients.events)
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(40)

    deployment.tick()

    assert desired_capacity("gpu") == 10
    printed = output()
    assert printed.metric("ScalingEventsNotPut") == [1]
    (error,) = printed.messages("ERROR")
    assert error == (
        "1 scaling events not put on EventBridge: Node Group Resized for node group gpu: "
        "refused by bus default: ThrottlingException: Rate exceeded"
    )


def refuse_every_entry(events: Any) -> None:
    """PutEvents answered as EventBridge answers a partial failure (FailedEntryCount > 0,
    the call itself a success), which moto never does: each entry throttled."""

    def answer(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        entries = json.loads(params["body"])["Entries"]  # EventBridge speaks JSON
        failed = {"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}
        metadata = {"RequestId": "r-1", "HTTPStatusCode": 200, "HTTPHeaders": {}}
        response = {"FailedEntryCount": len(entries), "Entries": [failed] * len(entries)}
        url = f"https://events.{REGION}.amazonaws.com/"
        return AWSResponse(url, 200, {}, None), response | {"ResponseMetadata": metadata}

    events.meta.events.register("before-call.events.PutEvents", answer)
