"""A CI cluster's builds on a group that sheds only empty nodes (`consolidation: WhenEmpty`):
its underused nodes are marked, so new builds go elsewhere and those nodes empty as their
own builds finish (`MetricReading.emptying`). Unmarked, the scheduler's least-allocated
choice refilled them, and the group kept more idle capacity than Cluster Autoscaler tuned,
which marks its empty nodes every 10 s."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, two runs

POLICIES = Path(__file__).parents[2] / "scenarios" / "policies"  # batch: WhenEmpty


def builds(minutes: int, seed: int = 7) -> str:
    """A pod trace of CI builds: about 4 a minute, 60 % of one core, 30 % of two, 10 % of
    seven; each runs a lognormal time around 6 minutes, at most 45."""
    draw = random.Random(seed)
    rows, at = ["arrival_s,cpu,memory,labels,run_s"], 0.0
    while (at := at + draw.expovariate(4 / 60)) < minutes * 60:
        cpu = draw.choices([1, 2, 7], weights=[6, 3, 1])[0]
        run = min(round(60 * math.exp(draw.gauss(math.log(6), 0.6))), 45 * 60)
        rows.append(f"{int(at)},{cpu},{3 * cpu}Gi,workload=build,{run}")
    return "\n".join(rows) + "\n"


def test_a_when_empty_groups_nodes_empty_without_being_refilled(tmp_path: Path) -> None:
    (tmp_path / "builds.csv").write_text(builds(90))
    scenario = Scenario.model_validate(
        {
            "name": "ci-builds",
            "minutes": 90,
            "bootMinutes": 3,
            "policies": str(POLICIES),
            "path": tmp_path / "ci.yaml",
            "groups": [
                {"name": "ci-ng", "policy": "batch", "max": 50, "instanceType": "m5.2xlarge"}
                | {"drain": True}
            ],
            "podTraces": [{"file": "builds.csv", "name": "ci"}],
        }
    )
    ours = runner.run_one(scenario, runner.NODESCALER, tmp_path / "ours")
    tuned = runner.run_one(scenario, runner.TUNED, tmp_path / "tuned")
    # nodescaler keeps less idle capacity than Cluster Autoscaler tuned (0.71x; unmarked,
    # 1.17x: 9.1 idle node-hours against 7.81)
    assert ours["idle_node_hours"] < tuned["idle_node_hours"]
    # and its builds wait no longer (within 5 %), none is evicted
    assert ours["unschedulable_pod_minutes"] <= 1.05 * tuned["unschedulable_pod_minutes"]
    assert ours["evictions"] == 0
