"""Through the evaluate handler with a cluster: a namespace's own CapacityBuffer
(autoscaling.x-k8s.io/v1alpha1, as Cluster Autoscaler 1.34 reads it: kubernetes/autoscaler
cluster-autoscaler/apis/capacitybuffer) grows a group, and a malformed one is named and
never a reason to scale in; one namespace's hostile buffer (a quantity no buffer can hold,
more pods than a buffer may ask for) is named while the group's other metrics decide."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e import test_kubernetes_path as kubernetes_path
from tests.e2e.conftest import Deployment
from tests.e2e.test_kubernetes_path import group_at_zero, launch_template, two_batch_nodes
from tests.kube import pod

TEMPLATE = {
    "metadata": {"name": "web", "namespace": "shop"},
    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
}


# the same loopback API server and batch policy (its fixtures)
api_server, batch = kubernetes_path.api_server, kubernetes_path.batch
against_cluster = kubernetes_path.against_cluster


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


# Pending pods, and a schedule that holds the group at 3 outside Saturday nights
BUFFERED_POLICY = """
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: buffered}
spec:
  minReplicas: 0
  maxReplicas: 20
  metrics:
    - type: PendingPods
    - type: Schedule
      schedule:
        defaultReplicas: 3
        entries:
          - {start: "0 22 * * SAT", end: "0 23 * * SAT", replicas: 5}
"""


def buffered_group(policies: Path) -> None:
    (policies / "buffered.yaml").write_text(BUFFERED_POLICY)
    launch_template("general", "m5.large")  # 2 vCPU less EKS's 70m: one 1-cpu pod a node
    group_at_zero("general-ng", "general", {"nodescaler/policy": "buffered"})


def test_a_buffer_whose_limit_no_quantity_can_hold_is_named_and_the_schedule_still_decides(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    output: Any,
) -> None:
    # Given a group at zero whose schedule asks for 3 nodes now, besides its pending pods
    buffered_group(policies)
    deployment = against_cluster()
    # and one team's CapacityBuffer limited to 1e30 cpu (once: decimal.DivisionImpossible,
    # three failed evaluations and a dead letter, the group left where it was)
    api_server.cluster.put("podtemplates", TEMPLATE)
    api_server.cluster.put("capacitybuffers", capacity_buffer(limits={"cpu": "1e30"}))

    # When nodescaler evaluates the group
    deployment.tick()

    # Then the schedule decides, the buffer is named with its field, nothing is dead-lettered
    assert desired_capacity("general-ng") == 3
    line = next(line for line in output().logs if line.get("node_group") == "general-ng")
    metrics = {m["name"]: m for m in line["decision"]["metrics"]}
    assert metrics["pending-pods"]["status"] == "missing"  # doubt: holds scale-in
    assert metrics["pending-pods"]["detail"] == (
        "node group general-ng: CapacityBuffer shop/headroom ignored: spec.limits.cpu: "
        "'1e30' is more than Kubernetes' largest quantity (9223372036854775807)"
    )
    assert deployment.dead_letters() == []


def test_while_a_buffer_cannot_be_read_the_group_is_not_scaled_in(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    clock: VirtualClock,
    output: Any,
) -> None:
    # Given a group of 5 whose schedule asks for 3 now, and a buffer limited to 1e999999 bytes
    (policies / "buffered.yaml").write_text(BUFFERED_POLICY)
    launch_template("general", "m5.large")
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "buffered"}
    make_asg("general-ng", tags=tags, desired=5, max_size=20, launch_template="general")
    deployment = against_cluster()
    api_server.cluster.put("podtemplates", TEMPLATE)
    api_server.cluster.put("capacitybuffers", capacity_buffer(limits={"memory": "1e999999"}))

    # When nodescaler evaluates the group, and again well past any scale-in delay
    deployment.tick()
    clock.advance(minutes=30)
    deployment.tick()

    # Then it keeps its 5 nodes (doubt holds scale-in), the buffer named, nothing dead-lettered
    assert desired_capacity("general-ng") == 5
    assert pending_metric_of(output, "general-ng")["detail"] == (
        "node group general-ng: CapacityBuffer shop/headroom ignored: spec.limits.memory: "
        "'1e999999' is more than Kubernetes' largest quantity (9223372036854775807)"
    )
    assert deployment.dead_letters() == []


def test_a_buffer_of_10000_pods_holds_at_most_the_cap_and_the_decision_names_it(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    output: Any,
) -> None:
    # Given a group at zero (schedule: 3 now), and at most 4 pods a buffer
    buffered_group(policies)
    deployment = against_cluster(CLUSTER_BUFFER_MAX_PODS="4")
    # and one team's buffer of 10,000 1-cpu pods (once: the group's max, 20 nodes)
    api_server.cluster.put("podtemplates", TEMPLATE)
    api_server.cluster.put("capacitybuffers", capacity_buffer(replicas=10_000))

    # When nodescaler evaluates the group
    deployment.tick()

    # Then the buffer asks room for 4 pods: 4 nodes, above the schedule's 3, and says why
    assert desired_capacity("general-ng") == 4
    assert pending_metric_of(output, "general-ng")["detail"] == (
        "4 pending pods: +4 nodes here, +0 in other groups; CapacityBuffer shop/headroom: "
        "4 pods (capped: 10,000 asked, at most 4 a buffer), 0 in free room, 4 pending "
        "(general-ng 4)"
    )


def pending_metric_of(output: Any, group: str) -> dict[str, Any]:
    line = next(line for line in output().logs if line.get("node_group") == group)
    return dict(next(m for m in line["decision"]["metrics"] if m["name"] == "pending-pods"))
