""" "CA tuned"'s proportional placeholders (issue 42 item 2): a policy's reservation target
mapped to pause pods a cluster-proportional-autoscaler (CPA) scales to the group's cores,
and CPA's count as its source makes it (kubernetes-sigs/cluster-proportional-autoscaler:
pkg/autoscaler/controller/linearcontroller/linear_controller.go,
`getExpectedReplicasFromParams`; laddercontroller/ladder_controller.go,
`getExpectedReplicasFromEntries`; pkg/autoscaler/k8sclient/k8sclient.go, `NewK8sClient`'s
label selector and `GetClusterStatus`). The README's own examples are among the cases.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler_sandbox.baseline_proportional import (
    SLICE,
    ProportionalAutoscaler,
    cluster_status,
    expected_replicas,
    free_share,
    linear_replicas,
    proportional,
)
from nodescaler_sandbox.baseline_tuning import (
    GROUP_LABEL,
    PLACEHOLDER_PRIORITY,
    cluster_flags,
    is_placeholder,
    proportional_deployment,
    settings,
    tune,
)
from nodescaler_sandbox.cluster import Room, SimulatedCluster, requests
from nodescaler_sandbox.kube.apiserver import Cluster

from tests.tools.test_baseline_tuning import MINUTE, T0, policy

ROOT = Path(__file__).parents[2]


def from_file(path: str) -> NodeGroupPolicy:
    return NodeGroupPolicy.model_validate(yaml.safe_load((ROOT / path).read_text()))


# --- CPA's linear and ladder modes ----------------------------------------------------


@pytest.mark.parametrize(
    ("linear", "nodes", "cores", "replicas"),
    [
        # the README's: 4 nodes, 13 cores, 2 cores and 1 node a replica → max(7, 4)
        (
            {"coresPerReplica": 2, "nodesPerReplica": 1, "min": 1, "max": 100},
            4,
            13,
            7,
        ),
        ({"coresPerReplica": 5}, 5, 80, 16),  # ceil(80 / 5); no max: none
        ({"coresPerReplica": 5, "max": 10}, 5, 80, 10),  # clamped to max
        ({"coresPerReplica": 5, "min": 4}, 0, 0, 4),  # clamped to min
        ({"coresPerReplica": 5, "min": 0}, 0, 0, 1),  # a min of 0 is read as 1
        ({"coresPerReplica": 5}, 0, 0, 1),  # min left out: 1 too
        ({"coresPerReplica": 0.5, "max": 3}, 0, 0, 1),  # linear mode never reaches 0
        # nodesPerReplica left out counts one, whatever max says
        ({"coresPerReplica": 100, "max": 1}, 9, 3, 1),
        # preventSinglePointFailure: at least 2 by nodes beyond one node, even above max
        ({"coresPerReplica": 100, "max": 1, "preventSinglePointFailure": True}, 2, 8, 2),
        ({"coresPerReplica": 100, "preventSinglePointFailure": True}, 1, 8, 1),
    ],
)
def test_linear_mode_counts_as_cpa_does(
    linear: dict[str, Any], nodes: int, cores: int, replicas: int
) -> None:
    assert linear_replicas(linear, nodes, cores) == replicas
    assert expected_replicas({"linear": linear}, nodes, cores) == replicas


def test_ladder_mode_takes_the_last_step_at_or_below_the_count_and_can_give_zero() -> None:
    # the README's: 100 nodes and 400 cores → 3 by cores (64 <= 400 < 512), 2 by nodes
    ladder = {
        "coresToReplicas": [[1, 1], [64, 3], [512, 5], [1024, 7], [2048, 10], [4096, 15]],
        "nodesToReplicas": [[1, 1], [2, 2]],
    }
    assert expected_replicas({"ladder": ladder}, 100, 400) == 3
    # and its scale to zero ("Replicas can be set to 0 (unlike in linear mode)")
    to_zero = {"coresToReplicas": [[0, 0], [4, 2], [8, 4]]}
    assert [expected_replicas({"ladder": to_zero}, 0, c) for c in (0, 3, 4, 7, 8, 99)] == [
        0,
        0,
        2,
        2,
        4,
        4,
    ]
    # below its first step: that step's replicas; no steps: 0
    assert expected_replicas({"ladder": {"coresToReplicas": [[4, 2]]}}, 0, 1) == 2
    assert expected_replicas({"ladder": {}}, 3, 12) == 0


# --- which nodes CPA counts ------------------------------------------------------------


def node(name: str, group: str, cpu: str, *, ready: bool = True, cordoned: bool = False) -> Any:
    return {
        "metadata": {"name": name, "labels": {GROUP_LABEL: group}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_cpa_counts_the_schedulable_nodes_its_node_labels_match_and_their_cores() -> None:
    # Given two Ready web-ng nodes of 3.92 cores, a cordoned one, one not Ready and a node
    # of another group
    nodes = [
        node("a", "web-ng", "3920m"),
        node("b", "web-ng", "3920m"),
        node("c", "web-ng", "4", cordoned=True),
        node("d", "web-ng", "4", ready=False),
        node("e", "batch-ng", "16"),
    ]
    # Then --nodelabels lists web-ng's alone, and two are schedulable: 7.84 cores, as 8
    assert cluster_status(nodes, {GROUP_LABEL: "web-ng"}) == (2, 8)
    # without --nodelabels every node is listed
    assert cluster_status(nodes, {}) == (3, 24)


# --- the mapping from a policy ---------------------------------------------------------


def a_node(cpu: str, memory: str, taints: list[dict[str, str]] | None = None) -> Room:
    cluster = SimulatedCluster(Cluster(), boot=MINUTE)
    cluster.shapes = {"g": {"cpu": cpu, "memory": memory}}
    cluster.taints = {"g": taints or []}
    return cluster.empty_node("g")


def test_a_reservation_target_becomes_placeholders_taking_its_room_of_the_group() -> None:
    # Given the reference design's reservation (cpu and memory at 60 %) on m5.4xlarge
    # nodes of 16 cores and 64 GiB, in a group of 1 to 10
    microservices = from_file("policies/microservices.yaml")
    tuning = tune(microservices, "web-ng", 1, 10)
    cpa = proportional(
        microservices,
        "web-ng",
        a_node("16", "64Gi"),
        (tuning.min_size, tuning.max_size),
        tuning.labels,
    )
    assert cpa is not None
    # Then placeholders of an eighth of a node, on the group's nodes alone
    assert cpa.requests == {"cpu": "2000m", "memory": "8192Mi"}
    assert cpa.node_selector == cpa.node_labels == {GROUP_LABEL: "web-ng"}
    # scaled in linear mode so they take 40 % of the cores: 2 / 0.4 = 5 cores a replica;
    # the minimum's node and the maximum's ten, rounded up
    assert cpa.params == {"linear": {"coresPerReplica": 5.0, "min": 4, "max": 32}}
    # at five nodes (80 cores), 16 placeholders: 32 cores and 128 GiB, 40 % of both
    replicas = expected_replicas(cpa.params, 5, 80)
    assert replicas == 16
    assert replicas * 2 / 80 == replicas * 8 / (5 * 64) == 0.4


def test_a_memory_target_maps_through_the_cores_and_the_larger_room_wins() -> None:
    def reservation(resource: str, target: float) -> dict[str, Any]:
        return {
            "type": "CapacityReservation",
            "capacityReservation": {"resource": resource},
            "target": {"type": "Utilization", "averageUtilization": target},
        }

    # a memory target alone: held as the same share of the cores (the nodes are one shape)
    memory = policy({"metrics": [reservation("memory", 75)]})
    assert free_share(memory) == 25
    cpa = proportional(memory, "g", a_node("16", "64Gi"), (1, 10), {GROUP_LABEL: "g"})
    assert cpa is not None and cpa.params["linear"]["coresPerReplica"] == 8.0  # 2 / 0.25
    # cpu at 80 % and memory at 60 %: the room of the lower target, 40 %
    both = policy({"metrics": [reservation("cpu", 80), reservation("memory", 60)]})
    assert free_share(both) == 40
    # not mapped: a reservation of pods, a target not a share, a target of 100 %, none
    pods = policy({"metrics": [reservation("pods", 60)]})
    per_node = {
        "type": "CapacityReservation",
        "capacityReservation": {"resource": "cpu"},
        "target": {"type": "AverageValue", "averageValue": 10},
    }
    full = policy({"metrics": [reservation("cpu", 100)]})
    pending = policy({"metrics": [{"type": "PendingPods"}]})
    for unmapped in (pods, policy({"metrics": [per_node]}), full, pending):
        assert free_share(unmapped) is None
        assert proportional(unmapped, "g", a_node("16", "64Gi"), (1, 10), {}) is None


def test_a_group_that_scales_to_zero_gets_a_ladder_that_holds_nothing_at_zero() -> None:
    # Given the GPU inference policy (cpu at 80 %, minimum 0) on tainted 4-core nodes, a
    # group of 0 to 8: linear mode would keep one placeholder, and CA would start a GPU
    # node for it; placeholders on its last node would keep that node (nowhere to move)
    gpu = from_file("scenarios/policies/gpu-inference.yaml")
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    tuning = tune(gpu, "gpu-ng", 0, 8)
    cpa = proportional(gpu, "gpu-ng", a_node("4", "15Gi", [taint]), (0, 8), tuning.labels)
    assert cpa is not None
    # Then a ladder, one step a node count: none at zero nodes and at one, from two the
    # same count as linear mode's
    ladder = cpa.params["ladder"]["coresToReplicas"]
    assert ladder[:3] == [[0, 0], [4, 0], [8, 4]] and len(ladder) == 9  # 0.5 / 0.2 = 2.5
    assert expected_replicas(cpa.params, 0, 0) == expected_replicas(cpa.params, 1, 4) == 0
    for nodes in range(2, 9):
        linear = {"coresPerReplica": 2.5}
        assert expected_replicas(cpa.params, nodes, 4 * nodes) == linear_replicas(
            linear, nodes, 4 * nodes
        )
    # and the placeholders tolerate the group's taint, hold no GPU
    assert cpa.tolerations == [taint | {"operator": "Equal"}]
    assert set(cpa.requests) == {"cpu", "memory"} and cpa.requests["cpu"] == "500m"


def test_the_proportional_placeholders_are_a_deployment_of_pause_pods_at_priority_minus_1() -> None:
    microservices = from_file("policies/microservices.yaml")
    cpa = proportional(
        microservices, "web-ng", a_node("16", "64Gi"), (1, 10), {GROUP_LABEL: "web-ng"}
    )
    assert cpa is not None
    deployment = proportional_deployment(cpa)
    assert deployment.curve == [(0, 0)]  # none before CPA's first poll
    made = deployment._pod(T0)
    assert is_placeholder(made) and made["spec"]["priority"] == PLACEHOLDER_PRIORITY
    assert made["spec"]["nodeSelector"] == {GROUP_LABEL: "web-ng"}
    assert requests(made) == (16000 // SLICE, 64 * 2**30 // SLICE)
    # and the tuned run's settings say what ran: the shape and CPA's flags
    tuning = tune(microservices, "web-ng", 1, 10)
    tuning = replace(tuning, proportional=cpa)
    shown = settings(cluster_flags([tuning]), [tuning], [])["groups"]["web-ng"]["proportional"]
    assert shown["requests"] == cpa.requests
    assert shown["cluster-proportional-autoscaler"] == {
        "--target": "deployment/overprovisioning-web-ng-proportional",
        "--nodelabels": f"{GROUP_LABEL}=web-ng",
        "--poll-period-seconds": 10,
        "--default-params": {"linear": {"coresPerReplica": 5.0, "min": 4, "max": 32}},
    }


def test_cpa_polls_every_10_seconds_and_writes_the_count_to_the_deployment() -> None:
    # Given web-ng's CPA (5 cores a replica, 4 to 32) and two 16-core nodes of the group
    microservices = from_file("policies/microservices.yaml")
    cpa = proportional(
        microservices, "web-ng", a_node("16", "64Gi"), (1, 10), {GROUP_LABEL: "web-ng"}
    )
    assert cpa is not None
    store = Cluster()
    store.put("nodes", node("a", "web-ng", "16"))
    autoscaler = ProportionalAutoscaler(cpa, proportional_deployment(cpa))
    # When it starts: its first poll at once
    autoscaler.poll(0, 10, store)
    assert autoscaler.deployment.curve == [(0, 4)]  # ceil(16 / 5)
    # a node joins: seen at the next poll, not within its period
    store.put("nodes", node("b", "web-ng", "16"))
    autoscaler.poll(5, 5, store)
    assert autoscaler.deployment.curve == [(0, 4)]
    autoscaler.poll(10, 5, store)
    assert autoscaler.deployment.curve == [(0, 7)]  # ceil(32 / 5)
