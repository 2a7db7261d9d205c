"""Through the handlers with a cluster: the microservices policy's capacity reservation read
from the loopback API server (kubeconfig, as the sandbox wires it) drives the ASG."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.kube import kubeconfig, node, pod

MICROSERVICES = {"nodescaler/enabled": "true", "nodescaler/policy": "microservices"}


@pytest.fixture
def api_server() -> Iterator[KubeApiServer]:
    with KubeApiServer(token="secret") as server:
        yield server


@pytest.fixture
def against_cluster(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> Callable[..., Deployment]:
    """The functions deployed against the loopback API server, with these settings too."""

    def deployed(**environment: str) -> Deployment:
        config = str(kubeconfig(tmp_path / "kubeconfig", api_server.url))
        return Deployment(policies, calls, clock, {"KUBECONFIG_PATH": config, **environment})

    return deployed


def instance_of(group: str) -> str:
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return str(described["AutoScalingGroups"][0]["Instances"][0]["InstanceId"])


def test_reserved_cpu_above_target_scales_the_group_out(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
    output: Any,
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    deployment = Deployment(policies, calls, clock, {"KUBECONFIG_PATH": str(config)})
    make_asg("web-nodes", tags=MICROSERVICES, desired=1, min_size=1, max_size=50)
    # the reference example: one 16-core node, eleven 1-core pods → 68.75 % against 60 %
    api_server.cluster.put(
        "nodes", node("ip-1", None, provider_id=f"aws:///eu-west-1a/{instance_of('web-nodes')}")
    )
    for i in range(11):
        api_server.cluster.put("pods", pod(f"web-{i}", "ip-1"))

    deployment.tick()

    assert desired_capacity("web-nodes") == 2
    decision = next(line["decision"] for line in output().logs if "decision" in line)
    metrics = {m["name"]: (m["status"], m["value"]) for m in decision["metrics"]}
    assert metrics == {
        "reservation-cpu": ("ok", 68.75),
        "reservation-memory": ("ok", 55.0),
        "pending-pods": ("abstained", 0.0),  # nothing pending: no opinion
    }


BATCH_POLICY = """
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: batch}
spec:
  minReplicas: 0
  maxReplicas: 20
  metrics:
    - type: PendingPods
