"""EKS managed node groups at zero, read as Cluster Autoscaler reads them: their labels and
taints from DescribeNodegroup (many such groups' ASGs carry no node-template tags), with a
node-template tag winning where it names the same key, and the tags alone when EKS can't be
read (cluster-autoscaler/proposals/circumvent-tag-limit-eks.md, "Design": the ASG tag's
value is kept for a duplicate key; without eks:DescribeNodegroup, the ASG tags alone)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import CallCounter, client, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.e2e.test_kubernetes_path import (  # noqa: F401 (api_server: a fixture)
    BATCH_POLICY,
    api_server,
    group_at_zero,
    launch_template,
)
from tests.kube import kubeconfig, pod

BATCH = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
TOLERATES_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def managed_group_at_zero(
    name: str,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    tags: dict[str, str],
    max_size: int = 20,
) -> str:
    """An EKS managed node group of m5.large at zero on moto, and its opted-in ASG (with
    only the tags given besides EKS's own): the ASG's name."""
    eks = client("eks")
    if "prod" not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name="prod",
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        )
    created = eks.create_nodegroup(
        clusterName="prod",
        nodegroupName=name,
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
        instanceTypes=["m5.large"],
        labels=labels,
        taints=taints,
        scalingConfig={"minSize": 0, "maxSize": max_size, "desiredSize": 0},
    )
    asg = str(created["nodegroup"]["resources"]["autoScalingGroups"][0]["name"])
    eks_tags = {"eks:cluster-name": "prod", "eks:nodegroup-name": name}
    make_asg(asg, tags=BATCH | eks_tags | tags, max_size=20)
    return asg


def eks_desired(name: str) -> int:
    found = client("eks").describe_nodegroup(clusterName="prod", nodegroupName=name)
    return int(found["nodegroup"]["scalingConfig"]["desiredSize"])


@pytest.fixture
def deploy(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,  # noqa: F811
    tmp_path: Path,
) -> Callable[..., Deployment]:
    """Deploys the functions with the batch policy, reading the API server, with `settings`."""
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    return lambda **settings: Deployment(
        policies, calls, clock, {"KUBECONFIG_PATH": str(config)} | settings
    )


@pytest.fixture
def deployment(deploy: Callable[..., Deployment]) -> Deployment:
    return deploy()


def test_a_managed_group_at_zero_with_no_tags_takes_pods_its_eks_labels_and_taints_admit(
    deployment: Deployment,
    api_server: KubeApiServer,  # noqa: F811
    output: Any,
) -> None:
    # Given a GPU node group at zero whose labels and taint only EKS knows (no ASG tags)
    managed_group_at_zero("gpu", {"accelerator": "a10"}, [GPU_TAINT], {})
    # and a pod that selects its label and tolerates its taint, and one that does not
    wants_gpu = {"nodeSelector": {"accelerator": "a10"}, "tolerations": TOLERATES_GPU}
    api_server.cluster.put("pods", pod("trainer", cpu="500m", spec=wants_gpu))
    api_server.cluster.put("pods", pod("plain", cpu="500m"))
    # When evaluated
    deployment.tick()
    # Then the group grows for the pod it can take, and the plain pod is left (tainted)
    assert eks_desired("gpu") == 1
    details = [
        m["detail"]
        for line in output().logs
        if "decision" in line
        for m in line["decision"]["metrics"]
    ]
    assert any("taint nvidia.com/gpu" in d for d in details), details


def test_a_node_template_tag_wins_over_what_eks_says_for_the_same_key(
    deployment: Deployment,
    api_server: KubeApiServer,  # noqa: F811
) -> None:
    # Given EKS says accelerator=a10, and the ASG's node-template tag says t4
    tag = {"k8s.io/cluster-autoscaler/node-template/label/accelerator": "t4"}
    managed_group_at_zero("gpu", {"accelerator": "a10"}, [], tag)
    api_server.cluster.put(
        "pods", pod("a10-job", cpu="500m", spec={"nodeSelector": {"accelerator": "a10"}})
    )
    deployment.tick()
    # Then the tag's value is the node's: an a10 pod finds no place there
    assert eks_desired("gpu") == 0
    api_server.cluster.put(
        "pods", pod("t4-job", cpu="500m", spec={"nodeSelector": {"accelerator": "t4"}})
    )
    deployment.clock.advance(minutes=1)
    deployment.tick()
    assert eks_desired("gpu") == 1


def test_a_managed_group_grows_no_further_than_its_eks_scaling_config_and_says_so(
    deployment: Deployment,
    api_server: KubeApiServer,  # noqa: F811
    output: Any,
) -> None:
    # Given a managed group whose node group EKS bounds at 2 (scalingConfig maxSize), while
    # its ASG says 20 (edited by hand): EKS refuses a desiredSize above maxSize
    # (https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html).
    # Cluster Autoscaler reads the ASG's bounds alone (its managed node group cache keeps
    # labels, taints and tags: cloudprovider/aws/managed_nodegroup_cache.go); nodescaler
    # resizes through UpdateNodegroupConfig, so it keeps to EKS's.
    managed_group_at_zero("general", {}, [], {}, max_size=2)
    # and five pods that each need a node of their own
    for i in range(5):
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1500m"))
    # When evaluated
    deployment.tick()
    # Then it asks EKS for 2 nodes, not 5, and the decision names EKS's bound
    assert eks_desired("general") == 2
    reasons = [line["decision"]["reason"] for line in output().logs if "decision" in line]
    assert any(
        "at the maximum 2 (EKS node group general of cluster prod's scalingConfig)" in r
        for r in reasons
    ), reasons


def test_pods_a_managed_group_may_not_take_by_its_eks_bounds_go_to_the_next_group(
    deploy: Callable[..., Deployment],
    api_server: KubeApiServer,  # noqa: F811
) -> None:
    # Given the preferred group, managed, bounded at 1 by EKS (its ASG says 20), and a
    # self-managed group of the same nodes
    managed = managed_group_at_zero("general", {}, [], {}, max_size=1)
    launch_template("m5-large", "m5.large")
    group_at_zero("other", "m5-large")
    prefer = f'[{{"name": "priority", "priorities": {{"10": ["{managed}"], "1": [".*"]}}}}]'
    deployment = deploy(EXPANDERS=prefer)
    # and three pods that each need a node
    for i in range(3):
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1500m"))
    # When evaluated
    deployment.tick()
    # Then the managed group takes the one node EKS allows, the other group the rest
    assert eks_desired("general") == 1
    other = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["other"])
    assert other["AutoScalingGroups"][0]["DesiredCapacity"] == 2
