"""What a test may ask of the sandbox's runner, on hand-made scenarios and summaries (no
sandbox started): the controllers it checks, no chart, the learnt days at coarser steps;
and what it refuses, named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import oracle_bounds, run_summary, runner, simulation
from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.scenario_file import Scenario, load_scenario

from tests.tools.test_oracle import minutes, node, pod

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def forecast(**changes: Any) -> Scenario:
    """Scenario 12's three weekdays (Monday learnt, from 24:00 judged), `changes` made."""
    loaded = load_scenario(SCENARIOS / "12-weekday-forecast.yaml")
    return loaded.model_copy(update=changes)


def test_the_learnt_days_step_coarser_and_the_judged_ones_at_the_scenarios_step() -> None:
    # Given a run of 3 minutes judged from minute 2, learnt a step a minute
    times = simulation.step_times(forecast(minutes=3, judged_from=2), 60)
    # Then the first two minutes step a minute, the judged one every 10 s, to its end
    assert times == [0, 60, *range(120, 181, 10)]
    # and by default, every step is the scenario's
    assert simulation.step_times(forecast(minutes=1), None) == list(range(0, 61, 10))


def test_a_learn_step_that_is_no_multiple_of_the_step_or_a_scenario_with_queues_is_refused() -> (
    None
):
    with pytest.raises(ValueError, match="learn_step: 45 s is not a multiple of weekday-forecast"):
        simulation.step_times(forecast(), 45)
    burst = load_scenario(SCENARIOS / "1-queue-burst.yaml")
    with pytest.raises(ValueError, match="learn_step: queue-burst has queues"):
        simulation.step_times(burst, 60)


def test_the_limit_is_judged_from_the_first_judged_step_whatever_the_learnt_steps() -> None:
    # Given a 61-minute run judged from minute 1, its first minute a single step: one pod
    # all along on a node of its own
    scenario = forecast(minutes=61, judged_from=1)
    times = simulation.step_times(scenario, 60)
    run = Run(runner.NODESCALER, steps=minutes(len(times), pod("1", "1Gi")))
    run.templates = {"ng": node("4", "8Gi")}
    # Then the judged hour of the run's packing is the 361 ten-second steps from 00:01:00 on
    # (the bound beside it comes from the scenario's demand, not the run's steps)
    packed = oracle_bounds.bound(scenario, [run], times)["packed_node_hours"]
    assert packed == round(361 * 10 / 3600, 2)


@pytest.mark.parametrize(
    ("controllers", "chart", "error"),
    [
        ((runner.NODESCALER, "karpenter"), False, "controllers: .*'karpenter'"),
        ((), False, "controllers: \\[\\]"),
        ((runner.BASELINE,), True, "chart: draws nodescaler beside cluster-autoscaler-baseline"),
    ],
)
def test_controllers_the_runner_does_not_know_or_a_chart_without_both_runs_are_refused(
    tmp_path: Path, controllers: tuple[str, ...], chart: bool, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        runner.run(forecast(), out=tmp_path, controllers=controllers, chart=chart)
    assert not any(tmp_path.iterdir())  # refused before any run started


def test_the_side_by_side_has_a_column_for_each_run_made_and_only_those() -> None:
    figures = {"node_hours": 2.5, "final_desired": {"web-ng": 1}}
    baseline_alone = run_summary.side_by_side({runner.BASELINE: figures})
    header, *rows = baseline_alone.splitlines()
    assert header.split() == ["CA", "defaults"]
    # after the bound and the packing, which no run carries
    assert [row.split()[0] for row in rows[:2]] == ["oracle_node_hours", "packed_node_hours"]
    assert [row.split() for row in rows[2:]] == [
        ["node_hours", "2.5"],
        ["final_desired", "web-ng", "1"],
    ]
    both = run_summary.side_by_side({runner.NODESCALER: figures, runner.BASELINE: figures | {}})
    assert both.splitlines()[0].split() == ["nodescaler", "CA", "defaults"]
    assert any(row.split() == ["final_desired", "web-ng", "1", "1"] for row in both.splitlines())
