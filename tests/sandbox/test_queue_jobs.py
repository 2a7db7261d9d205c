"""A queue's workers are Jobs (KEDA's ScaledJob makes one a message), and a Job's pod
moved starts its task again. A new user's thumbnail workers (a trickle of messages, then
a bulk of them; c5.2xlarge nodes fit 3 workers; a first policy of 10 tasks a node): when
the bulk was done, the scale-in drained nodes to pack the trickle's workers, which the
scheduler had spread one a node, and lost 1.75 times the job-minutes Cluster Autoscaler
tuned lost. Now a node a Job runs on leaves once its Jobs end, marked meanwhile so the
next workers land on the nodes that stay (`domain.scale_down.leaving`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server


def test_a_scale_in_after_a_bulk_loses_no_workers_task(tmp_path: Path) -> None:
    (tmp_path / "thumbs.yaml").write_text(
        "apiVersion: nodescaler.io/v1alpha1\nkind: NodeGroupPolicy\n"
        "metadata: {name: thumbs}\n"
        "spec:\n  minReplicas: 0\n  maxReplicas: 50\n  metrics:\n"
        "    - type: SQSQueue\n      sqsQueue: {queue: thumbs-queue}\n"
        "      target: {type: AverageValue, averageValue: 10}\n"
    )
    trickle = {minute: 6 for minute in range(0, 50, 2)}
    scenario = Scenario.model_validate(
        {
            "name": "thumbnails",
            "minutes": 50,
            "bootMinutes": 3,
            "policies": str(tmp_path),
            "path": tmp_path / "thumbnails.yaml",
            "groups": [
                {"name": "thumbs-ng", "policy": "thumbs", "max": 60}
                | {"instanceType": "c5.2xlarge"}  # 8 cpu, 16 GiB: 3 workers
            ],
            "queues": [
                {
                    "name": "thumbs-queue",
                    "tasks": trickle | {10: 6 + 180},
                    "taskMinutes": 6,
                    "worker": {"cpu": "2.5", "memory": "4Gi"},
                    "maxWorkers": 150,
                }
            ],
        }
    )
    ours = runner.run_one(scenario, runner.NODESCALER, tmp_path / "ours")
    # The bulk's nodes went (the group back near the trickle's 6) and no task started again
    assert ours["final_desired"]["thumbs-ng"] < 12
    assert ours["lost_job_minutes"] == 0
