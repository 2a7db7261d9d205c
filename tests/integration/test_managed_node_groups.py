"""EKS managed node groups done EKS's way: the warm pool through UpdateNodegroupConfig's
warmPoolConfig (EKS owns its Auto Scaling group's pool; a PutWarmPool there is a change EKS
does not expect). moto accepts and ignores warmPoolConfig: the sandbox's EksWarmPools
answers as EKS documents it
(https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html,
https://docs.aws.amazon.com/eks/latest/APIReference/API_WarmPoolConfig.html)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from nodescaler.adapters.aws.instance_types import Ec2InstanceTypes
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.domain.cluster.instance_templates import NodegroupLabels
from nodescaler.domain.cluster.snapshot import Taint
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.errors import RefusedError
from nodescaler_sandbox.eks_scaling import EksNodegroupScaling
from nodescaler_sandbox.eks_warm_pools import EksWarmPools

from tests.aws import REGION, CallCounter, client, make_asg
from tests.builders import VirtualClock
from tests.integration.test_node_groups import OPTED_IN, eks_desired, eks_node_group

EKS_TAGS = {
    "nodescaler/cluster": "prod",
    "eks:cluster-name": "prod",
    "eks:nodegroup-name": "general",
}


def managed_groups(calls: CallCounter) -> tuple[AsgNodeGroups, EksWarmPools, Any]:
    """nodescaler's node groups on moto with the sandbox's EKS warm pools; the EKS client
    (the operator's, and the one the tests read with)."""
    autoscaling = calls.watch(boto3.client("autoscaling", region_name=REGION))
    eks = calls.watch(boto3.client("eks", region_name=REGION))
    pools = EksWarmPools(boto3.client("autoscaling", region_name=REGION))
    pools.watch(eks)
    groups = AsgNodeGroups(autoscaling, eks, tag_names=TagNames(), cluster_name="prod")
    return groups, pools, eks


def test_a_managed_groups_warm_pool_is_sized_through_eks_not_put_on_its_asg(
    calls: CallCounter,
) -> None:
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, desired=2)
    groups, _, eks = managed_groups(calls)
    group = groups.get(asg)
    assert group is not None and group.is_eks_managed
    # When nodescaler keeps 5 warm
    groups.size_warm_pool(group, 5)
    # Then EKS is told, in its own terms, and Auto Scaling's PutWarmPool is never called
    described = eks.describe_nodegroup(clusterName="prod", nodegroupName="general")
    assert described["nodegroup"]["warmPoolConfig"] == {
        "enabled": True,
        "minSize": 5,
        "maxGroupPreparedCapacity": 5,
        "poolState": "Stopped",
    }
    assert calls.calls["PutWarmPool"] == 0 and calls.calls["UpdateNodegroupConfig"] == 1
    # and the pool EKS keeps on its group is that size, as the next read of the group sees it
    after = groups.get(asg)
    assert after is not None and after.warm_pool is not None and after.warm_pool.holds(5)


def test_the_pools_own_state_and_reuse_are_sent_back_as_they_were(calls: CallCounter) -> None:
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, desired=2)
    groups, _, eks = managed_groups(calls)
    eks.update_nodegroup_config(
        clusterName="prod",
        nodegroupName="general",
        warmPoolConfig={
            "enabled": True,
            "minSize": 1,
            "poolState": "Hibernated",
            "reuseOnScaleIn": True,
        },
    )
    group = groups.get(asg)
    assert group is not None
    groups.size_warm_pool(group, 3)
    described = eks.describe_nodegroup(clusterName="prod", nodegroupName="general")
    config = described["nodegroup"]["warmPoolConfig"]
    assert (config["poolState"], config["reuseOnScaleIn"], config["minSize"]) == (
        "Hibernated",
        True,
        3,
    )


def test_an_asg_claiming_another_node_group_gets_no_warm_pool_of_it(calls: CallCounter) -> None:
    eks_node_group("prod", "payments-prod")
    make_asg("attacker", tags=OPTED_IN | EKS_TAGS | {"eks:nodegroup-name": "payments-prod"})
    groups, pools, _ = managed_groups(calls)
    with pytest.raises(RefusedError, match="refusing to resize a node group this ASG is not"):
        groups.size_warm_pool(groups.get("attacker"), 4)  # type: ignore[arg-type]
    assert pools.configs == {}


