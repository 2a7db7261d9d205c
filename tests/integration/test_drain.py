"""Draining a node, against the loopback API server with the real `kubernetes` client and
Auto Scaling on moto, in virtual time: what is evicted and what stays, PodDisruptionBudgets
honoured with retries, heartbeats while waiting, the deadline, and the lifecycle action
completed exactly once on every path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nodescaler.adapters.aws.evaluation_queue import SqsEvaluationQueue
from nodescaler.adapters.aws.lifecycle import (
    AsgInstanceGroups,
    AsgLifecycleActions,
    Ec2InstanceMarkets,
)
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.evictions import KubernetesDrain
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.scale_down.drain import (
    DrainOutcome,
    LifecycleAction,
    LifecycleResult,
    PodNote,
    ReplacementOutcome,
)
from nodescaler.domain.scale_down.pod_rules import NOT_REPLICATED
from nodescaler.errors import (
    DrainFailedError,
    EventUnconfirmableError,
    KubernetesUnavailableError,
    LifecycleActionExpiredError,
)
from nodescaler.events.drain import (
    LifecycleActionEvent,
    RebalanceRecommendationEvent,
    SpotEvent,
    SpotInterruptionEvent,
    parse_drain_event,
)
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.service.drainer import Drainer, Owners, Replacements
from nodescaler_sandbox.kube.apiserver import Cluster, Fault, KubeApiServer
from nodescaler_sandbox.moto_gaps import LifecycleActionRecorder

from tests.aws import client, make_asg, make_evaluation_queue, make_spot_asg, refusing
from tests.builders import T0, VirtualClock
from tests.kube import kubeconfig, node, pdb, pod

EVENTS = Path(__file__).parents[2] / "events"
INSTANCE = "i-0b1c2d3e4f5a6b7c8"  # the lifecycle sample's instance
NODE = "ip-10-0-1-23.eu-west-1.compute.internal"
MIRROR = "kubernetes.io/config.mirror"


def sample(name: str, **detail: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    event["detail"] |= detail
    return event


def lifecycle_action(instance_id: str = INSTANCE) -> LifecycleAction:
    event = parse_drain_event(sample("lifecycle-terminate.json", EC2InstanceId=instance_id))
    assert isinstance(event, LifecycleActionEvent)
    return event.request


def spot_warning(name: str, instance_id: str, at: datetime = T0) -> SpotEvent:
    """The sample warning for the instance, issued at `at` (the drainer's clock starts at T0)."""
    warned = sample(name, **{"instance-id": instance_id}) | {"time": f"{at:%Y-%m-%dT%H:%M:%SZ}"}
    event = parse_drain_event(warned)
    assert isinstance(event, SpotInterruptionEvent | RebalanceRecommendationEvent)
    return event


class VirtualTime:
    """The drainer's clock and `sleep`: sleeping moves the clock, and carries out what the
    test planned for that moment (the cluster changing while the drain waits)."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.slept: list[float] = []
        self._plan: list[tuple[float, Callable[[], Any]]] = []
        self.always: list[Callable[[], Any]] = []  # after every sleep

    @property
    def elapsed(self) -> float:
        return (self.clock.now() - T0).total_seconds()

    def at(self, seconds: float, action: Callable[[], Any]) -> None:
        self._plan.append((seconds, action))

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, "a drainer that sleeps for nothing would spin"
        self.slept.append(seconds)
        self.clock.advance(seconds=seconds)
        due = [step for step in self._plan if step[0] <= self.elapsed]
        self._plan = [step for step in self._plan if step[0] > self.elapsed]
        for _, action in sorted(due, key=lambda step: step[0]):
            action()
        for action in self.always:
            action()


@dataclass
class Rig:
    server: KubeApiServer
    config: Path
    recorder: LifecycleActionRecorder = field(default_factory=LifecycleActionRecorder)
    time: VirtualTime = field(default_factory=VirtualTime)

    @property
    def cluster(self) -> Cluster:
        return self.server.cluster

    def drainer(self, **options: Any) -> Drainer:
        return Drainer(
            cluster=KubernetesDrain(KubeconfigConnection(self.config)),
            lifecycle=AsgLifecycleActions(self.recorder.watch(client("autoscaling"))),
            clock=self.time.clock,
            sleep=self.time.sleep,
            owners=owners(),
            **options,
        )

    def held(self, instance_id: str = INSTANCE) -> LifecycleAction:
        """The sample's lifecycle action, held by the hook until completed."""
        action = lifecycle_action(instance_id)
        self.recorder.hold(action.group, action.hook, action.instance_id, action.token)
        return action

    def pods_on(self, node_name: str) -> list[str]:
        return sorted(
            f"{ns}/{name}"
            for (ns, name), p in self.cluster.objects["pods"].items()
            if p["spec"].get("nodeName") == node_name
        )

    def completed(self) -> list[str]:
        return [c["LifecycleActionResult"] for c in self.recorder.completed()]


def owners() -> Owners:
    """The lifecycle sample's group, web, is hooked by the stack by name (drainGroups)."""
    autoscaling = client("autoscaling")
    return Owners(
        instances=AsgInstanceGroups(autoscaling),
        markets=Ec2InstanceMarkets(client("ec2")),
        node_groups=AsgNodeGroups(autoscaling, client("eks"), tag_names=TagNames()),
        drain_groups=frozenset({"web"}),
    )


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    with KubeApiServer(token="secret") as server:
        yield Rig(server, kubeconfig(tmp_path / "kubeconfig", server.url))


def created(at: datetime) -> str:
    """A creationTimestamp as the API server writes it."""
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"


def put(rig: Rig, *objects: tuple[str, dict[str, Any]]) -> None:
    for kind, obj in objects:
        rig.cluster.put(kind, obj)


def the_node(instance_id: str = INSTANCE, name: str = NODE) -> tuple[str, dict[str, Any]]:
    return "nodes", node(name, provider_id=f"aws:///eu-west-1a/{instance_id}")


def mirror_pod(name: str, node_name: str) -> dict[str, Any]:
    static = pod(name, node_name, owner="Node")
    static["metadata"]["annotations"] = {MIRROR: "0f3c2b1a"}
    return static


def web(i: int, node_name: str = NODE, **options: Any) -> tuple[str, dict[str, Any]]:
    return "pods", pod(f"web-{i}", node_name, labels={"app": "web"}, **options)


def test_given_a_node_with_app_daemonset_mirror_and_finished_pods_the_app_pods_are_evicted(
    rig: Rig,
) -> None:
    put(
        rig,
        the_node(),
        ("nodes", node("other")),
        ("pods", pod("api-0", NODE, spec={"terminationGracePeriodSeconds": 3600})),
        ("pods", pod("api-1", NODE, namespace="shop")),
        ("pods", pod("fluent-bit-x2x9", NODE, namespace="kube-system", owner="DaemonSet")),
        ("pods", mirror_pod("kube-proxy-" + NODE, NODE)),
        ("pods", pod("report-28512", NODE, owner="Job", phase="Succeeded")),
        ("pods", pod("api-2", "other")),
    )
    action = rig.held()  # its group "web" is not opted in, but the stack hooked it by name

    result = rig.drainer(max_grace_seconds=600).lifecycle_action(action)

    assert result.outcome is DrainOutcome.DRAINED
    assert rig.cluster.objects["nodes"][("", NODE)]["spec"]["unschedulable"] is True
    assert rig.pods_on(NODE) == [
        "default/kube-proxy-" + NODE,
        "default/report-28512",
        "kube-system/fluent-bit-x2x9",
    ]
    assert rig.pods_on("other") == ["default/api-2"]
    assert result.evicted == ("default/api-0", "shop/api-1")
    assert set(result.skipped) == {
        PodNote("kube-system/fluent-bit-x2x9", "DaemonSet pod"),
        PodNote("default/kube-proxy-" + NODE, "mirror pod of a static pod"),
        PodNote("default/report-28512", "finished (Succeeded)"),
    }
    # the pod's own grace period, up to the configured most; 30 s when it names none
    assert rig.cluster.evictions == [("default", "api-0", 600), ("shop", "api-1", 30)]
    assert rig.completed() == ["CONTINUE"]
    assert result.lifecycle_result is LifecycleResult.CONTINUE
    assert rig.time.slept == []  # nothing to wait for: the pods went at once


def test_given_a_budget_that_forbids_the_eviction_it_is_retried_until_a_replica_is_ready(
    rig: Rig,
) -> None:
    put(
        rig,
        the_node(),
        ("nodes", node("other")),
        web(0),
        web(1, "other", ready=False),  # still starting: the budget allows no disruption yet
        ("poddisruptionbudgets", pdb("web-pdb", {"app": "web"}, minAvailable=1)),
    )
    replica = pod("web-1", "other", labels={"app": "web"})
    rig.time.at(12, lambda: rig.cluster.put("pods", replica))  # ... and Ready 12 s in

    result = rig.drainer().lifecycle_action(rig.held())

    assert result.outcome is DrainOutcome.DRAINED
    assert rig.time.slept == [5, 10]  # refused at 0 s and 5 s, evicted at 15 s
    assert rig.cluster.evictions == [("default", "web-0", 30)] * 3
    assert rig.pods_on(NODE) == []
    assert result.seconds == 15
    assert rig.completed() == ["CONTINUE"]


def test_while_evicted_pods_terminate_the_drain_waits_and_keeps_the_action_alive(
    rig: Rig,
) -> None:
    rig.cluster.graceful_deletion = True  # pods stay, terminating, until the kubelet is done
    put(rig, the_node(), web(0, spec={"terminationGracePeriodSeconds": 300}), web(1))
    rig.time.at(30, lambda: rig.cluster.delete("pods", ("default", "web-1")))
    rig.time.at(150, lambda: rig.cluster.stop_terminating(NODE))

    result = rig.drainer().lifecycle_action(rig.held())

    assert result.outcome is DrainOutcome.DRAINED
    assert result.seconds == 150  # polled every 5 s until both had gone
    assert set(rig.time.slept) == {5}
    assert len(rig.recorder.heartbeats()) == 2  # at 60 s and 120 s
    assert rig.cluster.objects["pods"] == {}
    assert rig.completed() == ["CONTINUE"]


def test_at_the_deadline_the_action_completes_with_the_default_result_naming_what_stayed(
    rig: Rig,
) -> None:
    rig.cluster.graceful_deletion = True
    put(
        rig,
        the_node(),
        web(0),
        web(1),  # both on the node: the budget lets only one go
        ("poddisruptionbudgets", pdb("web-pdb", {"app": "web"}, minAvailable=1)),
        ("pods", pod("batch-7", NODE, spec={"terminationGracePeriodSeconds": 900})),
    )

    result = rig.drainer(timeout_result=LifecycleResult.ABANDON).lifecycle_action(rig.held())

    assert result.outcome is DrainOutcome.TIMED_OUT
    assert result.seconds == 600
    assert result.remaining == (
        PodNote(
            "default/web-1",
            "blocked by PodDisruptionBudget default/web-pdb "
            "(needs 1 healthy pods and has 1 currently)",
        ),
        PodNote("default/batch-7", "evicted, still terminating (grace period 600 s)"),
        PodNote("default/web-0", "evicted, still terminating (grace period 30 s)"),
    )
    assert max(rig.time.slept) == 5  # polling the terminating pods
    tried = [0, 5, 15, 35, *range(65, 600, 30)]  # refusals retried after 5 s, doubling to 30 s
    assert [e for e in rig.cluster.evictions if e[1] == "web-1"] == [
        ("default", "web-1", 30)
    ] * len(tried)
    assert len(rig.recorder.heartbeats()) == 9  # every minute, up to 9 min
    assert rig.completed() == ["ABANDON"]
    assert result.lifecycle_result is LifecycleResult.ABANDON
    assert "default/web-1 blocked by PodDisruptionBudget default/web-pdb" in result.message


def test_given_an_instance_that_never_joined_the_cluster_the_action_completes_at_once(
    rig: Rig,
) -> None:
    put(rig, ("nodes", node("someone-else")))

    result = rig.drainer().lifecycle_action(rig.held())

    assert (result.outcome, result.node) == (DrainOutcome.NOT_IN_CLUSTER, None)
    assert rig.completed() == ["CONTINUE"]
    assert [r.split("?")[0] for r in rig.server.requests] == ["GET /api/v1/nodes"]
    assert rig.cluster.objects["nodes"][("", "someone-else")]["spec"].get("unschedulable") is None


def test_an_error_midway_still_completes_the_action_once_then_raises_it(rig: Rig) -> None:
    put(
        rig,
        the_node(),
        web(0),
        ("poddisruptionbudgets", pdb("web-pdb", {"app": "web"}, minAvailable=1)),
    )
    rig.time.at(5, lambda: setattr(rig.server, "token", "rotated"))  # our credentials now fail

    with pytest.raises(DrainFailedError) as caught:
        rig.drainer().lifecycle_action(rig.held())

    failed = caught.value.result
    assert (failed.outcome, failed.node) == (DrainOutcome.FAILED, NODE)
    assert failed.lifecycle_result is LifecycleResult.CONTINUE
    assert isinstance(caught.value.__cause__, KubernetesUnavailableError)
    assert "401 Unauthorized" in str(caught.value)
    assert rig.completed() == ["CONTINUE"]


class BuggyDrain(KubernetesDrain):
    """A drain whose eviction has a programming error: trying again cannot help."""

    def evict(self, *_: Any, **__: Any) -> Any:
        raise TypeError("evict() got an unexpected keyword argument 'grace'")


def test_given_a_programming_error_the_drain_fails_at_once_not_at_its_deadline(rig: Rig) -> None:
    # Given a node with a pod to evict, and an eviction that fails with a bug
    put(rig, the_node(), web(0))
    drainer = replace(rig.drainer(), cluster=BuggyDrain(KubeconfigConnection(rig.config)))

    # When its lifecycle action arrives
    with pytest.raises(DrainFailedError) as caught:
        drainer.lifecycle_action(rig.held())

    # Then it fails at once, naming the bug: no waits holding the instance for ten minutes,
    # and the action is completed once (the error dead-lettered and alarmed, as before)
    assert rig.time.slept == []
    assert isinstance(caught.value.__cause__, TypeError)
    assert "unexpected keyword argument 'grace'" in str(caught.value)
    assert rig.completed() == ["CONTINUE"]


def test_an_expired_action_is_a_clear_error_naming_group_hook_and_instance(rig: Rig) -> None:
    rig.cluster.graceful_deletion = True
    put(rig, the_node(), web(0))
    # the hook's timeout passes while the evicted pod terminates: the action is let go
    rig.time.at(5, lambda: (rig.recorder.expire(INSTANCE), rig.cluster.stop_terminating(NODE)))

    with pytest.raises(LifecycleActionExpiredError) as caught:
        rig.drainer().lifecycle_action(rig.held())

    assert str(caught.value).startswith(
        f"node group web, lifecycle hook nodescaler-drain: the action for instance {INSTANCE} "
        "has expired"
    )
    assert "No active Lifecycle Action found with instance ID" in str(caught.value)
    assert rig.pods_on(NODE) == []  # the drain itself went through
    assert [c.accepted for c in rig.recorder.calls] == [False]  # completing: tried once


def test_an_action_that_expires_while_waiting_stops_the_drain_with_that_error(rig: Rig) -> None:
    put(rig, the_node(), web(0))
    rig.cluster.graceful_deletion = True
    rig.time.at(30, lambda: rig.recorder.expire(INSTANCE))

    with pytest.raises(LifecycleActionExpiredError):
        rig.drainer().lifecycle_action(rig.held())

    assert rig.time.elapsed == 60  # the first heartbeat was refused
    assert [(c.operation, c.accepted) for c in rig.recorder.calls] == [
        ("RecordLifecycleActionHeartbeat", False),
        ("CompleteLifecycleAction", False),
    ]


# --- EC2 Spot warnings ------------------------------------------------------------------

OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "microservices"}


