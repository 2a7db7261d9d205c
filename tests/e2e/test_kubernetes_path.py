"""Through the handlers with a cluster: the microservices policy's capacity reservation read
from the loopback API server (kubeconfig, as the sandbox wires it) drives the ASG."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodescaler_tools.kube.apiserver import KubeApiServer

from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.kube import kubeconfig, node, pod

MICROSERVICES = {"nodescaler/enabled": "true", "nodescaler/policy": "microservices"}


@pytest.fixture
def api_server() -> Iterator[KubeApiServer]:
    with KubeApiServer(token="secret") as server:
        yield server


def instance_of(group: str) -> str:
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return str(described["AutoScalingGroups"][0]["Instances"][0]["InstanceId"])


def test_reserved_cpu_above_target_scales_the_group_out_and_pending_pods_cannot_scale_it_in(
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
        "pending-pods": ("missing", None),  # its producer is not built yet: it holds scale-in
    }