def test_the_supplement_refuses_what_eks_refuses(calls: CallCounter) -> None:
    eks_node_group("prod", "general")
    _, _, eks = managed_groups(calls)
    with pytest.raises(ClientError, match="minSize 4 is greater than maxGroupPreparedCapacity 2"):
        eks.update_nodegroup_config(
            clusterName="prod",
            nodegroupName="general",
            warmPoolConfig={"minSize": 4, "maxGroupPreparedCapacity": 2},
        )


def described_group(calls: CallCounter) -> tuple[Ec2InstanceTypes, Any, VirtualClock]:
    eks = calls.watch(boto3.client("eks", region_name=REGION))
    client("eks").create_nodegroup(
        clusterName="prod",
        nodegroupName="gpu",
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
        labels={"accelerator": "a10"},
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
    )
    clock = VirtualClock()
    types = Ec2InstanceTypes(client("ec2"), client("autoscaling"), eks, clock=clock)
    return types, eks, clock


def managed(nodegroup: str) -> NodeGroup:
    return NodeGroup(
        name="asg",
        desired=0,
        min_size=0,
        max_size=5,
        in_service=0,
        eks_cluster="prod",
        eks_nodegroup=nodegroup,
    )


def test_a_managed_groups_labels_and_taints_are_read_from_eks_and_kept_a_minute(
    calls: CallCounter,
) -> None:
    eks_node_group("prod", "general")  # the cluster
    types, _, clock = described_group(calls)
    found = types.nodegroup_labels(managed("gpu"))
    assert found == NodegroupLabels(
        {"accelerator": "a10"}, (Taint("nvidia.com/gpu", "true", "NoSchedule"),)
    )
    clock.advance(seconds=50)
    types.nodegroup_labels(managed("gpu"))
    assert calls.calls["DescribeNodegroup"] == 1  # cached, as CA's one-minute cache
    clock.advance(seconds=20)
    types.nodegroup_labels(managed("gpu"))
    assert calls.calls["DescribeNodegroup"] == 2


def test_when_eks_cannot_be_read_the_tags_stand_alone(calls: CallCounter) -> None:
    eks_node_group("prod", "general")
    types, eks, _ = described_group(calls)

    def deny(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException"}}, "DescribeNodegroup")

    eks.meta.events.register("before-call.eks.DescribeNodegroup", deny)
    assert types.nodegroup_labels(managed("gpu")) is None
    assert types.nodegroup_labels(NodeGroup("self-managed", 0, 0, 5, 0)) is None


def test_a_managed_groups_bounds_are_its_eks_scaling_config(calls: CallCounter) -> None:
    # Given a node group EKS bounds at [1, 3], its ASG at [0, 20] (edited by hand)
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, desired=2, max_size=20)
    groups, _, eks = managed_groups(calls)
    eks.update_nodegroup_config(
        clusterName="prod", nodegroupName="general", scalingConfig={"minSize": 1, "maxSize": 3}
    )
    # When read
    group = groups.get(asg)
    # Then its bounds are EKS's (which refuses a desiredSize outside them), and said so
    assert group is not None and (group.min_size, group.max_size) == (1, 3)
    assert group.bounds_from == "EKS node group general of cluster prod's scalingConfig"
    assert group.bounds_doubt == ""


def test_a_managed_group_eks_does_not_describe_is_read_with_that_doubt_named(
    calls: CallCounter,
) -> None:
    # Given one ASG naming a node group EKS has not got, and one whose read EKS refuses
    eks_node_group("prod", "general")
    make_asg("orphan", tags=OPTED_IN | EKS_TAGS | {"eks:nodegroup-name": "gone"}, max_size=20)
    asg = eks_node_group("prod", "denied")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS | {"eks:nodegroup-name": "denied"}, max_size=20)
    groups, _, eks = managed_groups(calls)

    def deny(params: dict[str, Any], **_: Any) -> None:
        if params["nodegroupName"] == "denied":
            error = {"Error": {"Code": "AccessDeniedException", "Message": "no eks:Describe"}}
            raise ClientError(error, "DescribeNodegroup")

    eks.meta.events.register("before-parameter-build.eks.DescribeNodegroup", deny)
    # When read
    orphan, denied = groups.get("orphan"), groups.get(asg)
    # Then each keeps its ASG's bounds, with why EKS's are not known named (no scale-in)
    assert orphan is not None and denied is not None
    assert (orphan.max_size, orphan.bounds_from) == (20, "")
    assert orphan.bounds_doubt.startswith(
        "EKS node group gone of cluster prod could not be described (An error occurred "
        "(ResourceNotFoundException)"
    )
    assert denied.bounds_doubt.startswith(
        "EKS node group denied of cluster prod could not be described (An error occurred "
        "(AccessDeniedException)"
    )


