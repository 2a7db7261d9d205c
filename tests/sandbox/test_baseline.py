"""The Cluster Autoscaler baseline plays fair: the cluster's limits, each group's
node-template tags at zero, the expander chain and expendable pods, as Cluster Autoscaler
honours them. Each on a small scenario through the sandbox."""

from __future__ import annotations

from typing import Any

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

from tests.sandbox.conftest import SCENARIOS, SandboxRuns

pytestmark = pytest.mark.slow  # moto's server and the API server, the baseline's run

ONLY_THE_BASELINE = (runner.BASELINE,)


def baseline_of(runs: SandboxRuns, **fields: Any) -> dict[str, Any]:
    """The baseline's figures on a small scenario of `fields`, run under the baseline alone."""
    document = {
        "name": "fair",
        "minutes": 6,
        "bootMinutes": 2,
        "policies": "policies",  # scenarios/policies: batch, scaled by pending pods
        "path": SCENARIOS / "fair.yaml",
    } | fields
    scenario = Scenario.model_validate(document)
    return runs.run(scenario, ONLY_THE_BASELINE).summary[runner.BASELINE]


def jobs(replicas: int, **shape: Any) -> dict[str, Any]:
    return {"name": "jobs", "cpu": "3", "memory": "1Gi", "replicas": {0: replicas}} | shape


def test_the_cluster_node_limit_caps_the_baseline(sandbox_runs: SandboxRuns) -> None:
    ours = baseline_of(
        sandbox_runs,
        environment={"CLUSTER_MAX_NODES": "4"},
        groups=[{"name": "a-ng", "policy": "batch", "max": 20, "instanceType": "m5.xlarge"}],
        deployments=[jobs(10)],  # a node each: 10 wanted
    )
    assert ours["peak_desired"] == {"a-ng": 4}


def test_the_cluster_vcpu_limit_caps_the_baseline(sandbox_runs: SandboxRuns) -> None:
    ours = baseline_of(
        sandbox_runs,
        environment={"CLUSTER_MAX_VCPUS": "12"},  # three 4-vCPU nodes
        groups=[{"name": "a-ng", "policy": "batch", "max": 20, "instanceType": "m5.xlarge"}],
        deployments=[jobs(10)],
    )
    assert ours["peak_desired"] == {"a-ng": 3}


def gpu_group(**fields: Any) -> dict[str, Any]:
    return {
        "name": "gpu-ng",
        "policy": "batch",
        "max": 4,
        "instanceType": "m5.xlarge",
        "node": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1},
        "labels": {"accelerator": "nvidia"},
        "taints": [{"key": "nvidia.com/gpu", "value": "true"}],
    } | fields


def trainers() -> dict[str, Any]:
    return jobs(
        2,
        cpu="1",
        nodeSelector={"accelerator": "nvidia"},
        tolerations=[{"key": "nvidia.com/gpu", "value": "true"}],
        **{"nvidia.com/gpu": 1},
    )


def test_a_group_at_zero_is_read_from_its_node_template_tags(sandbox_runs: SandboxRuns) -> None:
    ours = baseline_of(sandbox_runs, groups=[gpu_group()], deployments=[trainers()])
    assert ours["peak_desired"] == {"gpu-ng": 2}  # a GPU each
    # the nodes' boot from the second CA's scale-up takes effect: 34 s after the pod's
    # arrival (its 30-s wait for a pod asking for a GPU, three loops skipped, and its
    # loop's second), which is up to 9 s before the step that made the pod
    assert 2.0 + 24 / 60 <= ours["pod_wait_minutes"]["gpu-ng"]["max"] <= 2.0 + 35 / 60


def test_without_its_tags_a_group_at_zero_cannot_take_pods_that_need_them(
    sandbox_runs: SandboxRuns,
) -> None:
    ours = baseline_of(sandbox_runs, groups=[gpu_group(tags={})], deployments=[trainers()])
    assert ours["peak_desired"] == {"gpu-ng": 0}
    assert ours["pods_that_fit_no_group"]["count"] == 0  # they fit the real node: not the pods'
    assert ours["longest_demand_to_scale_request_minutes"] == {"gpu-ng": 6}  # never answered