"""


def launch_template(name: str, instance_type: str) -> None:
    client("ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"InstanceType": instance_type, "ImageId": "ami-12c6146b"},
    )


def group_at_zero(name: str, template: str, tags: dict[str, str] | None = None) -> None:
    batch = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}
    make_asg(name, tags=batch | (tags or {}), max_size=20, launch_template=template)


@pytest.fixture
def batch(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> Deployment:
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    launch_template("general", "m5.large")  # 2 vCPU, 8 GiB
    launch_template("gpu", "g5.xlarge")
    return Deployment(policies, calls, clock, {"KUBECONFIG_PATH": str(config)})


def test_a_group_at_zero_scales_up_for_a_pod_that_fits_its_instance_type(
    batch: Deployment, api_server: KubeApiServer, output: Any
) -> None:
    group_at_zero("general-ng", "general")
    for i in range(5):
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="500m", memory="1Gi"))
    batch.tick()
    # m5.large: 2 vCPU less EKS's 70m reserved holds three 500m pods: 5 pods, 2 nodes
    assert desired_capacity("general-ng") == 2
    # and the group reports the 5 pending pods its new nodes take (the dashboard's graph)
    assert output().metric("PendingPods", "general-ng") == [5]


def test_a_group_at_zero_does_not_scale_for_a_pod_its_labels_or_taints_exclude(
    batch: Deployment, api_server: KubeApiServer, output: Any
) -> None:
    group_at_zero(
        "gpu-ng",
        "gpu",
        {"k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoSchedule"},
    )
    group_at_zero("general-ng", "general")
    api_server.cluster.put(
        "pods", pod("wants-gpu-label", cpu="1", spec={"nodeSelector": {"accelerator": "a10"}})
    )
    api_server.cluster.put("pods", pod("plain", cpu="1"))
    batch.tick()
    # the plain pod fits general-ng only (gpu-ng is tainted); the labelled pod fits neither
    assert (desired_capacity("general-ng"), desired_capacity("gpu-ng")) == (1, 0)
    details = [
        m["detail"]
        for line in output().logs
        if "decision" in line
        for m in line["decision"]["metrics"]
    ]
    assert (
        "2 pending pods: +1 nodes here, +0 in other groups, 1 fit no group "
        "(default/wants-gpu-label: general-ng: nodeSelector accelerator=a10 does not match; "
        "gpu-ng: nodeSelector accelerator=a10 does not match)"
    ) in details


def test_priority_expander_sends_pods_that_fit_both_groups_to_the_preferred_one(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> None:
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    launch_template("general", "m5.large")
    chain = '[{"name": "priority", "priorities": {"10": ["spot-.*"], "1": [".*"]}}]'
    deployment = Deployment(
        policies,
        calls,
        clock,
        {"KUBECONFIG_PATH": str(kubeconfig(tmp_path / "kc", api_server.url)), "EXPANDERS": chain},
    )
    group_at_zero("on-demand-ng", "general")
    group_at_zero("spot-ng", "general")
    api_server.cluster.put("pods", pod("job", cpu="1"))
    deployment.tick()
    assert (desired_capacity("spot-ng"), desired_capacity("on-demand-ng")) == (1, 0)


def test_a_gpu_pod_goes_to_the_gpu_group_at_zero_and_a_cpu_pod_does_not(
    batch: Deployment, api_server: KubeApiServer
) -> None:
    taint = {"k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoSchedule"}
    group_at_zero("gpu-ng", "gpu", taint)
    group_at_zero("general-ng", "general")
    training = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {"name": "train", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}
        ],
    }
    for i in range(3):
        api_server.cluster.put("pods", pod(f"train-{i}", spec=training))
    batch.tick()
    # g5.xlarge has one NVIDIA GPU: three one-GPU pods need three nodes; m5.large has none
    assert (desired_capacity("gpu-ng"), desired_capacity("general-ng")) == (3, 0)


def test_a_group_at_zero_with_a_bad_template_tag_is_held_and_named_while_others_scale(
    batch: Deployment, api_server: KubeApiServer, output: Any
) -> None:
    group_at_zero(
        "broken-ng", "general", {"k8s.io/cluster-autoscaler/node-template/resources/memory": "lots"}
    )
    group_at_zero("general-ng", "general")
    api_server.cluster.put("pods", pod("job", cpu="500m"))
    batch.tick()
    assert (desired_capacity("general-ng"), desired_capacity("broken-ng")) == (1, 0)
    broken = next(line for line in output().logs if line.get("node_group") == "broken-ng")
    (pending,) = broken["decision"]["metrics"]
    assert pending["status"] == "missing"
    assert pending["detail"] == (
        "node group broken-ng: no template of its nodes: tag "
        "k8s.io/cluster-autoscaler/node-template/resources/memory: 'lots' is not a quantity"
    )


def test_a_preferred_group_at_its_maximum_leaves_the_rest_of_the_pods_to_the_next_group(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> None:
    # Airbnb's Spot-first chain with a small Spot group: it must not starve on-demand.
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    launch_template("general", "m5.large")  # 2 vCPU: one 1-core pod a node
    chain = '[{"name": "priority", "priorities": {"10": ["spot-.*"], "1": [".*"]}}]'
    config = str(kubeconfig(tmp_path / "kc", api_server.url))
    deployment = Deployment(policies, calls, clock, {"KUBECONFIG_PATH": config, "EXPANDERS": chain})
    batch = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}
    make_asg("spot-ng", tags=batch, max_size=3, launch_template="general")
    make_asg("on-demand-ng", tags=batch, max_size=20, launch_template="general")
    for i in range(8):
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1"))

    deployment.tick()
    assert (desired_capacity("spot-ng"), desired_capacity("on-demand-ng")) == (3, 5)

    clock.advance(minutes=1)  # nodes booting: the same pods add nothing more
    deployment.tick()
    assert (desired_capacity("spot-ng"), desired_capacity("on-demand-ng")) == (3, 5)


WEB_POLICY = """
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: web}
spec:
  minReplicas: 1
  maxReplicas: 20
  metrics:
    - type: PendingPods
      pendingPods:
        buffer:
          - pods: 4
            requests: {cpu: "1", memory: 1Gi}