class QueueSpy:
    """The evaluation queue, noting how much of the drain had happened when it was used."""

    def __init__(self, queue: SqsEvaluationQueue, server: KubeApiServer) -> None:
        self._queue = queue
        self._server = server
        self.kubernetes_calls_before: list[int] = []

    def send(self, requests: Any) -> None:
        self.kubernetes_calls_before.append(len(self._server.requests))
        self._queue.send(requests)


@dataclass
class Spot:
    rig: Rig
    queue_url: str
    queue: QueueSpy

    def drainer(self, **options: Any) -> Drainer:
        return self.rig.drainer(replacements=Replacements(owners(), self.queue), **options)

    def queued(self) -> list[EvaluationRequest]:
        answer = client("sqs").receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
        return [
            EvaluationRequest.model_validate_json(m["Body"]) for m in answer.get("Messages", [])
        ]


@pytest.fixture
def spot(rig: Rig) -> Spot:
    url = make_evaluation_queue()
    return Spot(rig, url, QueueSpy(SqsEvaluationQueue(client("sqs"), url), rig.server))


def instance_of(group: str) -> str:
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return str(described["AutoScalingGroups"][0]["Instances"][0]["InstanceId"])


def spot_node_keeping_a_pod(spot: Spot, *pods: tuple[str, dict[str, Any]]) -> str:
    """An opted-in Spot group's instance, its node holding `pods`, one of which their
    budget (minAvailable 1) keeps: the drain runs to its deadline."""
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    budget = ("poddisruptionbudgets", pdb("web-pdb", {"app": "web"}, minAvailable=1))
    put(spot.rig, the_node(instance), *pods, budget)
    return instance