def test_the_sandbox_carries_out_a_scaling_config_as_eks_does(calls: CallCounter) -> None:
    # Given the sandbox's EKS scaling on a node group of [0, 20] and its ASG (moto stores a
    # scalingConfig but neither checks nor applies it). EKS refuses a desiredSize outside
    # [minSize, maxSize] and sets its ASG to what it takes
    # (https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html,
    # https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html)
    asg = eks_node_group("prod", "general", desired=0)
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, max_size=20)
    told: list[str] = []  # the ASGs resized: their launches timed from the request
    eks = EksNodegroupScaling(client("eks"), client("autoscaling"), resized=told.append).watch(
        boto3.client("eks", region_name=REGION)
    )
    # When nodescaler resizes the group through EKS
    groups = AsgNodeGroups(client("autoscaling"), eks, tag_names=TagNames(), cluster_name="prod")
    group = groups.get(asg)
    assert group is not None
    groups.set_desired(group, 3)
    # Then its ASG is at 3, and a desiredSize above maxSize is refused, the ASG left be
    assert (
        client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[asg])[
            "AutoScalingGroups"
        ][0]["DesiredCapacity"]
        == 3
    )
    assert told == [asg]  # the sandbox starts its instances when the request takes effect
    with pytest.raises(ClientError, match="desiredSize 21 must be between minSize 0 and maxSize"):
        groups.set_desired(group, 21)
    assert eks_desired("prod", "general") == 3
    assert told == [asg]  # a refused request launches nothing


def test_discover_bounds_a_managed_group_by_eks_kept_a_minute(calls: CallCounter) -> None:
    # Given a node group EKS bounds at [0, 3], its ASG at [0, 20], read with a clock
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, max_size=20)
    client("eks").update_nodegroup_config(
        clusterName="prod", nodegroupName="general", scalingConfig={"minSize": 0, "maxSize": 3}
    )
    eks = calls.watch(boto3.client("eks", region_name=REGION))
    clock = VirtualClock()
    groups = AsgNodeGroups(
        client("autoscaling"), eks, tag_names=TagNames(), cluster_name="prod", clock=clock
    )
    # When the groups are listed (for the expanders' room) twice within a minute, then after
    (first,) = groups.discover()
    clock.advance(seconds=50)
    groups.discover()
    assert calls.calls["DescribeNodegroup"] == 1
    clock.advance(seconds=20)
    groups.discover()
    # Then the managed group's maximum is EKS's, read once a minute
    assert first.max_size == 3 and calls.calls["DescribeNodegroup"] == 2


def test_discover_does_not_keep_a_failed_eks_read_and_asks_again_next_time(
    calls: CallCounter,
) -> None:
    # Given a node group EKS bounds at [0, 3], its ASG at [0, 20], read with a clock, and
    # EKS refusing the first DescribeNodegroup (throttled past the SDK's retries)
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, max_size=20)
    client("eks").update_nodegroup_config(
        clusterName="prod", nodegroupName="general", scalingConfig={"minSize": 0, "maxSize": 3}
    )
    eks = calls.watch(boto3.client("eks", region_name=REGION))
    refusals = [ClientError({"Error": {"Code": "ThrottlingException"}}, "DescribeNodegroup")]

    def refuse_once(**_: Any) -> None:
        if refusals:
            raise refusals.pop()

    eks.meta.events.register("before-parameter-build.eks.DescribeNodegroup", refuse_once)
    clock = VirtualClock()
    groups = AsgNodeGroups(
        client("autoscaling"), eks, tag_names=TagNames(), cluster_name="prod", clock=clock
    )
    # When the groups are listed, then again ten seconds later
    (refused,) = groups.discover()
    clock.advance(seconds=10)
    (read,) = groups.discover()
    # Then the failure was not kept for a minute: the second listing has EKS's bounds
    assert refused.bounds_doubt.startswith("EKS node group general of cluster prod could not")
    assert (read.max_size, read.bounds_doubt) == (3, "")
    assert read.bounds_from == "EKS node group general of cluster prod's scalingConfig"


