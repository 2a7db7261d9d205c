"""Fault windows in a scenario, each on what the product calls: a metric that cannot be
read never lets a group shrink, a failed call fails its invocation (and nothing else),
and a deleted queue loses what was sent to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, the runs each checks

SCENARIOS = Path(__file__).parents[2] / "scenarios"
GROUP = {"name": "a-ng", "policy": "batch", "max": 10, "instanceType": "m5.xlarge"}


def run(
    tmp_path: Path,
    controllers: tuple[str, ...] = (runner.NODESCALER, runner.BASELINE),
    **fields: Any,
) -> dict[str, Any]:
    document = {
        "name": "outage",
        "minutes": 12,
        "bootMinutes": 1,
        "policies": "policies",  # scenarios/policies
        "path": SCENARIOS / "outage.yaml",
        "groups": [GROUP],
    } | fields
    scenario = Scenario.model_validate(document)
    return runner.run(
        scenario, out=tmp_path, write=lambda _: None, controllers=controllers, chart=False
    )


def desired(tmp_path: Path, controller: str) -> list[int]:
    """The group's desired capacity at each whole minute (the world steps in seconds)."""
    rows = json.loads((tmp_path / "timeline.json").read_text())[controller]
    return [r["desired"] for r in rows if r["minute"] == int(r["minute"])]


def test_throttled_auto_scaling_fails_the_dispatch_until_the_window_ends(tmp_path: Path) -> None:
    summary = run(
        tmp_path,
        deployments=[{"name": "jobs", "cpu": "3", "replicas": {0: 2}}],
        faults=[{"from": 0, "until": 4, "kind": "throttling", "target": "autoscaling"}],
    )
    ours = summary[runner.NODESCALER]
    assert ours["faults"]["invocations_failed"] == 4  # a tick a minute, each refused
    assert ours["faults"]["calls_failed"]["throttling"] >= 4
    assert desired(tmp_path, runner.NODESCALER)[:5] == [0, 0, 0, 0, 2]  # then at once
    assert desired(tmp_path, runner.BASELINE)[:5] == [0, 0, 0, 0, 2]  # throttled alike


def test_no_scale_in_while_the_api_server_is_down(tmp_path: Path) -> None:
    web = GROUP | {"policy": "microservices", "min": 1}  # CPU and memory reserved, 60 %
    summary = run(
        tmp_path,
        minutes=30,
        policies="../policies",
        groups=[web],
        deployments=[{"name": "jobs", "cpu": "3", "replicas": {0: 3, 4: 3, 5: 0}}],
        faults=[{"from": 5, "until": 15, "kind": "kubernetes-down"}],
    )
    ours = desired(tmp_path, runner.NODESCALER)
    assert ours[4:15] == [ours[4]] * 11  # the pods went at 5: no reading, no scale-in
    assert ours[-1] == 1  # read again after the window, and let go
    assert desired(tmp_path, runner.BASELINE)[4:15] == [3] * 11  # it cannot see either
    assert summary[runner.NODESCALER]["pods_killed_with_their_instance"] == 0


def test_a_deleted_queue_loses_its_messages_and_what_is_sent_to_it(tmp_path: Path) -> None:
    queue = {
        "name": "jobs-queue",
        "tasks": {0: 8, 6: 4},
        "taskMinutes": 30,
        "worker": {"cpu": "1", "memory": "1Gi"},
        "maxWorkers": 20,
    }
    summary = run(
        tmp_path,
        (runner.NODESCALER,),
        queues=[queue],
        faults=[{"from": 5, "until": 8, "kind": "queue-deleted", "target": "jobs-queue"}],
    )
    ours = summary[runner.NODESCALER]
    assert ours["faults"]["tasks_lost"] == 4  # sent at 6, while there was no queue
    assert ours["faults"]["windows"] == ["queue-deleted jobs-queue 00:05–00:08"]


def test_an_api_server_slower_than_the_products_timeout_reads_as_missing(tmp_path: Path) -> None:
    web = GROUP | {"policy": "microservices", "min": 1}
    summary = run(
        tmp_path,
        (runner.NODESCALER,),
        minutes=16,
        policies="../policies",
        environment={"KUBERNETES_TIMEOUT_SECONDS": "0.5"},
        groups=[web],
        deployments=[{"name": "jobs", "cpu": "3", "replicas": {0: 3, 3: 3, 4: 0}}],
        faults=[{"from": 4, "until": 6, "kind": "kubernetes-slow", "seconds": 1}],
    )
    ours = desired(tmp_path, runner.NODESCALER)
    assert ours[3:6] == [ours[3]] * 3  # the pods went at 4; too slow to read: held
    assert ours[-1] == 1  # answered in time again, and let go
    rows = json.loads((tmp_path / "timeline.json").read_text())[runner.NODESCALER]
    cpu = [r["metrics"]["reservation-cpu"]["value"] for r in rows if r["minute"] in (3, 4, 5, 6)]
    assert cpu[0] is not None and cpu[1:3] == [None, None] and cpu[3] == 0  # missing, then read
    lines = (tmp_path / "timeline.txt").read_text()
    assert "00:04 | (fault) | - | - | kubernetes-slow begins" in lines
    assert summary[runner.NODESCALER]["pods_killed_with_their_instance"] == 0
