"""A queue's workers are Jobs (KEDA's ScaledJob makes one a message), and a Job's pod
moved starts its task again. A new user's thumbnail workers (a trickle of messages, then
a bulk of them; c5.2xlarge nodes fit 3 workers; a first policy of 10 tasks a node): when
the bulk was done, the scale-in drained nodes to pack the trickle's workers, which the
scheduler had spread one a node, and lost 1.75 times the job-minutes Cluster Autoscaler
tuned lost. Now a node a Job runs on leaves once its Jobs end, marked meanwhile so the
next workers land on the nodes that stay (`domain.scale_down.leaving`), for as long as
the termination policy waits: when the marks went a minute after the scale-in, the
trickle's next workers kept three nodes more than desired to the end."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox import run_summary, runner, simulation
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server


def test_after_a_bulk_no_worker_restarts_its_task_and_the_extra_nodes_go(tmp_path: Path) -> None:
    (tmp_path / "thumbs.yaml").write_text(
        "apiVersion: nodescaler.io/v1alpha1\nkind: NodeGroupPolicy\n"
        "metadata: {name: thumbs}\n"
        "spec:\n  minReplicas: 0\n  maxReplicas: 50\n  metrics:\n"
        "    - type: SQSQueue\n      sqsQueue: {queue: thumbs-queue}\n"
        "      target: {type: AverageValue, averageValue: 10}\n"
    )
    trickle = {minute: 6 for minute in range(0, 60, 2)}
    scenario = Scenario.model_validate(
        {
            "name": "thumbnails",
            "minutes": 60,
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
                    "tasks": trickle | {10: 6 + 360},
                    "taskMinutes": 6,
                    "worker": {"cpu": "2.5", "memory": "4Gi"},
                    "maxWorkers": 150,
                }
            ],
        }
    )
    times = simulation.step_times(scenario, None)
    run = simulation.simulate(scenario, runner.NODESCALER, tmp_path, None, times)
    ours = run_summary.summarize(scenario, run)
    # The bulk's nodes went (the group back near the trickle's 6) and no task started again
    # (41.5 job-minutes lost when Jobs' nodes were drained)
    assert ours["final_desired"]["thumbs-ng"] < 12
    assert ours["lost_job_minutes"] == 0
    # and from minute 50, a task's time after the last scale-in, at most one node more in
    # service than desired (three more when the marks went a minute after it)
    late = [r["in_service"] - r["desired"] for r in run.minutes if r["minute"] >= 50]
    assert late and max(late) <= 1
