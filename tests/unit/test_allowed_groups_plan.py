"""The pending pods' plan leaves out a group allowedGroups does not name: the group would
take pods it is never resized for, and they would wait."""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import Snapshot
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import AllowedGroups, TagNames
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_balance import (
    CHAIN,
    ENABLED,
    NOW,
    PENDING,
    WEB,
    Cluster,
    Groups,
    M5Xlarge,
    pods,
)


def test_given_an_allow_list_then_pending_pods_go_only_to_the_groups_it_allows() -> None:
    # Given three groups at zero that all read pending pods, and an allow-list naming two
    groups = [NodeGroup(g, 0, 0, 10, 0, tags=ENABLED, instance_type="m5.xlarge") for g in WEB]
    planner = PendingPodsPlanner(
        Groups(groups),
        PolicyBook({"web": policy(PENDING, name="web")}, TagNames()),
        M5Xlarge(),
        CHAIN,
        allowed=AllowedGroups(("web-a", "web-c")),
    )
    metrics = KubernetesClusterView(
        Cluster(Snapshot((), tuple(pods(24, cpu=950)))), pending=planner
    )

    # When each group reads 24 pending one-core pods (six nodes' worth)
    readings = {g.name: metrics.read(PENDING, g, NOW) for g in groups}

    # Then the allowed groups take all six nodes between them, web-b none
    values = {g: r.value for g, r in readings.items() if isinstance(r, MetricReading)}
    assert values["web-b"] == 0
    assert values["web-a"] + values["web-c"] == 6
