"""A scenario's runs with several seeds made one, on hand-made summaries (no sandbox): each
figure's mean and spread (min..max), and each ratio marked better, worse or within the
spread, the same in the verdict and in summary.md. The runs themselves: tests/sandbox."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
from nodescaler_cli import main as cli
from nodescaler_sandbox import comparison, seeds, verdict
from nodescaler_sandbox.cluster import tie_order

NS, CA, TUNED = verdict.NODESCALER, verdict.BASELINE, verdict.TUNED
SCENARIO = Path(__file__).parents[2] / "scenarios" / "9-spot-at-max.yaml"


def run(idle: float, waiting: float, p50: float, p99: float | None = None) -> dict[str, Any]:
    return {
        "node_hours": idle + 10,
        "idle_node_hours": idle,
        "unschedulable_pod_minutes": waiting,
        "pods_killed_with_their_instance": 0,
        "disruption_budget_short_minutes": 0,
        "evictions_per_removed_node": None,
        "pod_wait_minutes": {"overall": {"p99": None}},
        "reaction_s": {"overall": {"p50": p50} | ({} if p99 is None else {"p99": p99})},
        "peak_desired": {"ng": 3},
    }


def summary(ours: dict[str, Any], tuned: dict[str, Any]) -> dict[str, Any]:
    return {
        "scenario": "burst",
        "step_seconds": 10,
        "oracle_node_hours": 9.0,
        NS: ours,
        CA: run(9, 9, 60),
        TUNED: tuned,
    }


def test_each_figure_becomes_its_mean_over_the_seeds_with_min_max_and_spread() -> None:
    # Given three seeds' summaries of one scenario
    by_seed = [
        summary(run(idle=1.0, waiting=4.0, p50=10), run(2.0, 5.0, 20)),
        summary(run(idle=2.0, waiting=0.0, p50=30), run(2.5, 5.0, 20)),
        summary(run(idle=4.5, waiting=2.0, p50=20), run(3.0, 5.0, 20)),
    ]
    merged = seeds.aggregate(by_seed, [0, 1, 2])
    # Then the seeds are listed, and each run's figure is its mean, min..max and spread
    assert merged["seeds"] == [0, 1, 2]
    ours = merged[NS]
    assert ours["idle_node_hours"] == 2.5
    assert ours["idle_node_hours_seeds"] == {"mean": 2.5, "min": 1.0, "max": 4.5}
    assert ours["idle_node_hours_spread"] == 3.5
    assert ours["unschedulable_pod_minutes_spread"] == 4.0
    assert merged[TUNED]["unschedulable_pod_minutes_spread"] == 0.0
    # reaction's p50 spread beside the first seed's figures; no number left unmerged
    assert ours["reaction_s_seeds"] == {"mean": 20.0, "min": 10.0, "max": 30.0}
    assert ours["reaction_s_spread"] == 20.0
    assert ours["reaction_s"] == {"overall": {"p50": 10}}
    assert ours["evictions_per_removed_node"] is None and ours["peak_desired"] == {"ng": 3}
    # and the scenario's own keys are the first seed's
    assert merged["oracle_node_hours"] == 9.0


def test_one_seed_keeps_its_summary_as_it_is_and_a_mismatch_is_refused() -> None:
    one = summary(run(1.0, 4.0, 10), run(2.0, 5.0, 20))
    assert seeds.aggregate([one], [0]) == {**one, "seeds": [0]}
    assert "idle_node_hours_spread" not in seeds.aggregate([one], [0])[NS]
    with pytest.raises(ValueError, match=r"seeds: \[0, 1\]: one summary each, not 1"):
        seeds.aggregate([one], [0, 1])


@pytest.mark.parametrize(
    ("ours", "theirs", "spreads", "floor", "marked"),
    [
        (2.0, 3.0, (0.5, 0.8), 0.0, "better"),
        (3.0, 2.0, (0.5, 0.8), 0.0, "worse"),
        (2.5, 3.0, (0.1, 0.5), 0.0, "within"),  # the reference's spread
        (3.0, 2.5, (0.5, 0.1), 0.0, "within"),  # nodescaler's
        (3.0, 2.5, (0.0, 0.0), 0.5, "within"),  # one seed: the floor alone
        (3.0, 2.5, (0.0, 0.0), 0.0, "worse"),
    ],
)
def test_a_ratio_is_within_the_spread_when_no_further_apart_than_the_wider_spread(
    ours: float, theirs: float, spreads: tuple[float, float], floor: float, marked: str
) -> None:
    assert seeds.mark(ours, theirs, spreads, floor) == marked


def test_the_verdict_and_the_table_mark_a_ratio_alike_from_the_seeds_spreads() -> None:
    # Given five seeds where nodescaler's idle node-hours (mean 2.5) beat CA tuned's
    # (mean 2.8) by less than nodescaler's spread (2.0), and its waits (0) beat CA's (5)
    # by more than either spread
    ours = [run(i, 0.0, 10) for i in (1.5, 2.0, 2.5, 3.0, 3.5)]
    tuned = [run(i, w, 10) for i, w in ((2.7, 4.0), (2.8, 6.0), (2.9, 5.0), (2.8, 5.0), (2.8, 5))]
    merged = seeds.aggregate([summary(o, t) for o, t in zip(ours, tuned, strict=True)], range(5))
    # Then the verdict reads the means and marks idle within the spread, waits better
    marks = {c.label: (c.mark, c.ours, c.theirs) for c in verdict.compare(merged)}
    assert marks["idle node-hours"] == ("within noise", 2.5, 2.8)
    assert marks["pod-minutes waiting"] == ("better", 0.0, 5.0)
    # and so does the table, its note saying what the spread is
    (row,) = comparison.rows([merged])
    assert row[4] == "0.00 better"  # unschedulable pod-minutes
    assert row[9] == "0.89 within"  # idle node-hours
    assert "within the spread" in comparison.markdown([merged])


def test_a_single_seeds_table_is_as_it_was_unmarked() -> None:
    one = seeds.aggregate([summary(run(1.0, 0.0, 10), run(2.0, 5.0, 20))], [0])
    (row,) = comparison.rows([one])
    assert (row[4], row[9]) == ("0.00", "0.50")
    assert "Seeds:" not in comparison.markdown([one])


def test_seed_zero_breaks_placement_ties_by_name_another_seed_in_its_own_order() -> None:
    names = [f"ip-10-0-0-{i}" for i in range(8)]
    assert sorted(names, key=lambda n: tie_order(n, 0)) == names
    one = sorted(names, key=lambda n: tie_order(n, 1))
    assert one != names and one == sorted(names, key=lambda n: tie_order(n, 1))
    assert one != sorted(names, key=lambda n: tie_order(n, 2))


def test_simulate_seeds_runs_each_scenario_with_seeds_0_to_n_and_refuses_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a sandbox that says which seeds it was asked to run
    asked: list[list[int]] = []

    def run_seeds(scenario: Any, seeds_run: list[int], **_: Any) -> dict[str, Any]:
        asked.append(list(seeds_run))
        return {**summary(run(1.0, 0.0, 10), run(2.0, 5.0, 20)), "seeds": list(seeds_run)}

    sandbox = types.SimpleNamespace(
        OUT=tmp_path, progress_to_terminal=lambda: None, run_seeds=run_seeds
    )
    monkeypatch.setattr(cli, "_sandbox", lambda: sandbox)
    # When one scenario is simulated with three seeds
    assert cli.main(["simulate", str(SCENARIO), "--seeds", "3"]) == 0
    # Then it runs with seeds 0, 1 and 2
    assert asked == [[0, 1, 2]]
    # and no seeds at all is a usage error, named
    with pytest.raises(SystemExit) as refused:
        cli.main(["simulate", str(SCENARIO), "--seeds", "0"])
    assert refused.value.code == 2
    assert "'0': a number of seeds, 1 or more" in capsys.readouterr().err


def test_the_reactions_p99_is_a_mean_over_the_seeds_and_judged_within_its_spread() -> None:
    # Given five seeds whose p99 reactions are 6 s but one, 40 s (a tick's wait), against
    # CA tuned's 12 s in each
    ours = [run(1.0, 0.0, 4, p99) for p99 in (6, 6, 40, 6, 6)]
    tuned = [run(1.0, 0.0, 12, 12) for _ in range(5)]
    merged = seeds.aggregate([summary(o, t) for o, t in zip(ours, tuned, strict=True)], range(5))
    # Then the p99's mean, min..max and spread are kept beside the p50's
    assert merged[NS]["reaction_s_p99_seeds"] == {"mean": 12.8, "min": 6, "max": 40}
    assert merged[NS]["reaction_s_p99_spread"] == 34
    # and the verdict reads the mean, within the spread: not one unlucky seed's figure
    marks = {c.label: (c.mark, c.ours) for c in verdict.compare(merged)}
    assert marks["reaction (p99)"] == ("within noise", 12.8)
