"""The sandbox `make demo` runs: moto's server and the loopback API server started on
loopback, the real handlers deciding on a virtual clock."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from nodescaler_tools import scenarios
from nodescaler_tools.sandbox import sandbox

POLICIES = Path(__file__).parents[2] / "policies"


def test_the_queue_burst_scales_out_at_once_and_back_to_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scenarios, "OUT", tmp_path)
    lines: list[str] = []
    summary = scenarios.queue_burst(POLICIES, tasks=400, minutes=26, write=lines.append)
    assert (summary["peak_desired"], summary["final_desired"]) == (100, 0)  # 400 tasks, 4 a node
    assert summary["minutes_to_empty_queue"] == 14
    assert lines[2].startswith("+00m | 400 | 0 | 100 |")  # the first tick asks for all of it
    written = json.loads((tmp_path / "queue-burst" / "summary.json").read_text())
    assert written == summary
    assert (tmp_path / "queue-burst" / "logs.jsonl").stat().st_size > 0


def test_the_sandbox_refuses_a_desired_capacity_outside_min_max_as_aws_does(
    tmp_path: Path,
) -> None:
    with sandbox(POLICIES, tmp_path, boot=timedelta(minutes=1)) as running:
        scenarios._asg(running, "ng", "gpu-training", max_size=5)
        with pytest.raises(ClientError) as caught:
            running.clients.autoscaling.set_desired_capacity(
                AutoScalingGroupName="ng", DesiredCapacity=6
            )
    assert caught.value.response["Error"] == {
        "Code": "ValidationError",
        "Message": "New SetDesiredCapacity value 6 is above max value 5 for the AutoScalingGroup.",
    }


def test_a_launch_failure_moves_the_pods_to_the_next_group_in_the_same_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scenarios, "OUT", tmp_path)
    lines: list[str] = []
    summary = scenarios.launch_failure(minutes=12, write=lines.append)
    # Spot fails at once and again when new work comes after its 5-minute backoff
    assert summary["launch_failures_at_minute"] == [0.0, 8.0]
    assert summary["backoff_seconds"] == [600]  # doubled
    assert summary["final_desired"] == {"spot-ng": 0, "on-demand-ng": 3}
    first = lines[2].split(" | ")
    assert first[:4] == ["+00m", "6", "0", "2"]  # on-demand took the pods in minute 0
    assert " | ".join(first[4:]).startswith("abort the scale-up 2 → 0 | backed off until 09:05")
    assert summary["pending_pod_minutes"] <= 24  # pods wait only for their nodes to boot
