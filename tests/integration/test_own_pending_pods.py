"""A queue policy without a PendingPods metric, evaluated against moto and the loopback
API server through the real `kubernetes` client: its workers that wait for room grow the
group (`domain.scaling.own_pods`), and an unreadable cluster never holds its scale-in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from nodescaler.adapters.aws.instance_types import Ec2InstanceTypes
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy, SqsQueueMetric
from nodescaler.domain.scale_up.expanders import LeastWasteExpander
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler.service.evaluation import ClusterSay, Evaluator
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers
from nodescaler_sandbox.kube.apiserver import Cluster, Fault, KubeApiServer

from tests.aws import client, desired_capacity, fill_queue, make_asg, make_state_table
from tests.builders import UNLIMITED, VirtualClock, queue_metric
from tests.kube import kubeconfig, node, pod

TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "jobs"}


def jobs_policy(**spec: object) -> NodeGroupPolicy:
    """The issue's first queue policy: 10 tasks a node (a node fits 3 workers)."""
    document = {
        "minReplicas": 0,
        "maxReplicas": 50,
        "metrics": [queue_metric("jobs", per_node=10)],
        "behavior": UNLIMITED,
        **spec,
    }
    return NodeGroupPolicy.model_validate({"metadata": {"name": "jobs"}, "spec": document})


@dataclass
class World:
    evaluator: Evaluator
    server: KubeApiServer


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    # Given jobs-ng at 2 nodes of 4 cpu / 16 GiB, each running 3 workers of 1 cpu / 5 GiB
    # (the most that fit), 20 tasks queued (2 nodes at 10 a node) and 4 workers pending
    make_state_table("state")
    client("sqs").create_queue(QueueName="jobs")
    fill_queue("jobs", 20)
    make_asg("jobs-ng", tags=TAGS, desired=2)
    described = client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"][0]
    served = Cluster()
    for n, instance in enumerate(i["InstanceId"] for i in described["Instances"]):
        served.put(
            "nodes",
            node(
                f"n{n}", None, cpu="4", memory="16Gi", provider_id=f"aws:///eu-west-1a/{instance}"
            ),
        )
        for w in range(3):
            served.put("pods", pod(f"w{n}-{w}", f"n{n}", cpu="1", memory="5Gi", owner="Job"))
    for w in range(4):
        served.put("pods", pod(f"waiting-{w}", cpu="1", memory="5Gi", owner="Job"))
    clock = VirtualClock()
    groups = AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames())
    book = PolicyBook({"jobs": jobs_policy(**getattr(request, "param", {}))})
    shapes = Ec2InstanceTypes(client("ec2"), client("autoscaling"), client("eks"), clock=clock)
    with KubeApiServer(served) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kubeconfig", server.url))
        planner = PendingPodsPlanner(groups, book, shapes, [LeastWasteExpander()])
        view = KubernetesClusterView(KubernetesCluster(connection), pending=planner)
        evaluator = Evaluator(
            node_groups=groups,
            producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
            state=DynamoStateStore(client("dynamodb"), "state", audit_ttl=timedelta(days=1)),
            policies=book,
            clock=clock,
            cluster=ClusterSay(view=view),
        )
        yield World(evaluator, server)


def test_given_workers_waiting_for_room_then_the_queue_group_grows_for_them(world: World) -> None:
    # When it is evaluated
    result = world.evaluator.evaluate("jobs-ng", "m-0")
    # Then the queue's 2 nodes and the 4 waiting workers' 2 more: 4, and the reason says why
    assert desired_capacity("jobs-ng") == 4
    assert result.decision is not None
    assert result.decision.reason.startswith(
        "scale up 2 → 4 | own pending pods: 4 pending pods: +2 nodes here, +0 in other groups"
    )
    assert "its policy has no PendingPods metric" in result.decision.reason


@pytest.mark.parametrize("world", [{"ownPendingPods": False}], indirect=True)
def test_given_own_pending_pods_turned_off_then_the_queue_alone_decides(world: World) -> None:
    result = world.evaluator.evaluate("jobs-ng", "m-0")
    assert desired_capacity("jobs-ng") == 2
    assert result.decision is not None
    assert [o.name for o in result.decision.metrics] == ["jobs"]


def test_given_the_api_server_down_then_the_queue_still_scales_in(world: World) -> None:
    # Given the queue drained to 10 tasks (1 node) and the API server refusing connections
    client("sqs").purge_queue(QueueUrl=client("sqs").get_queue_url(QueueName="jobs")["QueueUrl"])
    fill_queue("jobs", 10)
    with world.server.failing(Fault.DOWN):
        result = world.evaluator.evaluate("jobs-ng", "m-0")
    # Then the unread cluster is no vote and no hold: the queue's scale-in to 1 is made
    # (which instance leaves is Auto Scaling's choice: the cluster can't say)
    assert result.decision is not None
    assert result.decision.desired == 1
    (own,) = [o for o in result.decision.metrics if o.name == "own pending pods"]
    assert own.status == "abstained" and "no vote" in own.detail
