"""A cron's batches through a queue (a new user's export workers: a batch of 40 or 60
messages every 15 minutes, 5 minutes a task, 4 workers a node). The `scaleDown` window
over the queue ends as the half hour's batch lands: before, that tick let the nodes the
last batch emptied go, and the batch bought them back a boot later, where Cluster
Autoscaler's nodes, each on its own unneeded time, took it (waits 1.5 times CA tuned's
over 105 minutes). Now no node goes while the demand rises (`domain.scaling.pods_floor`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, two runs


def test_no_node_goes_as_a_cron_batch_lands(tmp_path: Path) -> None:
    (tmp_path / "exports.yaml").write_text(
        "apiVersion: nodescaler.io/v1alpha1\nkind: NodeGroupPolicy\n"
        "metadata: {name: exports-workers}\n"
        "spec:\n  minReplicas: 0\n  maxReplicas: 20\n  metrics:\n"
        "    - type: SQSQueue\n      sqsQueue: {queue: exports-queue}\n"
        "      target: {type: AverageValue, averageValue: 4}\n"
    )
    scenario = Scenario.model_validate(
        {
            "name": "cron-exports",
            "minutes": 45,
            "bootMinutes": 3,
            "policies": str(tmp_path),
            "path": tmp_path / "cron.yaml",
            "groups": [
                {"name": "exports-ng", "policy": "exports-workers", "max": 20}
                | {"instanceType": "m5.2xlarge"}  # 8 cpu, 32 GiB: 4 workers
            ],
            "queues": [
                {
                    "name": "exports-queue",
                    "tasks": {0: 40, 15: 40, 30: 60},
                    "taskMinutes": 5,
                    "worker": {"cpu": "2", "memory": "6Gi", "readyAfterSeconds": 20},
                    "maxWorkers": 60,
                }
            ],
        }
    )
    ours = runner.run_one(scenario, runner.NODESCALER, tmp_path / "ours")
    tuned = runner.run_one(scenario, runner.TUNED, tmp_path / "tuned")
    # The half hour's tick finds 13 of its 60 messages and keeps every node for them
    lines = (tmp_path / "ours" / "timeline.txt").read_text().splitlines()
    (half_hour,) = [line for line in lines if line.startswith("00:30 | exports-ng |")]
    assert "10 → 10" in half_hour and "no node goes while its demand rises" in half_hour
    # and its workers wait no longer than under Cluster Autoscaler tuned (0.89x)
    assert ours["unschedulable_pod_minutes"] <= tuned["unschedulable_pod_minutes"]
