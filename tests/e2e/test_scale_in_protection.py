"""Cluster Autoscaler's annotations, honoured through ASG scale-in protection: a node
annotated scale-down-disabled, or running a pod that is not safe to evict, keeps its
instance; the protection goes when the annotation does, and a scale-in it blocks says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.kube import kubeconfig, node, pod

RESERVED = """
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: reserved}
spec:
  minReplicas: 1
  maxReplicas: 10
  metrics:
    - type: CapacityReservation
      capacityReservation: {resource: cpu}
      target: {type: Utilization, averageUtilization: 60}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
      policies: [{type: Percent, value: 100, periodSeconds: 60}]
"""
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


@pytest.fixture
def api_server() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


def protection() -> dict[str, bool]:
    (group,) = client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=["web-nodes"]
    )["AutoScalingGroups"]
    return {i["InstanceId"]: i["ProtectedFromScaleIn"] for i in group["Instances"]}


@pytest.fixture
def web(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> tuple[Deployment, list[str]]:
    """Four 16-core nodes with a 1-core pod each: far below 60 %, so the group shrinks."""
    (policies / "reserved.yaml").write_text(RESERVED)
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    deployment = Deployment(policies, calls, clock, {"KUBECONFIG_PATH": str(config)})
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "reserved"}
    make_asg("web-nodes", tags=tags, desired=4, min_size=1, max_size=10)
    instances = sorted(protection())
    for i, instance in enumerate(instances):
        api_server.cluster.put(
            "nodes", node(f"n{i}", None, provider_id=f"aws:///eu-west-1a/{instance}")
        )
        api_server.cluster.put("pods", pod(f"app-{i}", f"n{i}"))
    return deployment, instances


def annotate(api_server: KubeApiServer, kind: str, name: str, annotations: dict[str, str]) -> None:
    found = api_server.cluster.get(kind, ("default", name) if kind == "pods" else ("", name))
    found["metadata"]["annotations"] = annotations
    api_server.cluster.put(kind, found)


def test_annotated_nodes_are_protected_and_the_blocked_scale_in_says_so(
    web: tuple[Deployment, list[str]], api_server: KubeApiServer, output: Any
) -> None:
    deployment, instances = web
    annotate(api_server, "nodes", "n0", {SCALE_DOWN_DISABLED: "true"})
    annotate(api_server, "pods", "app-1", {SAFE_TO_EVICT: "false"})
    deployment.tick()

    # 4 cores reserved of 64 wants 1 node; the two protected stay, the others go
    assert desired_capacity("web-nodes") == 2
    assert protection() == {instances[0]: True, instances[1]: True}
    (decision,) = [line["decision"] for line in output().logs if "decision" in line]
    assert decision["limited_by"] == ["scale-in-protection"]
    assert "2 instances are protected from scale-in" in decision["reason"].split(" | ")


def test_protection_goes_with_the_annotation_and_others_protection_stays(
    web: tuple[Deployment, list[str]], api_server: KubeApiServer
) -> None:
    deployment, instances = web
    client("autoscaling").set_instance_protection(  # an operator's own protection
        AutoScalingGroupName="web-nodes", InstanceIds=[instances[3]], ProtectedFromScaleIn=True
    )
    annotate(api_server, "nodes", "n0", {SCALE_DOWN_DISABLED: "true"})
    annotate(api_server, "nodes", "n3", {SCALE_DOWN_DISABLED: "true"})
    deployment.tick()
    assert protection() == {instances[0]: True, instances[3]: True}

    annotate(api_server, "nodes", "n0", {})
    annotate(api_server, "nodes", "n3", {})
    deployment.clock.advance(minutes=1)
    deployment.tick()
    protected = protection()
    assert protected.get(instances[0]) is not True  # released (or the instance was scaled in)
    assert protected[instances[3]] is True  # not ours to release


def test_an_unreachable_cluster_changes_no_protection(
    web: tuple[Deployment, list[str]], api_server: KubeApiServer
) -> None:
    deployment, instances = web
    annotate(api_server, "nodes", "n0", {SCALE_DOWN_DISABLED: "true"})
    deployment.tick()
    assert protection()[instances[0]] is True
    api_server.__exit__(None, None, None)  # the API server goes away
    deployment.clock.advance(minutes=1)
    deployment.tick()
    assert protection()[instances[0]] is True
