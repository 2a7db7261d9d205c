"""The drain function end to end: the real handler, wired by `nodescaler.wiring` from its
settings, with the samples in events/, against the loopback API server and moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from nodescaler import wiring
from nodescaler.config import DrainSettings
from nodescaler.errors import (
    DrainFailedError,
    LifecycleActionExpiredError,
    MalformedEventError,
    SettingsError,
)
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.service.drainer import Drainer
from nodescaler_sandbox.kube.apiserver import KubeApiServer
from nodescaler_sandbox.lambda_local import LocalContext
from nodescaler_sandbox.moto_gaps import LifecycleActionRecorder

from functions.drain import handler as drain
from tests.aws import REGION, client, make_asg, make_evaluation_queue, make_spot_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import ScalingEventsCaught, event
from tests.integration.test_node_groups import eks_node_group
from tests.kube import kubeconfig, node, pdb, pod

NODE = "ip-10-0-1-23.eu-west-1.compute.internal"
OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "microservices"}
LIFECYCLE = event("lifecycle-terminate.json")["detail"]
SPOT_INSTANCE = event("spot-interruption.json")["detail"]["instance-id"]


@dataclass
class DrainFunction:
    server: KubeApiServer
    recorder: LifecycleActionRecorder
    drainer: Drainer
    queue_url: str
    clients: wiring.AwsClients | None = None  # the function's, where a test watches them

    def __call__(self, incoming: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = drain.handler(
            incoming, LocalContext("nodescaler-drain"), drainer=self.drainer
        )
        return result

    def node_for(self, instance_id: str, *pods: str) -> None:
        self.server.cluster.put("nodes", node(NODE, provider_id=f"aws:///eu-west-1a/{instance_id}"))
        for name in pods:
            self.server.cluster.put("pods", pod(name, NODE))
        self.server.cluster.put("pods", pod("aws-node-x1", NODE, owner="DaemonSet"))

    def pods_left(self) -> list[str]:
        return sorted(name for _, name in self.server.cluster.objects["pods"])

    def queued(self) -> list[EvaluationRequest]:
        answer = client("sqs").receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
        return [
            EvaluationRequest.model_validate_json(m["Body"]) for m in answer.get("Messages", [])
        ]


@pytest.fixture
def function(tmp_path: Path, clock: VirtualClock) -> Iterator[DrainFunction]:
    """The function as deployed: settings from its environment, clients from wiring, the
    clock and sleep virtual."""
    with KubeApiServer(token="secret") as server:
        queue_url = make_evaluation_queue()
        settings = DrainSettings.from_environment(
            {
                "EVALUATION_QUEUE_URL": queue_url,
                "KUBECONFIG_PATH": str(kubeconfig(tmp_path / "kubeconfig", server.url)),
                "DRAIN_GROUPS": '["web"]',  # the lifecycle sample's group: the stack hooked it
            }
        )
        clients = wiring.AwsClients(boto3.Session(region_name=REGION))
        recorder = LifecycleActionRecorder()
        recorder.watch(clients.autoscaling)
        drainer = wiring.drainer(
            settings, clients, clock, sleep=lambda seconds: clock.advance(seconds=seconds)
        )
        yield DrainFunction(server, recorder, drainer, queue_url, clients)


def hold(function: DrainFunction) -> None:
    function.recorder.hold(
        LIFECYCLE["AutoScalingGroupName"],
        LIFECYCLE["LifecycleHookName"],
        LIFECYCLE["EC2InstanceId"],
        LIFECYCLE["LifecycleActionToken"],
    )


def test_the_lifecycle_sample_drains_its_node_and_completes_the_action(
    function: DrainFunction, output: Any
) -> None:
    function.node_for(LIFECYCLE["EC2InstanceId"], "web-0", "web-1")
    hold(function)

    result = function(event("lifecycle-terminate.json"))

    assert (result["outcome"], result["node"], result["lifecycle_result"]) == (
        "drained",
        NODE,
        "CONTINUE",
    )
    assert function.pods_left() == ["aws-node-x1"]
    assert [c["LifecycleActionResult"] for c in function.recorder.completed()] == ["CONTINUE"]
    printed = output()
    assert printed.metric("NodesDrained", "web") == [1]
    assert printed.metric("PodsEvicted") == [2, 2]  # service-wide, and for the group
    (line,) = [log for log in printed.logs if "drain" in log]
    assert line["message"] == (
        f"node {NODE} ({LIFECYCLE['EC2InstanceId']}) drained in 0 s: 2 pods evicted; "
        "lifecycle action completed with CONTINUE"
    )
    assert line["drain"]["skipped"] == [{"pod": "default/aws-node-x1", "reason": "DaemonSet pod"}]
    assert (line["level"], line["instance_id"], line["cause"]) == (
        "INFO",
        LIFECYCLE["EC2InstanceId"],
        "lifecycle-action",
    )


def test_the_spot_sample_queues_its_managed_group_and_drains_the_node(
    function: DrainFunction, output: Any
) -> None:
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    function.node_for(instance, "web-0")
    warning = event("spot-interruption.json")
    warning["detail"]["instance-id"] = instance

    result = function(warning)

    assert [(r.node_group, r.cause, r.event_id) for r in function.queued()] == [
        ("web", "spot-interruption", warning["id"])
    ]
    assert (result["outcome"], result["lifecycle_result"]) == ("drained", None)
    assert function.pods_left() == ["aws-node-x1"]
    assert function.recorder.calls == []
    assert output().metric("ReevaluationsQueued", "web") == [1]


def test_a_rebalance_recommendation_for_an_instance_in_no_group_leaves_its_node_alone(
    function: DrainFunction, output: Any
) -> None:
    function.node_for(SPOT_INSTANCE, "web-0")

    result = function(event("rebalance-recommendation.json"))

    assert result["outcome"] == "not-ours"
    assert function.pods_left() == ["aws-node-x1", "web-0"]
    assert function.server.cluster.objects["nodes"][("", NODE)]["spec"].get("unschedulable") is None
    assert function.queued() == []
    printed = output()
    assert printed.metric("UnmanagedInterruptions") == [1]
    assert printed.metric("IgnoredEvents") == [1]
    (warning,) = printed.messages("WARNING")
    assert warning == (
        f"instance {SPOT_INSTANCE} is in no Auto Scaling group: its node is left alone"
    )


def test_a_malformed_event_is_logged_naming_the_field_counted_and_raised(
    function: DrainFunction, output: Any
) -> None:
    broken = event("lifecycle-terminate.json")
    del broken["detail"]["EC2InstanceId"]

    with pytest.raises(MalformedEventError):
        function(broken)

    printed = output()
    (error,) = printed.messages("ERROR")
    assert error.startswith(f"event {broken['id']} can't be read as a terminate lifecycle action")
    assert "EC2 Instance-terminate Lifecycle Action.detail.EC2InstanceId: Field required" in error
    assert printed.metric("MalformedEvents") == [1]
    assert function.recorder.calls == []


def test_an_expired_lifecycle_action_is_logged_counted_and_raised_for_the_dead_letter_queue(
    function: DrainFunction, output: Any
) -> None:
    function.node_for(LIFECYCLE["EC2InstanceId"], "web-0")
    # the hook holds the instance, but under another action: this event's token is no longer
    # one Auto Scaling will take
    function.recorder.hold(
        LIFECYCLE["AutoScalingGroupName"],
        LIFECYCLE["LifecycleHookName"],
        LIFECYCLE["EC2InstanceId"],
        "6f1a2c3e-0000-4000-8000-00000000b002",
    )

    with pytest.raises(LifecycleActionExpiredError):
        function(event("lifecycle-terminate.json"))

    printed = output()
    (error,) = printed.messages("ERROR")
    assert error.startswith("node group web, lifecycle hook nodescaler-drain: the action for")
    assert error.endswith("; the event is kept in the dead-letter queue")
    assert printed.metric("LifecycleActionsExpired") == [1]
    assert len(function.recorder.completed()) == 1


def test_a_drain_that_fails_completes_the_action_then_fails_the_invocation(
    function: DrainFunction, output: Any, scaling_events: ScalingEventsCaught
) -> None:
    function.node_for(LIFECYCLE["EC2InstanceId"], "web-0")
    hold(function)
    function.server.token = "rotated"  # the function's credentials no longer work

    with pytest.raises(DrainFailedError):
        function(event("lifecycle-terminate.json"))

    assert [c["LifecycleActionResult"] for c in function.recorder.completed()] == ["CONTINUE"]
    printed = output()
    (error,) = [log for log in printed.logs if log["level"] == "ERROR"]
    assert error["message"].startswith(
        f"draining instance {LIFECYCLE['EC2InstanceId']} failed after 0 pods evicted: "
        "KubernetesUnavailableError: Kubernetes API: 401 Unauthorized"
    )
    assert "Traceback" in error["exception"]
    assert printed.metric("DrainFailures", "web") == [1]
    (failed,) = scaling_events.read()  # told all the same, with what failed
    assert (failed["detail-type"], failed["detail"]["lifecycleResult"]) == (
        "Node Drain Failed",
        "CONTINUE",
    )
    assert failed["detail"]["problem"].startswith("KubernetesUnavailableError: Kubernetes API: 401")


def test_the_hooks_test_notification_is_acknowledged_without_draining(output: Any) -> None:
    notification = event("lifecycle-terminate.json")
    notification["detail"] = {
        "Event": "autoscaling:TEST_NOTIFICATION",
        "AutoScalingGroupName": "web",
    }

    # no drainer injected and no settings: a test notification needs neither
    result = drain.handler(notification, LocalContext("nodescaler-drain"))

    assert result == {"outcome": "test-notification", "node_group": "web"}
    assert output().messages("INFO") == [
        "lifecycle hook test notification for node group web: nothing to drain"
    ]


@pytest.fixture
def cold_start() -> Iterator[None]:
    drain.configured_drainer.cache_clear()
    yield
    drain.configured_drainer.cache_clear()


@pytest.mark.usefixtures("cold_start")
@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({}, "DrainSettings: setting EVALUATION_QUEUE_URL is not set"),
        (
            {"EVALUATION_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo"},
            "DrainSettings: setting CLUSTER_NAME is not set, nor KUBECONFIG_PATH",
        ),
    ],
)
def test_a_misconfigured_function_fails_its_first_drain_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], message: str
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=message):
        drain.handler(event("spot-interruption.json"), LocalContext("nodescaler-drain"))


def test_the_handler_returns_what_lambda_can_serialize(function: DrainFunction) -> None:
    function.node_for(LIFECYCLE["EC2InstanceId"], "web-0")
    hold(function)
    assert json.loads(json.dumps(function(event("lifecycle-terminate.json"))))["outcome"] == (
        "drained"
    )


def test_a_drained_node_is_told_once_on_eventbridge_after_its_action_completed(
    function: DrainFunction, scaling_events: ScalingEventsCaught
) -> None:
    function.node_for(LIFECYCLE["EC2InstanceId"], "web-0", "web-1")
    hold(function)

    function(event("lifecycle-terminate.json"))

    (drained,) = scaling_events.read()
    assert drained["detail-type"] == "Node Drained"
    assert drained["detail"] | {"seconds": 0} == {
        "cluster": "",
        "nodeGroup": "web",
        "instanceId": LIFECYCLE["EC2InstanceId"],
        "node": NODE,
        "cause": "lifecycle-action",
        "lifecycleResult": "CONTINUE",
        "evicted": ["default/web-0", "default/web-1"],
        "remaining": [],
        "disruptionBudgets": [],
        "seconds": 0,
        "problem": None,
        "outcome": "drained",
    }


def test_a_drain_a_budget_holds_past_its_deadline_is_told_naming_the_budget(
    function: DrainFunction, scaling_events: ScalingEventsCaught
) -> None:
    function.node_for(LIFECYCLE["EC2InstanceId"])
    for name in ("web-0", "web-1"):
        function.server.cluster.put("pods", pod(name, NODE, labels={"app": "web"}))
    function.server.cluster.put(
        "poddisruptionbudgets", pdb("web-pdb", {"app": "web"}, minAvailable=1)
    )
    hold(function)

    function(event("lifecycle-terminate.json"))

    (timed_out,) = scaling_events.read()
    assert timed_out["detail-type"] == "Node Drain Timed Out"
    detail = timed_out["detail"]
    assert (detail["disruptionBudgets"], detail["lifecycleResult"], detail["evicted"]) == (
        ["default/web-pdb"],
        "CONTINUE",
        ["default/web-0"],
    )
    assert [p["pod"] for p in detail["remaining"]] == ["default/web-1"]


# --- forged events: anyone allowed to invoke the function could send one -----------------
# EC2 warns only Spot Instances ("InstanceLifecycle": "spot" in DescribeInstances:
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html);
# a terminate hook holds its instance in Terminating:Wait
# (https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html).


def on_demand_instance_of_web(function: DrainFunction) -> str:
    make_asg("web", tags=OPTED_IN, desired=1)
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["web"])
    instance: str = described["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    function.node_for(instance, "web-0")
    return instance


def test_a_spot_warning_for_an_on_demand_instance_is_refused_logged_and_counted(
    function: DrainFunction, output: Any
) -> None:
    instance = on_demand_instance_of_web(function)
    forged = event("spot-interruption.json")
    forged["detail"]["instance-id"] = instance

    result = function(forged)

    problem = (
        f"spot interruption for instance {instance} in node group web: its market is "
        "on-demand, not spot"
    )
    assert (result["outcome"], result["problem"]) == ("unconfirmed", problem)
    assert function.pods_left() == ["aws-node-x1", "web-0"]
    assert function.queued() == []
    printed = output()
    assert printed.messages("WARNING") == [f"refused: {problem}; its node is left alone"]
    assert printed.metric("UnconfirmedEvents") == [1, 1]  # service-wide, and for the group
    assert printed.metric("UnconfirmedEvents", "web") == [1]
    assert printed.metric("NodesDrained") == []


def test_a_lifecycle_action_for_an_instance_in_service_is_refused_and_not_answered(
    function: DrainFunction, output: Any
) -> None:
    instance = on_demand_instance_of_web(function)
    forged = event("lifecycle-terminate.json")
    forged["detail"]["EC2InstanceId"] = instance

    result = function(forged)

    assert (result["outcome"], result["lifecycle_result"]) == ("unconfirmed", None)
    assert function.pods_left() == ["aws-node-x1", "web-0"]
    assert function.recorder.calls == []
    printed = output()
    assert printed.messages("WARNING") == [
        f"refused: lifecycle action for instance {instance} in node group web: the instance "
        "is InService, not held by a terminate hook; its node is left alone"
    ]
    assert printed.metric("UnconfirmedEvents", "web") == [1]


def test_a_spot_warning_for_an_eks_managed_group_asks_eks_nothing_its_role_refuses(
    function: DrainFunction,
) -> None:
    """The drain function's role holds no eks:DescribeNodegroup (infra/drain.py): whose
    group an instance is needs its ASG's tags alone, never its scalingConfig, and a call
    refused or throttled would only eat into the warning's two minutes."""
    # Given an opted-in EKS managed node group's Spot Instance, its node in the cluster
    eks_node_group("prod", "web")
    managed = {"eks:cluster-name": "prod", "eks:nodegroup-name": "web"}
    (instance,) = make_spot_asg("web", tags=OPTED_IN | managed)
    function.node_for(instance, "web-0")
    warning = event("spot-interruption.json")
    warning["detail"]["instance-id"] = instance
    asked: list[str] = []
    assert function.clients is not None
    function.clients.eks.meta.events.register(
        "before-call.eks.*", lambda model, **_: asked.append(model.name)
    )

    # When its interruption warning arrives
    result = function(warning)

    # Then its node is drained and its group queued, and EKS was never asked
    assert result["outcome"] == "drained" and function.pods_left() == ["aws-node-x1"]
    assert [r.node_group for r in function.queued()] == ["web"]
    assert asked == []
