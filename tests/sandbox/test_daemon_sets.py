"""DaemonSets in a scenario: a pod of each on every node it takes, from the moment the node
registers. A group at zero then buys for its pods and its DaemonSets' beside them, under
both controllers (nodescaler lists the DaemonSets; Cluster Autoscaler's template node holds
their pods), and the lower bound packs the pods into what the DaemonSets leave. Once the
pods are gone, a node holding its DaemonSets' pods alone is empty to both: CA tuned leaves
them out of utilization (--ignore-daemonsets-utilization), as an operator whose `WhenEmpty`
group has a threshold of 0 must, or it would keep every such node for good."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, two runs

# an m5.xlarge node offers 4 cpu here (its group's node-template tags): two pods of
# 1,800m, or one beside 600m of DaemonSets
SCENARIO = {
    "name": "daemon-sets",
    "minutes": 14,
    "bootMinutes": 3,
    "groups": [
        {"name": "app-ng", "policy": "batch", "max": 10, "instanceType": "m5.xlarge"},
        {"name": "gpu-ng", "policy": "batch", "max": 2, "instanceType": "m5.xlarge"}
        | {"taints": [{"key": "gpu", "value": "true"}]},
    ],
    "daemonSets": [
        {"name": "kube-proxy", "cpu": "100m", "memory": "64Mi"},
        {"name": "log-agent", "cpu": "500m", "memory": "256Mi"},
        {"name": "gpu-agent", "cpu": "1", "memory": "1Gi", "nodeSelector": {"gpu": "true"}},
    ],
    "deployments": [
        {"name": "api", "cpu": "1800m", "memory": "2Gi", "replicas": {0: 6, 6: 6, 7: 0}}
    ],
}


def test_a_group_at_zero_buys_for_its_pods_beside_its_daemon_sets(tmp_path: Path) -> None:
    policies = Path(__file__).parents[2] / "scenarios" / "policies"
    scenario = Scenario.model_validate(
        SCENARIO | {"policies": str(policies), "path": tmp_path / "daemon-sets.yaml"}
    )
    ours = runner.run_one(scenario, runner.NODESCALER, tmp_path / "ours")
    tuned = runner.run_one(scenario, runner.TUNED, tmp_path / "tuned")
    # Both buy the six nodes the pods need beside 600m of DaemonSets, in one go: no pod
    # waits past the first boot (taken whole, a node holds two: three nodes, then three)
    for run in (ours, tuned):
        assert run["peak_desired"]["app-ng"] == 6, run["peak_desired"]
        assert run["pod_wait_minutes"]["overall"]["max"] <= 3.5, run["pod_wait_minutes"]
        # a DaemonSet's pod goes with its node: never counted as killed with it
        assert run["pods_killed_with_their_instance"] == 0
        # the pods gone at minute 7, a node with DaemonSets' pods alone goes
        assert run["final_desired"]["app-ng"] == 0, run["final_desired"]
    # the tainted group, at zero, grew for nothing: its DaemonSets are no demand
    assert ours["peak_desired"]["gpu-ng"] == tuned["peak_desired"]["gpu-ng"] == 0