def test_a_spot_warning_queues_its_managed_group_first_then_drains_within_two_minutes(
    spot: Spot,
) -> None:
    instance = spot_node_keeping_a_pod(spot, web(0), web(1))
    warning = spot_warning("spot-interruption.json", instance)

    result = spot.drainer().interruption(warning.request)

    assert spot.queued() == [
        EvaluationRequest(
            node_group="web",
            event_id=warning.id,
            cause="spot-interruption",
            requested_at=warning.time,
        )
    ]
    assert spot.queue.kubernetes_calls_before == [0]  # before the drain began
    assert result.replacement is not None
    assert (result.replacement.outcome, result.node_group) == (ReplacementOutcome.QUEUED, "web")
    assert (result.outcome, result.seconds) == (DrainOutcome.TIMED_OUT, 110)
    assert result.evicted == ("default/web-0",)
    assert result.lifecycle_result is None
    assert spot.rig.recorder.calls == []  # no lifecycle action to complete


def test_given_a_spot_warning_delivered_late_its_drain_ends_two_minutes_after_the_warning(
    spot: Spot,
) -> None:
    # Given a pod its budget keeps, and an interruption warning issued 30 s before the drain
    # starts (EventBridge's delivery, the function's start): EC2 reclaims the instance two
    # minutes after its warning, whenever the drain started
    # (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html)
    instance = spot_node_keeping_a_pod(spot, web(0))
    warning = spot_warning("spot-interruption.json", instance, at=T0 - timedelta(seconds=30))

    # When it is drained
    result = spot.drainer().interruption(warning.request)

    # Then the drain gives up 110 s after the warning (80 s after it started), not 110 s
    # after it started, when the instance would already be gone
    assert (result.outcome, result.seconds) == (DrainOutcome.TIMED_OUT, 80)
    assert spot.rig.time.clock.now() == warning.time + timedelta(seconds=110)


