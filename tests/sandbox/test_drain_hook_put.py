"""A group opted in without the drain hook gets it from evaluate before its scale-in
(cdk.json drainOptedInGroups, on by default): a web tier that shrinks then loses its busy
nodes, their pods evicted first, as Cluster Autoscaler drains them. Without it (a new
user's group, `drain` unset) only empty nodes left, and the scheduler's spread left few:
idle 1.09x Cluster Autoscaler tuned's here, 0.77x with the hook put."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, two runs

POLICIES = Path(__file__).parents[2] / "policies"  # microservices: reservation at 60 %


def shrinking_web(tmp_path: Path, **environment: str) -> Scenario:
    """24 one-core pods on 4-core nodes, 6 from minute 15: ten nodes, then three."""
    return Scenario.model_validate(
        {
            "name": "shrinking-web",
            "minutes": 40,
            "bootMinutes": 3,
            "policies": str(POLICIES),
            "path": tmp_path / "web.yaml",
            "environment": environment,
            "groups": [
                {"name": "web-ng", "policy": "microservices", "min": 1, "max": 20}
                | {"instanceType": "m5.xlarge"}  # no `drain`: the stack does not hook it
            ],
            "deployments": [
                {"name": "web", "cpu": "1", "memory": "1Gi", "replicas": {0: 24, 15: 6}}
            ],
        }
    )


def undrained(run: dict[str, Any]) -> int:
    return sum(run.get("termination_policy", {}).get("undrained", {}).values())


def test_a_group_without_the_drain_hook_gets_it_and_sheds_its_busy_nodes(tmp_path: Path) -> None:
    hooked = runner.run_one(shrinking_web(tmp_path), runner.NODESCALER, tmp_path / "hooked")
    off = shrinking_web(tmp_path, DRAIN_OPTED_IN_GROUPS="false")
    left = runner.run_one(off, runner.NODESCALER, tmp_path / "left")
    # Left without the hook, its termination policy kept nodes with pods, and said so
    assert undrained(left) > 0 and left["evictions"] == 0
    # Given it by evaluate, the same scale-ins drained them: pods evicted, none kept
    assert undrained(hooked) == 0 and hooked["evictions"] > 0
    assert hooked["idle_node_hours"] < left["idle_node_hours"]
    # and the budget of its pods was never short, nor a pod killed with its instance
    assert hooked["pods_killed_with_their_instance"] == 0
