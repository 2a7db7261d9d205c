"""AsgNodeGroups against moto: tag opt-in, paged discovery, and resizing ASGs and EKS node groups."""

from __future__ import annotations

import pytest
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.domain.groups.optin import TagNames
from nodescaler.errors import RefusedError

from tests.aws import CallCounter, client, make_asg

OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}


def node_groups(calls: CallCounter | None = None, cluster: str = "") -> AsgNodeGroups:
    autoscaling = client("autoscaling")
    if calls:
        calls.watch(autoscaling)
    return AsgNodeGroups(autoscaling, client("eks"), tag_names=TagNames(), cluster_name=cluster)


def test_given_tagged_and_untagged_groups_then_only_opted_in_ones_are_discovered() -> None:
    make_asg("managed", tags=OPTED_IN, desired=2)
    make_asg("untagged")
    make_asg("disabled", tags=OPTED_IN | {"nodescaler/enabled": "false"})
    make_asg("other-cluster", tags=OPTED_IN | {"nodescaler/cluster": "blue"})
    make_asg("this-cluster", tags=OPTED_IN | {"nodescaler/cluster": "green"})
    # a deployment of no cluster (allGroups) leaves the groups that name a cluster to it
    assert [g.name for g in node_groups().discover()] == ["managed"]
    assert [g.name for g in node_groups(cluster="green").discover()] == ["this-cluster"]


def test_given_250_managed_groups_then_a_discovery_makes_at_most_3_describe_calls(
    calls: CallCounter,
) -> None:
    for i in range(250):
        make_asg(f"ng-{i:03d}", tags=OPTED_IN)
    make_asg("untagged")
    groups = node_groups(calls).discover()
    assert len(groups) == 250
    assert calls.calls["DescribeAutoScalingGroups"] <= 3


def test_a_discovered_group_carries_its_sizes_and_in_service_count() -> None:
    make_asg("managed", tags=OPTED_IN, desired=3, min_size=1, max_size=9)
    (group,) = node_groups().discover()
    assert (group.desired, group.min_size, group.max_size, group.in_service) == (3, 1, 9, 3)
    assert not group.is_eks_managed


def test_given_a_plain_asg_then_set_desired_uses_set_desired_capacity() -> None:
    make_asg("managed", tags=OPTED_IN, desired=1)
    groups = node_groups()
    groups.set_desired(groups.get("managed"), 4)  # type: ignore[arg-type]
    assert groups.get("managed").desired == 4  # type: ignore[union-attr]


def eks_node_group(cluster: str, name: str, desired: int = 2) -> str:
    """An EKS managed node group on moto; returns the name of its Auto Scaling group."""
    eks = client("eks")
    if cluster not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name=cluster,
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        )
    created = eks.create_nodegroup(
        clusterName=cluster,
        nodegroupName=name,
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
        scalingConfig={"minSize": 0, "maxSize": 20, "desiredSize": desired},
    )
    return str(created["nodegroup"]["resources"]["autoScalingGroups"][0]["name"])


def eks_desired(cluster: str, name: str) -> int:
    found = client("eks").describe_nodegroup(clusterName=cluster, nodegroupName=name)
    return int(found["nodegroup"]["scalingConfig"]["desiredSize"])


def test_given_an_eks_managed_node_group_then_set_desired_updates_the_node_group() -> None:
    asg = eks_node_group("prod", "general")
    make_asg(
        asg,
        tags=OPTED_IN | {"eks:cluster-name": "prod", "eks:nodegroup-name": "general"},
        desired=2,
    )
    groups = node_groups()
    group = groups.get(asg)
    assert group is not None and group.is_eks_managed
    groups.set_desired(group, 7)
    assert eks_desired("prod", "general") == 7


def test_given_an_asg_tagged_with_another_node_groups_name_then_that_node_group_is_not_resized(
    calls: CallCounter,
) -> None:
    # The attack: an opted-in ASG claims to be payments-prod, which never opted in.
    eks_node_group("prod", "payments-prod", desired=6)
    make_asg(
        "attacker",
        tags=OPTED_IN | {"eks:cluster-name": "prod", "eks:nodegroup-name": "payments-prod"},
        desired=6,
    )
    groups = node_groups()
    with pytest.raises(RefusedError, match="refusing to resize a node group this ASG is not"):
        groups.set_desired(groups.get("attacker"), 2)  # type: ignore[arg-type]
    assert eks_desired("prod", "payments-prod") == 6


def test_given_an_eks_node_group_of_another_cluster_then_it_is_not_resized() -> None:
    asg = eks_node_group("staging", "general")
    make_asg(
        asg,
        tags=OPTED_IN
        | {"nodescaler/cluster": "prod", "eks:cluster-name": "staging"}
        | {"eks:nodegroup-name": "general"},
        desired=2,
    )
    groups = node_groups(cluster="prod")
    with pytest.raises(RefusedError, match="of cluster staging, not of prod"):
        groups.set_desired(groups.get(asg), 5)  # type: ignore[arg-type]
    assert eks_desired("staging", "general") == 2


def test_given_an_untagged_group_then_set_desired_refuses_and_writes_nothing(
    calls: CallCounter,
) -> None:
    make_asg("untagged", desired=1)
    groups = node_groups(calls)
    with pytest.raises(PermissionError, match="node group untagged is not opted in"):
        groups.set_desired(groups.get("untagged"), 5)  # type: ignore[arg-type]
    assert calls.calls["SetDesiredCapacity"] == 0
    assert groups.get("untagged").desired == 1  # type: ignore[union-attr]


def test_get_returns_none_for_an_unknown_group() -> None:
    assert node_groups().get("nope") is None


def test_an_eks_managed_node_groups_scale_in_terminates_the_chosen_instances_one_less_each() -> (
    None
):
    asg = eks_node_group("prod", "general", desired=3)
    make_asg(
        asg,
        tags=OPTED_IN | {"eks:cluster-name": "prod", "eks:nodegroup-name": "general"},
        desired=3,
    )
    groups = node_groups()
    group = groups.get(asg)
    assert group is not None and group.is_eks_managed
    chosen = sorted(group.instance_ids)[:2]
    groups.remove_instances(group, chosen)
    after = groups.get(asg)
    assert after is not None
    assert after.desired == 1
    assert after.instance_ids == frozenset(group.instance_ids) - set(chosen)


def test_an_asg_claiming_another_node_group_has_no_instance_terminated() -> None:
    eks_node_group("prod", "payments-prod", desired=2)
    make_asg(
        "attacker",
        tags=OPTED_IN | {"eks:cluster-name": "prod", "eks:nodegroup-name": "payments-prod"},
        desired=2,
    )
    groups = node_groups()
    group = groups.get("attacker")
    assert group is not None
    with pytest.raises(RefusedError, match="refusing to resize a node group this ASG is not"):
        groups.remove_instances(group, sorted(group.instance_ids)[:1])
    assert len(groups.get("attacker").instance_ids) == 2  # type: ignore[union-attr]