def test_a_rebalance_recommendation_for_a_hooked_group_not_opted_in_drains_without_queueing(
    spot: Spot,
) -> None:
    (instance,) = make_spot_asg("web")  # not opted in, but in drainGroups
    put(spot.rig, the_node(instance), web(0))
    spot.rig.time.at(60, lambda: terminate(instance))  # capacity rebalancing replaces it

    warning = spot_warning("rebalance-recommendation.json", instance)
    result = spot.drainer().interruption(warning.request)

    assert spot.queued() == []
    assert result.replacement is not None
    assert result.replacement.outcome is ReplacementOutcome.UNMANAGED
    assert (
        result.replacement.note == "node group web is not managed by nodescaler: not re-evaluated"
    )
    assert (result.outcome, result.uncordoned) == (DrainOutcome.DRAINED, False)
    assert spot.rig.pods_on(NODE) == []
    assert spot.rig.cluster.objects["nodes"][("", NODE)]["spec"]["unschedulable"] is True


def test_a_rebalanced_instance_that_stays_in_service_has_its_node_uncordoned_at_the_deadline(
    spot: Spot,
) -> None:
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    put(spot.rig, the_node(instance), web(0))

    warning = spot_warning("rebalance-recommendation.json", instance)
    result = spot.drainer(drain_timeout=timedelta(minutes=10)).interruption(warning.request)

    assert (result.outcome, result.uncordoned) == (DrainOutcome.DRAINED, True)
    assert spot.rig.time.elapsed == 600  # watched until the deadline
    assert spot.rig.cluster.objects["nodes"][("", NODE)]["spec"]["unschedulable"] is False
    assert result.message.endswith("; uncordoned: the instance stayed in service")