"""


def test_a_buffer_keeps_room_for_pods_not_yet_created_and_explains_it(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    output: Any,
) -> None:
    # Given a web group of two 16-core nodes, 15 cores requested on each: room for 2 × 1 cpu
    (policies / "web.yaml").write_text(WEB_POLICY)
    deployment = against_cluster()
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}
    make_asg("web-nodes", tags=tags, desired=2, min_size=1, max_size=20)
    group = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["web-nodes"])
    for index, instance in enumerate(group["AutoScalingGroups"][0]["Instances"]):
        name = f"ip-{index}"
        provider = f"aws:///eu-west-1a/{instance['InstanceId']}"
        api_server.cluster.put("pods", pod(f"web-{index}", name, cpu="15"))
        api_server.cluster.put("nodes", node(name, None, provider_id=provider))

    # When nodescaler evaluates the group with nothing pending
    deployment.tick()

    # Then the buffer of four 1-core pods, two of which fit now, asks for one node more
    assert desired_capacity("web-nodes") == 3
    decision = next(line["decision"] for line in output().logs if "decision" in line)
    (pending,) = decision["metrics"]
    assert pending["detail"] == (
        "0 pending pods: +0 nodes here, +0 in other groups; "
        "buffer: room for 4 × 1 cpu/1Gi: 2 of 4 fit now, +1 nodes for the rest"
    )
    # its pods and its buffer need 3 nodes (34 cores): the demand a forecast would learn
    assert pending["needed"] == 3


def test_a_buffer_no_node_can_hold_is_named_and_pending_pods_still_get_their_nodes(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    output: Any,
) -> None:
    nowhere = "          - {pods: 2, requests: {cpu: '1'}, nodeSelector: {tier: nowhere}}\n"
    buffered = "    - type: PendingPods\n      pendingPods:\n        buffer:\n" + nowhere
    (policies / "batch.yaml").write_text(
        BATCH_POLICY.replace("    - type: PendingPods\n", buffered)
    )
    launch_template("general", "m5.large")
    deployment = against_cluster()
    group_at_zero("general-ng", "general")
    api_server.cluster.put("pods", pod("job", cpu="1"))
    deployment.tick()
    assert desired_capacity("general-ng") == 1
    (pending,) = next(line for line in output().logs if "decision" in line)["decision"]["metrics"]
    assert "buffer: room for 2 × 1 cpu: a buffer pod nodeSelector tier=nowhere" in pending["detail"]


CANDIDATE = "nodescaler.io/deletion-candidate"


def two_batch_nodes(api_server: KubeApiServer, **tags: str) -> Callable[[str], list[str]]:
    """A batch group of two nodes, one running a job and one empty; the node's taints' keys."""
    make_asg(
        "batch-ng",
        tags={"nodescaler/enabled": "true", "nodescaler/policy": "batch"} | tags,
        desired=2,
        max_size=20,
    )
    described = client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=["batch-ng"]
    )
    for index, instance in enumerate(described["AutoScalingGroups"][0]["Instances"]):
        provider = f"aws:///eu-west-1a/{instance['InstanceId']}"
        api_server.cluster.put(
            "nodes",
            node(
                f"ip-{index}",
                None,
                provider_id=provider,
                taints=[{"key": "team", "value": "batch", "effect": "NoSchedule"}],
            ),
        )
    api_server.cluster.put("pods", pod("job-0", "ip-0", cpu="4", spec=TOLERANT))

    def taints(name: str) -> list[str]:
        found = api_server.cluster.get("nodes", ("", name))["spec"].get("taints") or []
        return [t["key"] for t in found]

    return taints


TOLERANT = {"tolerations": [{"key": "team", "operator": "Exists"}]}


def test_a_node_the_group_means_to_shed_is_soft_tainted_until_it_is_needed_again(
    batch: Deployment, api_server: KubeApiServer, clock: VirtualClock
) -> None:
    # Given a batch group of two nodes, one running a job and one empty
    taints = two_batch_nodes(api_server)

    # When nodescaler evaluates it: the empty node is marked, its own taint kept
    batch.tick()
    assert (taints("ip-0"), taints("ip-1")) == (["team"], ["team", CANDIDATE])

    # and when a pending job could use the group's nodes again, the mark goes
    api_server.cluster.put("pods", pod("job-1", cpu="15", spec=TOLERANT))
    clock.advance(minutes=1)
    batch.tick()
    assert taints("ip-1") == ["team"]


def test_while_scale_in_is_paused_no_node_is_marked_to_leave(
    batch: Deployment, api_server: KubeApiServer
) -> None:
    taints = two_batch_nodes(api_server, **{"nodescaler/paused": "scale-in"})
    batch.tick()
    assert (taints("ip-0"), taints("ip-1")) == (["team"], ["team"])
    assert desired_capacity("batch-ng") == 2


BUFFERED_POLICY = """
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: buffered}
spec:
  minReplicas: 0
  maxReplicas: 20
  metrics:
    - type: PendingPods
      pendingPods:
        buffer: [{pods: 1, requests: {cpu: "16"}}]
