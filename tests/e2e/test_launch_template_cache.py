"""Airbnb's launch-template cache: node shapes of groups at zero are looked up once per
launch template and instance type, per TTL (about 20 minutes), not once per group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import CallCounter
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.e2e.test_kubernetes_path import BATCH_POLICY, group_at_zero, launch_template
from tests.kube import kubeconfig, pod

# 5 launch templates, 3 instance types
TEMPLATES = {
    "t-a": "m5.large",
    "t-b": "m5.xlarge",
    "t-c": "c5.large",
    "t-d": "m5.large",
    "t-e": "c5.large",
}


@pytest.fixture
def api_server() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        server.cluster.put("pods", pod("job", cpu="1"))  # pending: every group is planned
        yield server


def empty_groups(
    count: int, policies: Path, calls: CallCounter, clock: VirtualClock, config: Path
) -> tuple[Deployment, CallCounter]:
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    for name, instance_type in TEMPLATES.items():
        launch_template(name, instance_type)
    templates = list(TEMPLATES)
    for i in range(count):
        group_at_zero(f"ng-{i:03}", templates[i % len(templates)])
    deployment = Deployment(policies, calls, clock, {"KUBECONFIG_PATH": str(config)})
    ec2 = CallCounter()
    ec2.watch(deployment.clients.ec2)
    return deployment, ec2


def test_a_tick_over_200_empty_groups_looks_up_each_template_once(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    deployment, ec2 = empty_groups(200, policies, calls, clock, config)
    deliveries = deployment.tick()
    assert sum(d.received for d in deliveries) == 200
    assert ec2.calls["DescribeLaunchTemplateVersions"] == 5
    assert ec2.calls["DescribeInstanceTypes"] == 3


def test_the_lookups_are_cached_for_about_20_minutes(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", api_server.url)
    deployment, ec2 = empty_groups(10, policies, calls, clock, config)
    deployment.tick()
    assert (ec2.calls["DescribeLaunchTemplateVersions"], ec2.calls["DescribeInstanceTypes"]) == (
        5,
        3,
    )
    clock.advance(minutes=17)  # inside every entry's TTL (20 minutes ± 2): no lookups
    deployment.tick()
    assert (ec2.calls["DescribeLaunchTemplateVersions"], ec2.calls["DescribeInstanceTypes"]) == (
        5,
        3,
    )
    clock.advance(minutes=6)  # past every entry's TTL: each looked up once more
    deployment.tick()
    assert (ec2.calls["DescribeLaunchTemplateVersions"], ec2.calls["DescribeInstanceTypes"]) == (
        10,
        6,
    )
