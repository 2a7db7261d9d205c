"""The fast path in the sandbox's 10-s world, as deployed: a look each step through its
real service and adapters (the loopback API server, moto's SQS), its requests evaluated as
the tick's are. It is on, as a deploy has it; `FAST_PATH: "false"` in a scenario's
environment turns it off (cdk.json `fastPath: false`), and the tick alone decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import latency, runner, simulation
from nodescaler_sandbox.sandbox import FAST_PATH
from nodescaler_sandbox.scenario_file import Scenario, load_scenario

pytestmark = pytest.mark.slow  # moto's server and the API server

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def burst_at_half_a_minute(**environment: str) -> Scenario:
    """30 tasks sent at 00:00:30 to a queue of 4 a node; no alarm, a tick each 2 minutes."""
    loaded = load_scenario(SCENARIOS / "1-queue-burst.yaml")
    queue = loaded.queues[0].model_copy(update={"tasks": {0.5: 30}, "max_workers": 30})
    return loaded.model_copy(
        update={
            "minutes": 3,
            "tick_minutes": 2,
            "queues": [queue],
            "alarms": [],
            "environment": loaded.environment | environment,
        }
    )


def ours(tmp_path: Path, scenario: Scenario) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = runner.run_one(scenario, runner.NODESCALER, tmp_path)
    return summary, summary["scale_requests"]


def charged(group: str, seen: int, path: str, requested: int, tick: int = 120) -> int:
    """The reaction, in seconds, to a backlog seen at the step of `seen` s and answered by a
    request made at the step of `requested` s, charged nodescaler's latencies (`latency`)."""
    arrival = seen - latency.arrival_offset(group, 10)
    effective = latency.Nodescaler(tick=tick).effective(arrival, path, requested, 10)
    return round(effective - arrival)


def test_given_a_backlog_mid_minute_the_fast_path_asks_for_nodes_within_the_step(
    tmp_path: Path,
) -> None:
    # When 30 tasks land at 00:00:30, the fast path on (as deployed, unless turned off)
    summary, scaled = ours(tmp_path, burst_at_half_a_minute())
    # Then the group is scaled in that step, not at the next tick (00:02)
    assert scaled[0]["minute"] == 0.5 and scaled[0]["from"] == 0
    # within its poll phase and the chain after its look (docs/sandbox.md, "Latencies")
    group = scaled[0]["group"]
    reaction = summary["reaction_s"]["queue"]["max"]
    assert reaction == charged(group, 30, latency.FAST_PATH, 30) < latency.POLL_S + 2.2
    # and its decision says the fast path brought it
    timeline = (tmp_path / "timeline.txt").read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("00:00:30 |") and "[fast path]" in line for line in timeline)


def test_given_the_fast_path_off_the_tick_alone_answers_the_backlog(tmp_path: Path) -> None:
    # When the same burst lands with the fast path turned off
    summary, scaled = ours(tmp_path, burst_at_half_a_minute(**{FAST_PATH: "false"}))
    # Then the tick at 00:02 scales it: 90 s after the backlog's step, and its arrival
    # within that step and the chain after the tick later
    assert scaled[0]["minute"] == 2
    reaction = summary["reaction_s"]["queue"]["max"]
    assert reaction == charged(scaled[0]["group"], 30, latency.TICK, 120) >= 90


def test_given_steps_of_a_minute_pods_are_charged_the_look_that_saw_them(
    tmp_path: Path,
) -> None:
    # Given steps of a minute: the tick acts in each step before the fast path looks, so
    # the tick asks for the jobs arriving over the minute to 00:10 (managed-from-zero)
    jobs = load_scenario(SCENARIOS / "17-managed-from-zero.yaml").model_copy(
        update={"minutes": 13, "step_seconds": 60}
    )
    run = simulation.simulate(
        jobs, runner.NODESCALER, tmp_path, None, simulation.step_times(jobs, None)
    )
    asked = [(r["minute"], r["to"]) for r in run.scale_requests if r["group"] == "batch-ng"]
    assert asked == [(10, 4)]
    # Then the nodes boot from the fast path's look after the first job came and the chain
    # after it, within the minute, not from the tick: both run, the first to ask counts
    launched = {p.node_launched for p in run.pods if p.name.startswith("jobs-")}
    assert len(launched) == 1 and 9 < launched.pop() < 10


def test_given_pods_in_the_steps_after_a_scale_up_each_is_asked_for_in_its_own_step(
    tmp_path: Path,
) -> None:
    # Given GPU pods turning unschedulable at 00:10:00, 00:10:10, 00:10:20 and 00:10:50, a
    # group at zero (gpu-from-zero), each seen by the fast path's look in its step
    gpus = load_scenario(SCENARIOS / "6-gpu-from-zero.yaml").model_copy(update={"minutes": 12})
    # When nodescaler runs, as deployed
    summary, scaled = ours(tmp_path, gpus)
    # Then each look's evaluation reads the cluster as the look saw it, not the tick's
    # listing from 00:10: every pod is asked for in the step it appeared, one node each
    # (each within the fast path's poll phase and the chain after its look: < 7.2 s)
    assert 0 < summary["reaction_s"]["pending_pods"]["max"] <= 7
    assert [(r["minute"], r["to"]) for r in scaled if r["group"] == "gpu-ng"] == [
        (10, 1),
        (10.167, 3),
        (10.333, 4),
        (10.833, 6),
    ]


def test_given_the_fast_path_failing_each_invocation_the_tick_alone_answers_the_backlog(
    tmp_path: Path,
) -> None:
    # Given a fast path whose every invocation fails at its start (a setting it refuses:
    # looks at most every 30 s, not 60), as a Lambda whose init raises each minute
    broken = burst_at_half_a_minute(FAST_PATH_INTERVAL_SECONDS="60")
    # When the same burst lands
    summary, scaled = ours(tmp_path, broken)
    # Then the tick at 00:02 scales it, as with the fast path off, and it alone decided
    assert scaled[0]["minute"] == 2 and scaled[0]["to"] > scaled[0]["from"]
    reaction = summary["reaction_s"]["queue"]["max"]
    assert reaction == charged(scaled[0]["group"], 30, latency.TICK, 120) >= 90
    timeline = (tmp_path / "timeline.txt").read_text(encoding="utf-8")
    assert "[fast path]" not in timeline and "[tick]" in timeline
