"""The cluster's CapacityBuffer objects (autoscaling.x-k8s.io/v1alpha1, as Cluster
Autoscaler 1.34 and Karpenter 1.14 read them: kubernetes/autoscaler
cluster-autoscaler/apis/capacitybuffer) read into virtual pods, or named and ignored."""

from __future__ import annotations

from typing import Any

import pytest
from nodescaler.adapters.k8s.objects import node_from_json, pod_from_json
from nodescaler.domain.cluster import Snapshot
from nodescaler.domain.cluster_buffers import Workload, describe, read_buffer, with_buffers

from tests.kube import node, pod

TEMPLATE = pod_from_json(
    {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }
)
TEMPLATES = {("shop", "web"): TEMPLATE}


def buffer(spec: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "shop"},
        "spec": spec,
    } | top


def test_given_a_template_and_replicas_when_read_then_that_many_pods_of_its_shape() -> None:
    read = read_buffer(buffer({"podTemplateRef": {"name": "web"}, "replicas": 4}), TEMPLATES)
    assert read.problem is None
    assert [p.name for p in read.pods] == [f"headroom-buffer-{n}" for n in range(4)]
    assert {(p.namespace, p.requests.cpu_millis, p.controlled) for p in read.pods} == {
        ("shop", 1000, True)
    }


def test_given_limits_below_the_replicas_when_read_then_the_limits_cap_the_pods() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 10, "limits": {"cpu": "3"}}
    assert len(read_buffer(buffer(spec), TEMPLATES).pods) == 3


def test_given_limits_alone_when_read_then_as_many_pods_as_they_hold() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "limits": {"cpu": "8", "memory": "5Gi"}}
    assert len(read_buffer(buffer(spec), TEMPLATES).pods) == 5


@pytest.mark.parametrize(
    ("obj", "named"),
    [
        (
            buffer({"podTemplateRef": {"name": "web"}, "replicas": 2, "percentage": 10}),
            "spec.replicas and spec.percentage are both set: give one",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}}),
            "neither spec.replicas nor spec.percentage nor spec.limits is set",
        ),
        (
            buffer({"podTemplateRef": {"name": "gone"}, "replicas": 2}),
            "PodTemplate shop/gone does not exist",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}, "replicas": -1}),
            "spec.replicas: -1 is not a whole number of 0 or more",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "-2"}}),
            "spec.limits.cpu: '-2' is negative",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}, "replicas": 1}, apiVersion="x/v9"),
            "apiVersion x/v9 is not one nodescaler reads (autoscaling.x-k8s.io/v1alpha1)",
        ),
        (
            buffer({"replicas": 1}),
            "spec.podTemplateRef.name is not set",
        ),
        (
            buffer({"scalableRef": {"apiGroup": "apps", "kind": "StatefulSet", "name": "db"}}),
            "spec.scalableRef: 'StatefulSet': nodescaler reads an apps Deployment only",
        ),
        (
            buffer({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "x"}}),
            "Deployment shop/x does not exist",
        ),
    ],
)
def test_given_a_malformed_buffer_when_read_then_it_is_named_and_has_no_pods(
    obj: dict[str, Any], named: str
) -> None:
    read = read_buffer(obj, TEMPLATES)
    assert (read.problem, read.pods) == (named, ())
    assert describe(read, {}) == f"CapacityBuffer shop/headroom ignored: {named}"


def test_given_free_room_for_one_when_settled_then_one_is_bound_and_the_rest_pending() -> None:
    """Given a Ready 2-cpu node with 1 cpu used and a buffer of 3 × 1 cpu, when the buffers
    are settled, then one buffer pod takes the free cpu and two are pending."""
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 3}
    listed = Snapshot(
        (node_from_json(node("n-1", cpu="2", memory="8Gi")),),
        (pod_from_json(pod("app", "n-1", cpu="1")),),
        buffers=(read_buffer(buffer(spec), TEMPLATES),),
    )
    settled = with_buffers(listed)
    virtual = [p for p in settled.pods if p.name.startswith("headroom-")]
    assert sorted((p.node_name or "", p.unschedulable) for p in virtual) == [
        ("", True),
        ("", True),
        ("n-1", False),
    ]
    assert describe(settled.buffers[0], {"ng-a": virtual[1:]}) == (
        "CapacityBuffer shop/headroom: 3 pods, 1 in free room, 2 pending (ng-a 2)"
    )


def test_given_another_provisioning_strategy_when_read_then_ignored_but_not_malformed() -> None:
    """A strategy nodescaler does not provision is valid: named, no pods, and no doubt."""
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 2, "provisioningStrategy": "x/other"}
    read = read_buffer(buffer(spec), TEMPLATES)
    assert (read.problem, read.pods) == (None, ())
    assert describe(read, {}) == (
        "CapacityBuffer shop/headroom ignored: provisioningStrategy x/other is not "
        "buffer.x-k8s.io/active-capacity"
    )


WEB = {("shop", "web"): Workload(10, TEMPLATE)}


@pytest.mark.parametrize(
    ("amount", "pods"),
    [
        ({"percentage": 20}, 2),
        ({"percentage": 5}, 1),
        ({"percentage": 25}, 3),
        ({"replicas": 4}, 4),
    ],
)
def test_given_a_deployment_of_10_when_a_buffer_scales_it_then_its_share_rounded_up(
    amount: dict[str, int], pods: int
) -> None:
    """CA's API: a percentage of the scalableRef's replicas, rounded up, at least 1."""
    ref = {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}}
    read = read_buffer(buffer(ref | amount), {}, WEB)
    assert (read.problem, len(read.pods)) == (None, pods)
    assert {p.requests.cpu_millis for p in read.pods} == {1000}