def test_a_node_cordoned_by_someone_else_stays_cordoned_after_a_rebalance(spot: Spot) -> None:
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    cordoned = node(NODE, provider_id=f"aws:///eu-west-1a/{instance}", unschedulable=True)
    put(spot.rig, ("nodes", cordoned), web(0))

    warning = spot_warning("rebalance-recommendation.json", instance)
    result = spot.drainer().interruption(warning.request)

    assert (result.outcome, result.uncordoned) == (DrainOutcome.DRAINED, False)
    assert spot.rig.cluster.objects["nodes"][("", NODE)]["spec"]["unschedulable"] is True


@pytest.mark.parametrize(
    ("group_tags", "why"),
    [
        (
            {},
            "instance {instance} is in node group legacy, which is neither opted in nor one of "
            "the stack's drainGroups",
        ),
        (
            OPTED_IN | {"nodescaler/cluster": "other"},
            "instance {instance} is in node group legacy, which is neither opted in nor one of "
            "the stack's drainGroups",
        ),
        (None, "instance {instance} is in no Auto Scaling group"),
    ],
    ids=["not opted in", "another cluster's", "in no group"],
)
def test_a_spot_warning_for_a_node_not_ours_leaves_it_alone(
    spot: Spot, group_tags: dict[str, str] | None, why: str
) -> None:
    instance = "i-0fedcba9876543210"
    if group_tags is not None:
        make_asg("legacy", tags=group_tags, desired=1)
        instance = instance_of("legacy")
    put(spot.rig, the_node(instance), web(0))
    before = len(spot.rig.server.requests)

    warning = spot_warning("spot-interruption.json", instance)
    owners_here = replace(owners(), cluster_name="prod")
    drainer = replace(spot.drainer(), owners=owners_here)
    result = drainer.interruption(warning.request)

    assert (result.outcome, result.problem) == (
        DrainOutcome.NOT_OURS,
        why.format(instance=instance),
    )
    assert spot.queued() == []
    assert len(spot.rig.server.requests) == before  # the cluster was not even asked
    assert spot.rig.pods_on(NODE) == ["default/web-0"]


def test_a_lifecycle_action_of_a_group_not_ours_is_neither_drained_nor_completed(
    rig: Rig,
) -> None:
    make_asg("batch", desired=1)  # not opted in, not hooked by the stack
    put(rig, the_node(), web(0))
    action = replace(lifecycle_action(), group="batch")

    result = rig.drainer().lifecycle_action(action)

    assert (result.outcome, result.node_group) == (DrainOutcome.NOT_OURS, "batch")
    assert rig.pods_on(NODE) == ["default/web-0"]
    assert rig.recorder.calls == []  # its hook's own timeout decides


def test_a_lifecycle_action_of_another_deployments_hook_is_left_to_that_deployment(
    rig: Rig,
) -> None:
    # Given two deployments whose drain hooks are both on web (the stack hooks it by name)
    make_asg("web", desired=1)
    put(rig, the_node(), web(0))
    action = replace(lifecycle_action(), hook="nodescaler-other-drain")

    # When this deployment's drain is handed the other deployment's action
    result = rig.drainer().lifecycle_action(action)

    # Then it neither drains the node nor answers the action: the other drain does
    assert (result.outcome, result.problem) == (
        DrainOutcome.NOT_OURS,
        "lifecycle hook nodescaler-other-drain is not this deployment's (nodescaler-drain)",
    )
    assert rig.pods_on(NODE) == ["default/web-0"]
    assert rig.recorder.calls == []


def terminate(instance: str) -> None:
    client("autoscaling").terminate_instance_in_auto_scaling_group(
        InstanceId=instance, ShouldDecrementDesiredCapacity=True
    )


def test_a_hung_api_server_is_given_up_on_at_the_timeout(rig: Rig) -> None:
    put(rig, the_node())
    cluster = KubernetesDrain(KubeconfigConnection(rig.config), timeout_seconds=0.2)
    with rig.server.failing(Fault.SLOW), pytest.raises(KubernetesUnavailableError) as caught:
        cluster.find_node(INSTANCE)
    assert str(caught.value) == "Kubernetes API: no answer within 0.2s"
    assert cluster.find_node(INSTANCE) == NODE  # and asked again once it answers