"""
ROOM = "nodescaler.io/buffer-room"


def group_of_nodes(api_server: KubeApiServer, name: str, policy: str, count: int) -> None:
    """An opted-in group of `count` registered 16-core nodes, `<name>-<n>`."""
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": policy}
    make_asg(name, tags=tags, desired=count, max_size=20)
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])
    for index, instance in enumerate(described["AutoScalingGroups"][0]["Instances"]):
        provider = f"aws:///eu-west-1a/{instance['InstanceId']}"
        api_server.cluster.put("nodes", node(f"{name}-{index}", None, provider_id=provider))


def test_while_a_group_sheds_a_node_the_empty_node_its_buffer_needs_is_marked_as_room(
    policies: Path, against_cluster: Callable[..., Deployment], api_server: KubeApiServer
) -> None:
    # Given a group whose buffer wants a whole 16-core node: its empty web-ng-0, and
    # web-ng-1 with one 1-core pod that may run on another group's node
    (policies / "buffered.yaml").write_text(BUFFERED_POLICY)
    group_of_nodes(api_server, "web-ng", "buffered", 2)
    api_server.cluster.put("nodes", node("other", None, labels={"pool": "spare"}))
    spare_only = {"nodeSelector": {"pool": "spare"}}
    api_server.cluster.put("pods", pod("web-0", "web-ng-1", spec=spare_only))

    # When nodescaler evaluates it
    against_cluster().tick()

    # Then web-ng-1, whose pod can move, is marked to leave, and the empty web-ng-0 as the buffer's
    # room, so the scheduler puts the moved pod elsewhere and the termination policy
    # takes ip-1 (else the empty node went, and the buffer bought one back)
    keys = {
        name: [
            t["key"]
            for t in api_server.cluster.get("nodes", ("", name))["spec"].get("taints") or []
        ]
        for name in ("web-ng-0", "web-ng-1", "other")
    }
    assert keys == {"web-ng-0": [ROOM], "web-ng-1": [CANDIDATE], "other": []}


@pytest.mark.parametrize(
    ("batch_policy", "web_status"), [("batch", "unneeded"), ("buffered", "abstained")]
)
def test_a_pod_a_scale_in_moves_never_takes_another_groups_buffer_room(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    output: Any,
    batch_policy: str,
    web_status: str,
) -> None:
    # Given web's one node running one small pod, and batch's one empty node, kept free by
    # batch's buffer (a whole node) or not
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    (policies / "buffered.yaml").write_text(BUFFERED_POLICY)
    group_of_nodes(api_server, "web-ng", "batch", 1)
    group_of_nodes(api_server, "batch-ng", batch_policy, 1)
    api_server.cluster.put("pods", pod("web-0", "web-ng-0"))

    # When nodescaler evaluates both
    against_cluster().tick()

    # Then web's node goes only where batch keeps no room: else its pod would take the
    # buffer's room, and batch would buy a node back for it
    (web,) = [line["decision"] for line in output().logs if line.get("node_group") == "web-ng"]
    assert web["metrics"][0]["status"] == web_status


def test_two_groups_never_shed_a_node_each_onto_the_others(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    clock: VirtualClock,
) -> None:
    # Given two groups of one node each, each running one small pod that fits on the other
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    for name in ("web-ng", "batch-ng"):
        group_of_nodes(api_server, name, "batch", 1)
        api_server.cluster.put("pods", pod(f"{name}-pod", f"{name}-0"))

    # When nodescaler evaluates both on the same listing, past their scale-down windows
    deployment = against_cluster()
    deployment.tick()
    clock.advance(minutes=11)
    deployment.tick()

    # Then one sheds its node onto the other's, and the other keeps its node for that pod
    assert sorted(desired_capacity(g) for g in ("web-ng", "batch-ng")) == [0, 1]


def test_with_balance_three_zone_groups_at_zero_grow_together_and_say_so(
    policies: Path,
    against_cluster: Callable[..., Deployment],
    api_server: KubeApiServer,
    output: Any,
) -> None:
    """Given three groups at zero of one instance type, each a zone by its node-template tag,
    and a chain ending in balance, when seven one-core pods are pending (a node each on an
    m5.large), then the groups grow 3, 2 and 2, and each decision names the others' share."""
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    launch_template("general", "m5.large")
    deployment = against_cluster(EXPANDERS='[{"name": "least-waste"}, {"name": "balance"}]')
    zone_tag = "k8s.io/cluster-autoscaler/node-template/label/topology.kubernetes.io/zone"
    for zone in "abc":
        group_at_zero(f"web-{zone}", "general", {zone_tag: f"eu-west-1{zone}"})
    for i in range(7):
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1"))

    deployment.tick()

    sizes = [desired_capacity(f"web-{zone}") for zone in "abc"]
    assert sorted(sizes) == [2, 2, 3]
    details = {
        line["node_group"]: line["decision"]["metrics"][0]["detail"]
        for line in output().logs
        if "decision" in line
    }
    shares = dict(zip(("web-a", "web-b", "web-c"), sizes, strict=True))
    assert set(details) == set(shares)
    for group, detail in details.items():
        others = ", ".join(f"{g} +{n}" for g, n in shares.items() if g != group)
        assert detail.endswith(f"(balanced with {others})")
