"""The API server's JSON → compact nodes and pods: what the scheduler would reserve."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from nodescaler.adapters.k8s.conversion import node_from_json, pod_from_json
from nodescaler.adapters.k8s.evictions import _drain_pod
from nodescaler.adapters.k8s.json_fields import EvictedPod
from nodescaler.domain.cluster.snapshot import Resources, Snapshot, Taint

from tests.kube import node, pod

GIB = 2**30


def test_a_pod_reserves_its_containers_sum_or_largest_init_container_plus_overhead() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
        ],
        "initContainers": [
            {"name": "i", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}
        ],
        "overhead": {"cpu": "100m", "memory": "10Mi"},
    }
    parsed = pod_from_json(pod("p", "n1", spec=spec))
    assert parsed.requests == Resources(2100, (256 + 10) * 2**20, 1)


def test_daemon_set_mirror_priority_and_unschedulable_are_recognised() -> None:
    mirror = pod("m", "n1", owner="Node")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert pod_from_json(pod("d", "n1", owner="DaemonSet")).daemon_set
    assert pod_from_json(mirror).mirror
    pending = pod_from_json(pod("u", priority=-20))
    assert (pending.unschedulable, pending.priority, pending.node_name) == (True, -20, None)


def test_a_pod_with_a_bad_quantity_is_kept_with_its_problem_named() -> None:
    parsed = pod_from_json(pod("bad", "n1", memory="lots"))
    assert parsed.problem == "resources.requests: 'lots' is not a quantity"
    assert parsed.requests == Resources(pods=1)


def test_a_node_keeps_readiness_cordon_capacity_taints_and_instance() -> None:
    raw = node(
        "n1",
        "a",
        unschedulable=True,
        taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        provider_id="aws:///eu-west-1b/i-0123",
    )
    parsed = node_from_json(raw)
    assert (parsed.ready, parsed.schedulable, parsed.instance_id) == (True, False, "i-0123")
    assert parsed.allocatable == Resources(16000, 20 * GIB, 110)
    assert parsed.taints == (Taint("gpu", "true", "NoSchedule"),)
    assert node_from_json(node("n2", ready=False)).ready is False


def test_gpus_are_read_from_node_allocatable_and_pending_pod_requests() -> None:
    raw_node = node("g1", "gpu")
    raw_node["status"]["allocatable"] |= {"nvidia.com/gpu": "4", "hugepages-2Mi": "0"}
    assert node_from_json(raw_node).extended == {"nvidia.com/gpu": 4}
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "2"}}},
        ]
    }
    pending = pod_from_json(pod("train", spec=spec))
    assert pending.placement is not None
    assert pending.placement.extended_resources == {"nvidia.com/gpu": 3}
    bound = pod_from_json(pod("train", "g1", spec=spec))
    # a bound pod keeps it too (where could it go?), the same object as its twin's
    assert bound.placement is pending.placement


# Requests as Kubernetes counts them: "the highest of the sum of all app containers and
# native sidecars, and of each init container's request plus the sidecars started before
# it" (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/
# #resource-sharing-within-containers), plus the pod's overhead
# (https://kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/).
def _container(name: str, cpu: str, memory: str = "0", sidecar: bool = False) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": name,
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    return found | ({"restartPolicy": "Always"} if sidecar else {})


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "cpu", "memory_mib"),
    [
        ([("app", "1", "1Gi")], [], {}, 1000, 1024),
        # a regular init container larger than the app: its request
        ([("app", "1", "1Gi")], [("migrate", "2", "64Mi")], {}, 2000, 1024),
        # a native sidecar runs beside the app: added to it
        ([("app", "1", "1Gi")], [("proxy", "500m", "128Mi", True)], {}, 1500, 1152),
        # a sidecar started before an init container runs beside it too
        (
            [("app", "1", "1Gi")],
            [("proxy", "500m", "128Mi", True), ("migrate", "2", "2Gi")],
            {},
            2500,
            2048 + 128,
        ),
        # ... but not one started after it
        (
            [("app", "1", "1Gi")],
            [("migrate", "2", "2Gi"), ("proxy", "500m", "128Mi", True)],
            {},
            2000,
            2048,
        ),
        # two sidecars, one init container between them
        (
            [("app", "1", "1Gi")],
            [("mesh", "250m", "64Mi", True), ("seed", "3", "0"), ("logs", "250m", "64Mi", True)],
            {},
            3250,
            1024 + 128,
        ),
        # the RuntimeClass's overhead on top of all
        (
            [("app", "1", "1Gi")],
            [("proxy", "500m", "128Mi", True)],
            {"cpu": "250m", "memory": "120Mi"},
            1750,
            1272,
        ),
    ],
)
def test_given_init_containers_and_sidecars_when_read_then_requests_are_as_kubernetes_counts_them(
    containers: list[tuple[str, ...]],
    init: list[tuple[Any, ...]],
    overhead: dict[str, str],
    cpu: int,
    memory_mib: int,
) -> None:
    spec: dict[str, Any] = {
        "containers": [_container(*c) for c in containers],
        "initContainers": [_container(*c) for c in init],
    } | ({"overhead": overhead} if overhead else {})
    parsed = pod_from_json(pod("p", "n1", spec=spec))
    assert parsed.requests == Resources(cpu, memory_mib * 2**20, 1)


def test_given_a_gpu_sidecar_before_a_gpu_init_container_then_placement_asks_for_both() -> None:
    gpu = {"nvidia.com/gpu": "1"}
    spec = {
        "containers": [{"name": "app", "resources": {"requests": gpu}}],
        "initContainers": [
            {"name": "warm", "restartPolicy": "Always", "resources": {"requests": gpu}},
            {"name": "probe", "resources": {"requests": gpu}},
        ],
    }
    parsed = pod_from_json(pod("p", spec=spec))
    assert parsed.placement is not None
    assert parsed.placement.extended_resources == {"nvidia.com/gpu": 2}


def test_given_cluster_autoscalers_daemonset_pod_annotation_then_it_is_a_daemon_set_pod() -> None:
    # cluster-autoscaler/utils/pod: IsDaemonSetPod also takes the annotation
    marked = pod("agent", "n1", owner=None)
    marked["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}
    not_marked = pod("agent", "n1", owner=None)
    not_marked["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/daemonset-pod": "x"}
    assert (pod_from_json(marked).daemon_set, pod_from_json(not_marked).daemon_set) == (True, False)


@pytest.mark.parametrize(
    ("owner", "controlled"),
    [
        ("ReplicaSet", True),
        ("StatefulSet", True),
        ("Job", True),
        ("ReplicationController", True),
        ("SparkApplication", False),  # an operator's: Cluster Autoscaler keeps its node
        (None, False),
    ],
)
def test_a_pod_counts_as_replicated_only_by_a_controller_cluster_autoscaler_knows(
    owner: str | None, controlled: bool
) -> None:
    # rules/replicated/rule.go with --skip-nodes-with-custom-controller-pods (true)
    assert pod_from_json(pod("p", "n1", owner=owner)).controlled is controlled
    # a drain of a node going anyway evicts any controller's pod (it is remade elsewhere)
    wire = msgspec.json.decode(json.dumps(pod("p", "n1", owner=owner)), type=EvictedPod)
    assert _drain_pod(wire).controlled is (owner is not None)


def test_a_pod_is_a_jobs_only_when_a_job_is_its_controller() -> None:
    owned = pod("p", "n1", owner="Job")
    assert pod_from_json(owned).job
    owned["metadata"]["ownerReferences"][0]["controller"] = False  # a Job merely owns it
    assert not pod_from_json(owned).job


def test_given_a_pod_deleted_past_its_grace_period_then_the_snapshot_drops_it() -> None:
    # Cluster Autoscaler takes a pod terminating past its grace period (and 30 s more) as
    # gone (utils/drain/drain.go, IsPodLongTerminating)
    deleted = pod("old", "n1", spec={"terminationGracePeriodSeconds": 60})
    deleted["metadata"]["deletionTimestamp"] = "2026-11-23T09:00:00Z"
    parsed = pod_from_json(deleted)
    snapshot = Snapshot((), (parsed, pod_from_json(pod("live", "n1"))))
    at = datetime(2026, 11, 23, 9, 1, 30, tzinfo=UTC)
    assert [p.name for p in snapshot.at(at).pods] == ["old", "live"]  # 90 s: not yet
    later = at + timedelta(seconds=1)
    assert [p.name for p in snapshot.at(later).pods] == ["live"]


def test_a_pods_creation_time_is_read_with_its_zone_and_none_when_it_has_none() -> None:
    # what a kube-system pod's drain timeout counts from (rules/system/rule.go)
    stamped = pod("agent", "n1", namespace="kube-system")
    stamped["metadata"]["creationTimestamp"] = "2026-11-23T09:00:00+02:00"
    created = datetime(2026, 11, 23, 7, tzinfo=UTC)
    assert pod_from_json(stamped).created == created
    assert pod_from_json(pod("agent", "n1")).created is None  # the rule keeps its node


def _spread(term: dict[str, Any], **fields: Any) -> frozenset[str]:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    spec = {"affinity": anti}
    found = pod_from_json(pod("zk-1", labels={"app": "zk", "tier": "db"}, spec=spec, **fields))
    assert found.placement is not None
    return found.placement.apart


ZK = {"matchLabels": {"app": "zk"}}
ON_NODE = "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("term", "apart"),
    [
        ({"labelSelector": ZK, "topologyKey": ON_NODE}, True),
        (
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["zk"]}]
                },
                "topologyKey": ON_NODE,
            },
            True,
        ),
        ({"labelSelector": ZK, "topologyKey": ON_NODE, "namespaces": ["default"]}, True),
        # another workload's pods: a new node holds none of them
        ({"labelSelector": {"matchLabels": {"app": "kafka"}}, "topologyKey": ON_NODE}, False),
        # its own, in another namespace only
        ({"labelSelector": ZK, "topologyKey": ON_NODE, "namespaces": ["other"]}, False),
        # one a zone: not read (a new node's zone is Auto Scaling's choice)
        ({"labelSelector": ZK, "topologyKey": "topology.kubernetes.io/zone"}, False),
        ({"topologyKey": ON_NODE}, False),  # a null selector selects nothing
    ],
)
def test_a_required_anti_affinity_on_the_node_selecting_the_pod_itself_keeps_it_apart(
    term: dict[str, Any], apart: bool
) -> None:
    assert bool(_spread(term)) is apart


def test_a_host_port_keeps_pods_asking_it_apart() -> None:
    ports = [{"containerPort": 8080}, {"containerPort": 9100, "hostPort": 9100}]
    container = {"name": "exporter", "resources": {"requests": {"cpu": "100m"}}, "ports": ports}
    found = pod_from_json(pod("exporter-1", spec={"containers": [container]}))
    assert found.placement is not None
    assert found.placement.apart == frozenset({"host port TCP/9100"})


@pytest.mark.parametrize(
    "spec",
    [
        {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [7]}}},
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": ON_NODE,
                            "labelSelector": {"matchExpressions": [{"values": []}]},
                        }
                    ]
                }
            }
        },
        {"containers": [{"name": "a", "ports": [{"hostPort": "eighty"}]}]},
    ],
)
def test_a_pod_whose_placement_is_not_as_the_api_sends_it_is_named_and_left_alone(
    spec: dict[str, Any],
) -> None:
    # Given one pod's anti-affinity or ports malformed, When it is read, Then it is kept,
    # its problem named, and no other pod's reading is touched
    found = pod_from_json(pod("zk-1", labels={"app": "zk"}, spec=spec))
    assert found.problem is not None
    assert found.problem.startswith("spec.affinity or a container's ports: not as the API")
    assert pod_from_json(pod("web-1")).problem is None
