"""A node carrying a startup taint is still starting: no room yet, so its pods are counted
onto it as onto a node on its way (`domain/cluster/startup_taints.py`, as Cluster
Autoscaler's FAQ says of its startup taints), for at most 15 minutes from its creation.
Its readiness stays the kubelet's: a scale-in treats it and its pods as any Ready node's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.adapters.k8s.conversion import node_from_json
from nodescaler.config import EvaluateSettings
from nodescaler.domain.cluster.snapshot import (
    MAX_NODE_STARTUP,
    DisruptionBudget,
    Pod,
    Resources,
    Snapshot,
    Taint,
)
from nodescaler.domain.cluster.startup_taints import KNOWN, StartupTaints
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scale_down.leaving import removable
from nodescaler.errors import SettingsError

from tests.unit.test_config import BASE

READY_AT = "2026-11-30T10:00:00Z"
CREATED = datetime(2026, 11, 30, 9, 59, tzinfo=UTC)
CILIUM = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}


def wire(
    *taints: dict[str, str], ready: str = "True", name: str = "ip-10-0-1-5"
) -> dict[str, object]:
    return {
        "metadata": {"name": name, "creationTimestamp": "2026-11-30T09:59:00Z"},
        "spec": {"providerID": f"aws:///eu-west-1a/i-{name}", "taints": list(taints)},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": READY_AT}],
        },
    }


@pytest.mark.parametrize(
    "key",
    [
        "node.cilium.io/agent-not-ready",
        "ebs.csi.aws.com/agent-not-ready",
        "efs.csi.aws.com/agent-not-ready",
        "startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver",  # CA's prefix
        "ignore-taint.cluster-autoscaler.kubernetes.io/legacy",  # its deprecated one
    ],
)
def test_a_ready_node_with_a_known_startup_taint_is_still_starting(key: str) -> None:
    node = node_from_json(wire({"key": key, "value": "true", "effect": "NoExecute"}))
    assert node.starting and not node.usable  # no room yet: a node on its way
    assert node.ready and node.ready_since == datetime(2026, 11, 30, 10, tzinfo=UTC)
    assert node.taints == (Taint(key, "true", "NoExecute"),)  # what it carries is kept


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},  # the group's own
        {"key": "node.cilium.io/agent-not-ready", "effect": "PreferNoSchedule"},  # keeps none off
    ],
)
def test_a_node_whose_taints_are_its_own_is_ready(taint: dict[str, str]) -> None:
    node = node_from_json(wire(taint))
    assert node.usable and not node.starting


def test_a_taint_the_operator_names_is_a_startup_taint_beside_the_well_known() -> None:
    startup = StartupTaints.also(["example.com/agent-not-ready"])
    mine = node_from_json(wire({"key": "example.com/agent-not-ready"}), startup)
    cilium = node_from_json(wire(CILIUM), startup)
    assert mine.starting and cilium.starting
    assert not node_from_json(wire({"key": "example.com/agent-not-ready"}), KNOWN).starting


def test_a_node_not_ready_is_not_counted_starting_whatever_its_taints() -> None:
    node = node_from_json(wire(CILIUM, ready="False"))
    assert not node.ready and not node.starting


@pytest.mark.parametrize(
    ("age", "starting"),
    [(timedelta(minutes=5), True), (MAX_NODE_STARTUP, False), (timedelta(hours=3), False)],
)
def test_a_startup_taint_past_a_nodes_start_is_its_trouble_not_its_start(
    age: timedelta, starting: bool
) -> None:
    # (Cluster Autoscaler's MaxNodeStartupTime: an agent restarted on a node running for
    # hours, or never running: no room on its way, which would hold pods for good)
    listed = Snapshot((node_from_json(wire(CILIUM)),), ())
    assert listed.at(CREATED + age).nodes[0].starting is starting
    unknown = Snapshot((replace(listed.nodes[0], created=None),), ())
    assert not unknown.at(CREATED).nodes[0].starting  # no creation time: no start to wait


def test_only_the_nodes_past_their_start_stop_starting() -> None:
    young = node_from_json(wire(CILIUM, name="young"))
    old = replace(node_from_json(wire(CILIUM, name="old")), created=CREATED - timedelta(hours=1))
    nodes = Snapshot((young, old), ()).at(CREATED + timedelta(minutes=1)).nodes
    assert [n.starting for n in nodes] == [True, False]


def test_a_busy_node_whose_agent_restarted_is_drained_by_the_rules_not_taken_as_dead() -> None:
    # Given three Ready nodes, the second re-tainted by Cilium while it runs a pod that may
    # not move and one whose budget allows no disruption
    nodes = [
        replace(node_from_json(wire(*taints, name=name)), group="web")
        for name, taints in (("a", ()), ("b", (CILIUM,)), ("c", ()))
    ]
    gib = 2**30
    pods = (
        Pod("default", "light", "a", Resources(500, gib, 1)),
        Pod("default", "db-0", "b", Resources(3000, gib, 1), not_safe_to_evict=True),
        Pod("default", "web-1", "b", Resources(500, gib, 1), labels={"app": "w"}),
        Pod("default", "big", "c", Resources(1000, gib, 1)),
    )
    budget = DisruptionBudget("default", "w", {"app": "w"}, disruptions_allowed=0)
    ids = [n.instance_id for n in nodes]
    group = NodeGroup("web", 3, 0, 10, 3, instance_ids=frozenset(ids))
    # When a scale-in of one with no drain hook asks which instance may go
    chosen = removable(group, ids, 1, Snapshot(tuple(nodes), pods, (budget,)), now=CREATED)
    undrained = chosen.undrained("no drain hook on the group")
    # Then not the re-tainted node: its pods keep it, as on any Ready node
    assert nodes[1].instance_id not in chosen.instance_ids + undrained.instance_ids


def test_the_operators_startup_taints_are_read_from_startup_taints() -> None:
    settings = EvaluateSettings.from_environment(
        BASE | {"STARTUP_TAINTS": '["example.com/agent-not-ready"]'}
    )
    assert settings.startup.holds(Taint("example.com/agent-not-ready"))
    assert settings.startup.holds(Taint("node.cilium.io/agent-not-ready"))
    assert EvaluateSettings.from_environment(BASE).startup == KNOWN


@pytest.mark.parametrize("value", ['["has space"]', '"not-a-list"', '["/no-name"]'])
def test_a_startup_taint_that_is_no_taint_key_is_refused_by_name(value: str) -> None:
    with pytest.raises(SettingsError, match="STARTUP_TAINTS"):
        EvaluateSettings.from_environment(BASE | {"STARTUP_TAINTS": value})
