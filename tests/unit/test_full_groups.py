"""A pod left waiting because a group has no room to grow names which limit that is: the
policy's maxReplicas, the Auto Scaling group's MaxSize, or one of the cluster's limits."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from nodescaler.domain.cluster.snapshot import Pod, Resources, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.scaling.limits import Claims, ClusterLimits
from nodescaler.service.limiter import ClusterLimiter
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_balance import CHAIN, ENABLED, PENDING, Groups, M5Xlarge, web_node

GIB = 2**30
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


class NoClaims:
    def load_claims(self) -> Claims:
        return Claims()

    def save_claims(self, claims: Claims) -> bool:
        return True


def waiting_reason(group: NodeGroup, max_replicas: int, limits: ClusterLimits | None) -> str:
    """Why a pending one-core pod waits, planned for `group` alone, its nodes all Ready and
    each full (four three-core pods fill none: one each)."""
    book = PolicyBook({"web": policy(PENDING, name="web", max_replicas=max_replicas)}, TagNames())
    groups = Groups([group])
    limiter = None if limits is None else ClusterLimiter(limits, groups, M5Xlarge(), NoClaims())
    planner = PendingPodsPlanner(groups, book, M5Xlarge(), CHAIN, limiter=limiter)
    nodes = tuple(web_node(group.name, i) for i in range(group.desired))
    busy = tuple(Pod("default", f"busy-{n.name}", n.name, Resources(3000, GIB, 1)) for n in nodes)
    pod = Pod("default", "web-0", None, Resources(1000, GIB, 1), unschedulable=True)
    planned = planner.plan(Snapshot(nodes, (*busy, pod)), -10, NOW)
    return planned.plan.why_waiting(pod)


def web(desired: int, max_size: int) -> NodeGroup:
    """A group in zone a (its nodes' zone label), its nodes registered by EKS."""
    return NodeGroup(
        "web-ng-a",
        desired,
        0,
        max_size,
        desired,
        tags=ENABLED,
        eks_cluster="prod",
        eks_nodegroup="web-ng-a",
    )


def test_a_policy_whose_max_replicas_binds_is_named_with_its_size() -> None:
    reason = waiting_reason(web(5, 20), 5, None)
    assert reason == "web-ng-a: at its maximum size, 5 nodes (its policy's maxReplicas)"


def test_an_auto_scaling_group_whose_max_size_binds_is_named() -> None:
    # the policy allows more than the group: the group's MaxSize is what binds
    reason = waiting_reason(web(8, 8), 50, None)
    assert reason == "web-ng-a: at its maximum size, 8 nodes (its Auto Scaling group's MaxSize)"


def test_a_cluster_limit_tighter_than_the_group_is_named() -> None:
    reason = waiting_reason(web(4, 20), 50, ClusterLimits(max_nodes=4))
    assert reason == "web-ng-a: at the cluster's maximum of 4 nodes"


def test_a_cluster_limit_with_room_left_does_not_take_the_groups_name() -> None:
    # the limit leaves the group room beyond its own maximum: its maximum binds
    reason = waiting_reason(web(5, 5), 50, ClusterLimits(max_nodes=100))
    assert reason == "web-ng-a: at its maximum size, 5 nodes (its Auto Scaling group's MaxSize)"


def test_an_eks_managed_groups_scaling_config_is_named_where_it_binds() -> None:
    scaling = "EKS node group web-ng-a of cluster prod's scalingConfig"
    group = dataclasses.replace(web(6, 6), bounds_from=scaling)
    reason = waiting_reason(group, 50, None)
    assert reason == f"web-ng-a: at its maximum size, 6 nodes ({scaling})"