@pytest.mark.parametrize(
    ("scaling", "named"),
    [
        ({"minSize": -3, "maxSize": 5}, "scalingConfig minSize -3 is negative"),
        ({"minSize": 4, "maxSize": 2}, "scalingConfig minSize 4 is above its maxSize 2"),
        ({"minSize": 0}, "scalingConfig maxSize is None, not a whole number"),
        ({"minSize": 0, "maxSize": True}, "scalingConfig maxSize is True, not a whole number"),
        ({"minSize": 0, "maxSize": 2.5}, "scalingConfig maxSize is 2.5, not a whole number"),
        ({"minSize": "0", "maxSize": 3}, "scalingConfig minSize is '0', not a whole number"),
        ({"minSize": 30, "maxSize": 40}, "[30, 40] and its Auto Scaling group's [0, 20] share"),
        ("\x1b[2J" + "x" * 5000, "scalingConfig is '\\x1b[2Jxxxx"),
    ],
)
def test_a_scaling_config_that_is_no_range_of_sizes_is_a_named_doubt_the_asgs_bounds_kept(
    calls: CallCounter, scaling: Any, named: str
) -> None:
    # Given a managed node group whose DescribeNodegroup answers a hostile scalingConfig
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, desired=2, max_size=20)
    groups, _, eks = managed_groups(calls)

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        parsed["nodegroup"]["scalingConfig"] = scaling

    eks.meta.events.register("after-call.eks.DescribeNodegroup", answer)
    # When read
    group = groups.get(asg)
    # Then its bounds are its ASG's, and why EKS's are not is named, bounded (no scale-in)
    assert group is not None and (group.min_size, group.max_size) == (0, 20)
    assert group.bounds_doubt.startswith("EKS node group general of cluster prod: ")
    assert named in group.bounds_doubt and len(group.bounds_doubt) < 400


def test_a_scaling_config_beyond_its_asgs_bounds_is_taken_within_them(
    calls: CallCounter,
) -> None:
    # Given EKS answering a maxSize of 10^12 for a node group whose ASG holds at most 20
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, desired=2, max_size=20)
    groups, _, eks = managed_groups(calls)

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        parsed["nodegroup"]["scalingConfig"] = {"minSize": 1, "maxSize": 10**12}

    eks.meta.events.register("after-call.eks.DescribeNodegroup", answer)
    # Then its bounds are what both allow: the ASG refuses a size EKS would take
    group = groups.get(asg)
    assert group is not None and (group.min_size, group.max_size, group.bounds_doubt) == (1, 20, "")


@pytest.mark.parametrize(
    ("configured", "named"),
    [
        ({"MinSize": "abc"}, "its warm pool's MinSize is 'abc', not a whole number"),
        ({"MinSize": -2}, "its warm pool's MinSize -2 is negative"),
        ({"MaxGroupPreparedCapacity": 1.5}, "MaxGroupPreparedCapacity is 1.5, not a whole"),
        ({"PoolState": "Running\r\nX"}, "PoolState 'Running\\r\\nX' is not one of"),
        ({"InstanceReusePolicy": {"ReuseOnScaleIn": "yes"}}, "ReuseOnScaleIn is 'yes', not"),
    ],
)
def test_a_warm_pool_answered_oddly_is_named_and_left_be_the_group_still_read(
    calls: CallCounter, configured: dict[str, Any], named: str
) -> None:
    # Given a managed group whose warm pool DescribeAutoScalingGroups answers oddly
    asg = eks_node_group("prod", "general")
    make_asg(asg, tags=OPTED_IN | EKS_TAGS, desired=2, max_size=20)
    groups, _, _ = managed_groups(calls)

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        for found in parsed.get("AutoScalingGroups", []):
            found["WarmPoolConfiguration"] = {"MinSize": 0, "PoolState": "Stopped"} | configured

    groups._autoscaling.meta.events.register(
        "after-call.auto-scaling.DescribeAutoScalingGroups", answer
    )
    # When read (and listed, as a tick does)
    group, (listed,) = groups.get(asg), groups.discover()
    # Then the group is read, its pool's problem named: a forecast leaves the pool be
    assert group is not None and group.warm_pool is not None and listed.warm_pool == group.warm_pool
    assert named in group.warm_pool.problem and group.warm_pool.problem.isprintable()