# --- forged events: anyone allowed to invoke the drain function could send one -------------
# A terminate hook holds its instance in Terminating:Wait until the action is completed
# (https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html), and
# DescribeAutoScalingInstances says so (`LifecycleActionRecorder`, for moto); EC2 warns only
# Spot Instances, whose DescribeInstances has "InstanceLifecycle": "spot"
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html).


def untouched(rig: Rig) -> None:
    assert rig.pods_on(NODE) == ["default/web-0"]
    assert rig.cluster.objects["nodes"][("", NODE)]["spec"].get("unschedulable") is None
    assert rig.cluster.evictions == []
    assert rig.recorder.calls == []  # nor answered: the hook (if any) decides


def test_a_lifecycle_action_for_an_instance_in_service_is_refused_and_its_node_left_alone(
    rig: Rig,
) -> None:
    # Given web's instance in service: no hook holds it
    make_asg("web", desired=1)
    instance = instance_of("web")
    put(rig, the_node(instance), web(0))

    # When a lifecycle action names it
    result = rig.drainer().lifecycle_action(lifecycle_action(instance))

    # Then the drain refuses it, saying why, and touches nothing
    assert (result.outcome, result.node_group, result.problem) == (
        DrainOutcome.UNCONFIRMED,
        "web",
        f"lifecycle action for instance {instance} in node group web: the instance is "
        "InService, not held by a terminate hook",
    )
    assert result.message == f"refused: {result.problem}; its node is left alone"
    untouched(rig)


def test_a_lifecycle_action_naming_another_group_than_its_instances_is_refused(
    rig: Rig,
) -> None:
    # Given api's instance held by api's hook, and web hooked by the stack
    make_asg("api", desired=1)
    instance = instance_of("api")
    rig.recorder.hold("api", "api-hook", instance, lifecycle_action().token)
    put(rig, the_node(instance), web(0))

    # When a lifecycle action for it names web (whose drain hook this deployment answers)
    result = rig.drainer().lifecycle_action(lifecycle_action(instance))

    assert (result.outcome, result.problem) == (
        DrainOutcome.UNCONFIRMED,
        f"lifecycle action for instance {instance} in node group web: the instance is in "
        "node group api",
    )
    untouched(rig)


def test_a_lifecycle_action_for_an_instance_in_no_group_is_refused(rig: Rig) -> None:
    put(rig, the_node(), web(0))

    result = rig.drainer().lifecycle_action(lifecycle_action())  # nothing holds it

    assert (result.outcome, result.problem) == (
        DrainOutcome.UNCONFIRMED,
        f"lifecycle action for instance {INSTANCE} in node group web: Auto Scaling has the "
        "instance in no group",
    )
    untouched(rig)


@pytest.mark.parametrize("sample", ["spot-interruption.json", "rebalance-recommendation.json"])
def test_a_spot_warning_for_an_on_demand_instance_is_refused_and_nothing_queued(
    spot: Spot, sample: str
) -> None:
    # Given a managed group's on-demand instance
    make_asg("web", tags=OPTED_IN, desired=1)
    instance = instance_of("web")
    put(spot.rig, the_node(instance), web(0))

    # When a Spot warning names it
    warning = spot_warning(sample, instance)
    result = spot.drainer().interruption(warning.request)

    # Then it is refused: no replacement asked for, the node left alone
    what = sample.removesuffix(".json").replace("-", " ")
    assert (result.outcome, result.problem) == (
        DrainOutcome.UNCONFIRMED,
        f"{what} for instance {instance} in node group web: its market is on-demand, not spot",
    )
    assert spot.queued() == []
    untouched(spot.rig)


# EC2 issues an interruption warning two minutes before it interrupts the instance
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html),
# and a rebalance recommendation when it raises the risk, before that warning
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html):
# one kept and sent again later, its instance still running, is no longer current.
@pytest.mark.parametrize("sample", ["spot-interruption.json", "rebalance-recommendation.json"])
def test_a_replayed_spot_warning_for_a_running_spot_instance_is_refused_and_nothing_queued(
    spot: Spot, sample: str
) -> None:
    # Given a managed group's running Spot Instance, and a warning for it issued an hour ago
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    put(spot.rig, the_node(instance), web(0))
    warning = spot_warning(sample, instance).request
    replayed = replace(warning, at=spot.rig.time.clock.now() - timedelta(hours=1))

    # When that warning arrives again
    result = spot.drainer().interruption(replayed)

    # Then it is refused, saying why: no replacement asked for, the node left alone
    what = sample.removesuffix(".json").replace("-", " ")
    assert (result.outcome, result.problem) == (
        DrainOutcome.UNCONFIRMED,
        f"{what} for instance {instance} in node group web: issued at 2026-03-02T11:00:00Z, "
        "3600 s ago, longer than the 300 s a current one can be: a replay",
    )
    assert spot.queued() == []
    untouched(spot.rig)


