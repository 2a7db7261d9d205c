"""Cluster-wide limits: what is left for a group once the others are counted."""

from __future__ import annotations

from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.limits import (
    Ceiling,
    ClusterLimits,
    ClusterUsage,
    GroupUsage,
    ceiling,
    total_usage,
)

from tests.builders import policy, queue_metric, readings, run

M5_LARGE = GroupUsage(nodes=0, vcpus_per_node=2, memory_mib_per_node=8192)


def test_no_limit_set_means_no_ceiling() -> None:
    assert not ClusterLimits()
    assert ceiling(ClusterLimits(), M5_LARGE, [GroupUsage(50, 2, 8192)]) is None


def test_the_tightest_limit_sets_the_ceiling_and_is_named() -> None:
    others = [GroupUsage(10, 4, 16384), GroupUsage(5, 2, 8192)]  # 15 nodes, 50 vCPUs, 200 GiB
    assert ceiling(ClusterLimits(max_nodes=100), M5_LARGE, others) == Ceiling(
        85, "maximum of 100 nodes"
    )
    assert ceiling(ClusterLimits(max_nodes=100, max_vcpus=60), M5_LARGE, others) == Ceiling(
        5, "maximum of 60 vCPUs"
    )
    assert ceiling(ClusterLimits(max_memory_gib=216), M5_LARGE, others) == Ceiling(
        2, "maximum of 216 GiB of memory"
    )


def test_a_cluster_already_over_its_limit_leaves_no_room() -> None:
    assert ceiling(ClusterLimits(max_nodes=10), M5_LARGE, [GroupUsage(12)]) == Ceiling(
        0, "maximum of 10 nodes"
    )


def test_a_group_of_unknown_shape_is_held_by_the_node_limit_only() -> None:
    limits = ClusterLimits(max_nodes=20, max_vcpus=4)
    assert ceiling(limits, GroupUsage(0), [GroupUsage(5, 2, 0)]) == Ceiling(
        15, "maximum of 20 nodes"
    )


def test_a_capped_scale_up_says_which_limit_and_a_limit_never_shrinks_a_group() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4))
    capped = run(
        the_policy, 4, readings(jobs=80), size=GroupSize(current=4), ceiling=Ceiling(7, "x")
    ).decision
    assert (capped.desired, capped.limited_by, capped.cluster_limit) == (
        7,
        (Limit.CLUSTER_LIMIT,),
        "x",
    )
    assert capped.reason.endswith("capped by the cluster's x")
    over = run(
        the_policy, 9, readings(jobs=80), size=GroupSize(current=9), ceiling=Ceiling(7, "x")
    ).decision
    assert (over.desired, over.limited_by) == (9, (Limit.CLUSTER_LIMIT,))  # held, not shrunk


def test_the_clusters_usage_adds_every_groups_nodes_and_their_shapes() -> None:
    # Given 3 m5.large (2 vCPUs, 8 GiB), 2 of 4 vCPUs and 16 GiB, and 5 of unknown shape;
    # When added up; Then all 10 nodes count, the unknown ones with no vCPUs or memory
    assert total_usage(
        [GroupUsage(3, 2, 8192), GroupUsage(2, 4, 16384), GroupUsage(5)]
    ) == ClusterUsage(nodes=10, vcpus=14, memory_gib=56)


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


def test_a_cluster_limit_leaves_room_for_whole_nodes_only() -> None:
    group = GroupUsage(nodes=0, vcpus_per_node=4, memory_mib_per_node=2050)
    by_cpu = ceiling(ClusterLimits(max_vcpus=10), group, [])
    by_memory = ceiling(ClusterLimits(max_memory_gib=10), group, [])
    assert by_cpu is not None and (by_cpu.nodes, by_cpu.limit) == (2, "maximum of 10 vCPUs")
    assert by_memory is not None and by_memory.nodes == 4  # 10,240 MiB: 4.99 nodes