def test_a_managed_group_at_zero_without_tags_is_read_from_describe_nodegroup(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given an EKS managed node group whose ASG has no node-template tags: its label and
    # taint are EKS's alone. Cluster Autoscaler's AWS provider adds DescribeNodegroup's
    # labels and taints to a node of such a group at zero
    # (cloudprovider/aws/aws_manager.go, buildNodeFromTemplate, through the managed node
    # group cache: managed_nodegroup_cache.go; aws_wrapper.go, getManagedNodegroupInfo).
    # (of an instance type without GPUs: those only a tag or a live node could tell)
    group = gpu_group(tags={}, eksManaged=True, node={"cpu": "4", "memory": "16Gi"})
    pods = jobs(2, cpu="3", nodeSelector={"accelerator": "nvidia"})
    pods["tolerations"] = [{"key": "nvidia.com/gpu", "value": "true"}]
    ours = baseline_of(sandbox_runs, groups=[group], deployments=[pods])
    # Then the baseline grows it from zero for the pods that need them, as with the tags
    assert ours["peak_desired"] == {"gpu-ng": 2}
    assert ours["pods_that_fit_no_group"]["count"] == 0


def big_and_small(big_max: int = 5) -> list[dict[str, Any]]:
    return [
        {"name": "big-ng", "policy": "batch", "max": big_max, "instanceType": "m5.4xlarge"},  # 16
        {"name": "small-ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"},  # 4 vCPUs
    ]


PREFER_BIG = {"EXPANDERS": '[{"name": "priority", "priorities": {"10": ["big-.*"], "1": [".*"]}}]'}


def test_least_waste_picks_the_group_the_pods_fill_best(sandbox_runs: SandboxRuns) -> None:
    ours = baseline_of(sandbox_runs, groups=big_and_small(), deployments=[jobs(1)])  # default chain
    assert ours["peak_desired"] == {"big-ng": 0, "small-ng": 1}


def test_the_priority_expander_orders_the_groups(sandbox_runs: SandboxRuns) -> None:
    ours = baseline_of(
        sandbox_runs, environment=PREFER_BIG, groups=big_and_small(), deployments=[jobs(1)]
    )
    assert ours["peak_desired"] == {"big-ng": 1, "small-ng": 0}


def test_a_group_at_its_maximum_leaves_the_pods_to_the_next(sandbox_runs: SandboxRuns) -> None:
    ours = baseline_of(
        sandbox_runs, environment=PREFER_BIG, groups=big_and_small(big_max=1), deployments=[jobs(8)]
    )
    assert ours["peak_desired"] == {"big-ng": 1, "small-ng": 3}  # 5 on the big node, 3 more


def test_expendable_pods_trigger_no_scale_up(sandbox_runs: SandboxRuns) -> None:
    groups = [{"name": "a-ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"}]
    ours = baseline_of(sandbox_runs, groups=groups, deployments=[jobs(2, priority=-11)])
    assert ours["peak_desired"] == {"a-ng": 0}


def zone_groups(*extra: dict[str, str]) -> list[dict[str, Any]]:
    """Three groups of one shape, one a zone; `extra` labels each (say, one set apart)."""
    return [
        {
            "name": f"web-{zone}",
            "policy": "batch",
            "max": 10,
            "instanceType": "m5.xlarge",
            "labels": {"topology.kubernetes.io/zone": f"eu-west-1{zone}"} | labels,
        }
        for zone, labels in zip("abc", extra or ({}, {}, {}), strict=True)
    ]


BALANCE = {"EXPANDERS": '[{"name": "least-waste"}, {"name": "balance"}]'}


def test_with_balance_the_baseline_splits_new_nodes_over_similar_zones(
    sandbox_runs: SandboxRuns,
) -> None:
    ours = baseline_of(
        sandbox_runs, environment=BALANCE, groups=zone_groups(), deployments=[jobs(7)]
    )
    assert ours["peak_desired"] == {"web-a": 3, "web-b": 2, "web-c": 2}  # a node a job


def test_the_baseline_balances_only_groups_alike_and_only_when_the_chain_says(
    sandbox_runs: SandboxRuns,
) -> None:
    apart = zone_groups({}, {}, {"team": "blue"})  # a label of its own: not similar
    ours = baseline_of(sandbox_runs, environment=BALANCE, groups=apart, deployments=[jobs(6)])
    assert ours["peak_desired"] == {"web-a": 3, "web-b": 3, "web-c": 0}
    unbalanced = baseline_of(sandbox_runs, groups=zone_groups(), deployments=[jobs(6)])
    assert unbalanced["peak_desired"] == {"web-a": 6, "web-b": 0, "web-c": 0}


def test_a_failed_launch_backs_the_group_off_at_the_next_cache_refresh(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given Spot preferred and out of capacity: its launch fails at minute 0. The AWS
    # provider lists the group's scaling activities at its next refresh (at most once a
    # minute: aws_manager.go, refreshInterval), finds the Failed
    # one since it set the group, gives up the instances that cannot come and backs the
    # group off (cloudprovider/aws/auto_scaling_groups.go: isNodeGroupAvailable,
    # createPlaceholdersForDesiredNonStartedInstances); the same scan asks on-demand
    # (its view of the groups current, not the one it read before backing off).
    ours = baseline_of(
        sandbox_runs,
        environment={"EXPANDERS": '[{"name": "priority", "priorities": {"10": ["spot-.*"]}}]'},
        groups=[
            {"name": "spot-ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"}
            | {"noCapacity": True},
            {"name": "on-demand-ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"},
        ],
        deployments=[jobs(2)],  # a node each
    )
    # Then on-demand is asked at the refresh a minute on, and its nodes boot in 2: 3.0
    # minutes, not the 15-minute provision timeout
    assert ours["pod_wait_minutes"]["on-demand-ng"]["max"] == 3.0
    assert ours["final_desired"] == {"spot-ng": 0, "on-demand-ng": 2}


def test_each_scale_up_moves_the_provision_timeout_on(sandbox_runs: SandboxRuns) -> None:
    # Given nodes that take 12 minutes to boot, and jobs asking for a node at 0 and
    # another at 8: the second request is 20 minutes from the first when its node comes
    ours = baseline_of(
        sandbox_runs,
        minutes=22,
        bootMinutes=12,
        groups=[{"name": "batch-ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"}],
        deployments=[jobs(1) | {"replicas": {0: 1, 8: 2}}],
    )
    # Then the 15-minute provision timeout counts from the last increase (clusterstate.go,
    # registerOrUpdateScaleUpNoLock): at 15 the group is not backed off, nor its request
    # taken back, and both nodes come
    assert [(r["from"], r["to"]) for r in ours["scale_requests"]] == [(0, 1), (1, 2)]
    assert ours["final_desired"] == {"batch-ng": 2}
