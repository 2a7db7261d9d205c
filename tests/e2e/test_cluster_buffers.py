"""Through the evaluate handler with a cluster: a namespace's own CapacityBuffer
(autoscaling.x-k8s.io/v1alpha1, as Cluster Autoscaler 1.34 reads it: kubernetes/autoscaler
cluster-autoscaler/apis/capacitybuffer) grows a group, and a malformed one is named and
never a reason to scale in."""

from __future__ import annotations

from typing import Any

from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import desired_capacity
from tests.builders import VirtualClock
from tests.e2e import test_kubernetes_path as kubernetes_path
from tests.e2e.conftest import Deployment
from tests.e2e.test_kubernetes_path import group_at_zero, two_batch_nodes
from tests.kube import pod

TEMPLATE = {
    "metadata": {"name": "web", "namespace": "shop"},
    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
}


# the same loopback API server and batch policy (its fixtures)
api_server, batch = kubernetes_path.api_server, kubernetes_path.batch


def capacity_buffer(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "shop"},
        "spec": {"podTemplateRef": {"name": "web"}} | spec,
    }


def pending_metric(output: Any, group: str) -> dict[str, Any]:
    line = next(line for line in output().logs if line.get("node_group") == group)
    (pending,) = line["decision"]["metrics"]
    return dict(pending)


def test_a_namespaces_buffer_of_four_1_cpu_pods_grows_a_group_at_zero_and_says_so(
    batch: Deployment, api_server: KubeApiServer, output: Any
) -> None:
    # Given a batch group at zero of m5.large (2 vCPU less EKS's 70m: one 1-cpu pod a node)
    group_at_zero("general-ng", "general")
    # and a team's CapacityBuffer of 4 pods of its 1-cpu PodTemplate, nothing pending
    api_server.cluster.put("podtemplates", TEMPLATE)
    api_server.cluster.put("capacitybuffers", capacity_buffer(replicas=4))

    # When nodescaler evaluates the group
    batch.tick()

    # Then the group grows by the 4 nodes the buffer's pods need, and the decision says why
    assert desired_capacity("general-ng") == 4
    assert pending_metric(output, "general-ng")["detail"] == (
        "4 pending pods: +4 nodes here, +0 in other groups; "
        "CapacityBuffer shop/headroom: 4 pods, 0 in free room, 4 pending (general-ng 4)"
    )


def test_a_buffer_with_replicas_and_percentage_is_named_and_no_node_is_shed(
    batch: Deployment, api_server: KubeApiServer, clock: VirtualClock, output: Any
) -> None:
    # Given a batch group of two nodes, one empty (which it would otherwise mark and shed)
    taints = two_batch_nodes(api_server)
    # and a CapacityBuffer that gives both replicas and percentage
    api_server.cluster.put("podtemplates", TEMPLATE)
    api_server.cluster.put("capacitybuffers", capacity_buffer(replicas=2, percentage=10))

    # When nodescaler evaluates the group, and again well past any scale-in delay
    batch.tick()
    clock.advance(minutes=30)
    batch.tick()

    # Then the buffer is named, the pending-pods metric has no vote, and no node is shed
    pending = pending_metric(output, "batch-ng")
    assert pending["status"] == "missing"
    assert pending["detail"] == (
        "node group batch-ng: CapacityBuffer shop/headroom ignored: "
        "spec.replicas and spec.percentage are both set: give one"
    )
    assert taints("ip-1") == ["team"]  # not marked to leave
    assert desired_capacity("batch-ng") == 2


def test_a_buffer_pod_no_group_fits_gets_no_event_while_a_real_pod_does(
    batch: Deployment, api_server: KubeApiServer
) -> None:
    # Given a group at zero of m5.large and a buffer of one 4-cpu pod, which fits no node
    group_at_zero("general-ng", "general")
    big = TEMPLATE | {"metadata": {"name": "big", "namespace": "shop"}}
    big["template"] = {"spec": {"containers": [{"resources": {"requests": {"cpu": "4"}}}]}}
    api_server.cluster.put("podtemplates", big)
    buffer = capacity_buffer(replicas=1)
    buffer["spec"]["podTemplateRef"] = {"name": "big"}
    api_server.cluster.put("capacitybuffers", buffer)
    # and a real 4-cpu pod, pending
    api_server.cluster.put("pods", pod("real", cpu="4"))

    # When nodescaler evaluates the group
    batch.tick()

    # Then the real pod is told why it waits (NotTriggerScaleUp), the virtual one is not
    told = [e["involvedObject"]["name"] for e in api_server.cluster.objects["events"].values()]
    assert told == ["real"]
    assert desired_capacity("general-ng") == 0
