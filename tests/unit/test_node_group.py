"""Which nodes are a group's: by the EKS node group label, else by the ASG's instances."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodescaler.domain.cluster.snapshot import Node, Resources
from nodescaler.domain.groups.node_group import (
    EKS_NODEGROUP_LABEL,
    NodeGroup,
    ScalingActivity,
    belongs,
    unconfirmed_launch_failure,
)


def node(instance: str, label: str | None = None) -> Node:
    labels = {EKS_NODEGROUP_LABEL: label} if label else {}
    return Node(
        "n", None, True, True, Resources(), labels, provider_id=f"aws:///us-east-1a/{instance}"
    )


ASG = NodeGroup("web-asg", 2, 0, 5, 2, instance_ids=frozenset({"i-1", "i-2"}))
MANAGED = NodeGroup("eks-web-asg", 2, 0, 5, 2, eks_nodegroup="web", instance_ids=frozenset({"i-1"}))


def test_a_managed_groups_node_is_known_by_its_label_whatever_its_instance() -> None:
    assert belongs(node("i-9", label="web"), MANAGED)
    assert not belongs(node("i-1", label="batch"), MANAGED)


def test_without_both_a_label_and_a_managed_group_the_instance_decides() -> None:
    assert belongs(node("i-1"), MANAGED)  # a node not (yet) labelled
    assert not belongs(node("i-9"), MANAGED)
    assert belongs(node("i-2", label="web"), ASG)  # a self-managed group has no node group name
    assert not belongs(node("i-9", label="web"), ASG)


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_a_launch_failure_exactly_an_hour_old_is_still_confirmed() -> None:
    failed = ScalingActivity("a-1", "Failed", launch=True, started=T)
    assert unconfirmed_launch_failure("ng", "a-1", failed, T + timedelta(hours=1)) is None