def test_when_auto_scaling_cannot_be_read_nothing_is_done_and_the_event_is_kept(
    rig: Rig,
) -> None:
    put(rig, the_node(), web(0))
    action = rig.held()

    refused = refusing(client("autoscaling"), "autoscaling", "DescribeAutoScalingInstances")
    with refused, pytest.raises(EventUnconfirmableError) as caught:
        rig.drainer().lifecycle_action(action)

    # read again, the hook held by heartbeats, for as long as the drain had; then given up
    assert rig.time.slept[:4] == [5, 10, 20, 40] and max(rig.time.slept) == 60
    assert rig.time.elapsed <= 600
    assert str(caught.value).startswith(
        f"lifecycle action for instance {INSTANCE}: AWS could not be read to confirm it "
        "(ClientError: An error occurred (AccessDenied)"
    )
    assert len(rig.recorder.heartbeats()) == len(rig.time.slept)
    assert rig.recorder.completed() == []  # not answered: the hook's timeout decides
    rig.recorder.calls.clear()
    untouched(rig)
    assert rig.recorder.held


# --- a passing outage: the hook is held, the node drained ----------------------------------
# Auto Scaling lets a terminating instance go at the hook's heartbeat timeout (its default
# result) unless the action is completed; RecordLifecycleActionHeartbeat restarts that
# timeout (https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks.html,
# https://docs.aws.amazon.com/autoscaling/ec2/userguide/completing-lifecycle-hooks.html).
STACK_HOOK_TIMEOUT = timedelta(minutes=5)  # infra/drain.py's HOOK_HEARTBEAT_TIMEOUT


def hook_that_times_out(rig: Rig) -> None:
    """The stack's hook: it lets its instance go five minutes after the last heartbeat."""
    rig.recorder = LifecycleActionRecorder(rig.time.clock.now, STACK_HOOK_TIMEOUT)
    rig.time.always.append(lambda: rig.recorder.expire_overdue(rig.time.clock.now()))


def test_given_auto_scaling_unreadable_for_minutes_the_hook_is_held_and_the_node_drained(
    rig: Rig,
) -> None:
    # Given the stack's hook holding web's instance, and DescribeAutoScalingInstances
    # refused for the first six minutes (longer than the hook's heartbeat timeout)
    hook_that_times_out(rig)
    put(rig, the_node(), web(0))
    action = rig.held()
    outage = ExitStack()
    outage.enter_context(
        refusing(client("autoscaling"), "autoscaling", "DescribeAutoScalingInstances")
    )
    rig.time.at(360, outage.close)

    # When the lifecycle action arrives
    with outage:
        result = rig.drainer().lifecycle_action(action)

    # Then the hook was kept holding the instance, and its node was drained before it went
    assert result.outcome is DrainOutcome.DRAINED
    assert rig.pods_on(NODE) == []
    assert rig.recorder.heartbeats() and all(c.accepted for c in rig.recorder.calls)
    assert rig.completed() == ["CONTINUE"]


def test_given_an_opted_in_groups_tags_unreadable_for_minutes_its_node_is_still_drained(
    rig: Rig,
) -> None:
    # Given an opted-in group's instance held by the stack's hook, and DescribeAutoScalingGroups
    # (which says whose group it is) refused for the first six minutes
    hook_that_times_out(rig)
    make_asg("api", tags=OPTED_IN, desired=1)
    instance = instance_of("api")
    put(rig, the_node(instance), web(0))
    action = replace(lifecycle_action(instance), group="api")
    rig.recorder.hold("api", action.hook, instance, action.token)
    outage = ExitStack()
    refused = refusing(client("autoscaling"), "autoscaling", "DescribeAutoScalingGroups")
    outage.enter_context(refused)
    rig.time.at(360, outage.close)

    # When its lifecycle action arrives
    with outage:
        result = rig.drainer().lifecycle_action(action)

    # Then its node was drained before the instance went, the hook held meanwhile
    assert result.outcome is DrainOutcome.DRAINED
    assert rig.pods_on(NODE) == []
    assert rig.recorder.heartbeats() and rig.completed() == ["CONTINUE"]
    assert all(c.accepted for c in rig.recorder.calls)


def test_given_the_api_server_refusing_us_for_half_a_minute_a_spot_drain_still_evicts(
    spot: Spot,
) -> None:
    # Given a managed group's Spot Instance, and the API server refusing our credentials
    # for the first half minute of its two
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    put(spot.rig, the_node(instance), web(0))
    spot.rig.server.token = "rotated"
    spot.rig.time.at(30, lambda: setattr(spot.rig.server, "token", "secret"))

    # When its interruption warning arrives
    result = spot.drainer().interruption(spot_warning("spot-interruption.json", instance).request)

    # Then the drain went on once it could, before EC2 reclaims the instance
    assert result.outcome is DrainOutcome.DRAINED
    assert spot.rig.pods_on(NODE) == []


def test_a_rebalance_drain_cut_by_an_outage_after_its_cordon_still_uncordons_at_the_deadline(
    spot: Spot,
) -> None:
    # Given a Spot Instance that stays in service, and the API server refusing our
    # credentials for half a minute right after the drain cordons its node
    (instance,) = make_spot_asg("web", tags=OPTED_IN)
    put(spot.rig, the_node(instance), web(0))
    server, cluster = spot.rig.server, spot.rig.cluster
    stored, cut = cluster.put, []

    def cordon_then_outage(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        if kind == "nodes" and obj["spec"].get("unschedulable") and not cut:
            cut.append(server.token)
            server.token = "rotated"
        return stored(kind, obj)

    cluster.put = cordon_then_outage  # type: ignore[method-assign]
    spot.rig.time.at(30, lambda: setattr(server, "token", "secret"))

    # When its rebalance recommendation arrives
    warning = spot_warning("rebalance-recommendation.json", instance)
    result = spot.drainer(drain_timeout=timedelta(minutes=10)).interruption(warning.request)

    # Then the node the drain cordoned is schedulable again once the instance stays
    assert cut and (result.outcome, result.uncordoned) == (DrainOutcome.DRAINED, True)
    assert cluster.objects["nodes"][("", NODE)]["spec"]["unschedulable"] is False


def test_given_the_api_server_refusing_us_for_minutes_the_drain_resumes_and_completes(
    rig: Rig,
) -> None:
    # Given the stack's hook holding web's instance, and the API server refusing our
    # credentials for the first six minutes (a token being rotated)
    hook_that_times_out(rig)
    put(rig, the_node(), web(0))
    rig.server.token = "rotated"
    rig.time.at(360, lambda: setattr(rig.server, "token", "secret"))

    # When the lifecycle action arrives
    result = rig.drainer().lifecycle_action(rig.held())

    # Then the drain went on once it could, and the action was completed once, drained
    assert (result.outcome, result.lifecycle_result) == (
        DrainOutcome.DRAINED,
        LifecycleResult.CONTINUE,
    )
    assert rig.pods_on(NODE) == []
    assert rig.completed() == ["CONTINUE"] and all(c.accepted for c in rig.recorder.calls)


def test_given_pods_cluster_autoscaler_would_not_move_the_drain_refuses_them_and_names_why(
    rig: Rig,
) -> None:
    # as `kubectl drain` without --force (and CA's drainability rules: FAQ, "What types of
    # pods can prevent CA from removing a node?"): a pod with no controller, one with an
    # emptyDir, a kube-system pod no budget selects stay; the lifecycle action is completed
    # as a drain that did not finish, never as drained
    # The kube-system agent was made 59 minutes before the drain began: within its
    # --blocking-system-pod-distruption-timeout (1h); an hour-old one's is evicted
    cache = pod("cache-0", NODE, spec={"volumes": [{"name": "scratch", "emptyDir": {}}]})
    agent = pod("agent", NODE, namespace="kube-system", labels={"app": "agent"})
    agent["metadata"]["creationTimestamp"] = created(T0 - timedelta(minutes=59))
    old_agent = pod("old-agent", NODE, namespace="kube-system", labels={"app": "agent"})
    old_agent["metadata"]["creationTimestamp"] = created(T0 - timedelta(minutes=60, seconds=1))
    put(
        rig,
        the_node(),
        ("nodes", node("other")),
        web(0),
        ("pods", pod("debug", NODE, owner=None)),
        ("pods", cache),
        ("pods", agent),
        ("pods", old_agent),
        ("pods", pod("coredns-1", NODE, namespace="kube-system", labels={"app": "dns"})),
        ("poddisruptionbudgets", pdb("dns", {"app": "dns"}, "kube-system", maxUnavailable=1)),
    )

    result = rig.drainer(timeout_result=LifecycleResult.ABANDON).lifecycle_action(rig.held())

    assert result.outcome is DrainOutcome.TIMED_OUT
    evicted = ["default/web-0", "kube-system/coredns-1", "kube-system/old-agent"]
    assert sorted(result.evicted) == evicted
    assert rig.pods_on(NODE) == ["default/cache-0", "default/debug", "kube-system/agent"]
    until = created(T0 + timedelta(minutes=1))
    assert set(result.remaining) == {
        PodNote("default/debug", f"not evicted: {NOT_REPLICATED}"),
        PodNote("default/cache-0", "not evicted: local storage (an emptyDir or hostPath volume)"),
        PodNote(
            "kube-system/agent",
            "not evicted: a kube-system pod no PodDisruptionBudget selects, for 1h after its "
            f"creation: until {until}",
        ),
    }
    assert "default/debug not evicted: not managed by a controller" in result.message
    assert rig.completed() == ["ABANDON"]  # the drain's timeout result, not a drained CONTINUE
    assert result.seconds == 600


def test_given_a_refused_pod_its_owner_deletes_the_drain_then_completes_as_drained(
    rig: Rig,
) -> None:
    put(rig, the_node(), web(0), ("pods", pod("debug", NODE, owner=None)))
    rig.time.at(30, lambda: rig.cluster.delete_pod("default", "debug"))

    result = rig.drainer(timeout_result=LifecycleResult.ABANDON).lifecycle_action(rig.held())

    assert (result.outcome, result.evicted, result.seconds) == (
        DrainOutcome.DRAINED,
        ("default/web-0",),
        30,
    )
    assert ("default", "debug", 30) not in rig.cluster.evictions  # never evicted by the drain
    assert rig.completed() == ["CONTINUE"]
