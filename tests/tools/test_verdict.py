"""The demo's closing verdict: nodescaler against Cluster Autoscaler tuned, per scenario,
as ratios marked better / worse / within noise, the losses first, and where the table and
charts are; `nodescaler simulate` of one scenario writes the table and charts too."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
from nodescaler_cli import main as cli
from nodescaler_sandbox import verdict

REPO = Path(__file__).parents[2]


def run(idle: float, waiting: float, reaction: float | None) -> dict[str, Any]:
    return {
        "node_hours": idle + 10,
        "idle_node_hours": idle,
        "unschedulable_pod_minutes": waiting,
        "pod_wait_minutes": {"overall": {"p99": 1.0}},
        "pods_killed_with_their_instance": 0,
        "evictions_per_removed_node": None,
        "disruption_budget_short_minutes": 0,
        "reaction_s": {"overall": {"count": 3, "p50": reaction, "p99": reaction}},
    }


def summary(name: str, ours: dict[str, Any], tuned: dict[str, Any]) -> dict[str, Any]:
    return {
        "scenario": name,
        "step_seconds": 10,
        verdict.NODESCALER: ours,
        verdict.BASELINE: run(9, 9, 60),
        verdict.TUNED: tuned,
    }


# nodescaler waits 2.3x as long as CA tuned, spends less idle, reacts as fast
LOSING = summary("own-cluster", run(idle=1.0, waiting=23.0, reaction=30), run(2.0, 10.0, 30))
WINNING = summary("queue-burst", run(idle=1.0, waiting=0.0, reaction=10), run(3.0, 12.0, 70))


def test_given_a_scenario_nodescaler_loses_then_its_loss_comes_first_named_as_worse() -> None:
    lines = verdict.verdict([WINNING, LOSING], Path("out/demo/summary.md"), [Path("p.png")])
    assert "Cluster Autoscaler (tuned)" in lines[0]
    first, second = lines[1], lines[2]
    assert first.split()[0] == "own-cluster"  # the losing scenario first, whatever the order
    assert first.split("·")[0].strip().endswith("WORSE: pod-minutes waiting 2.30× (23 vs 10)")
    assert "better: idle node-hours 0.50× (1 vs 2)" in first
    assert "within noise: reaction (p50) 1.00× (30 s vs 30 s)" in first
    assert second.split()[0] == "queue-burst" and "WORSE" not in second
    assert "nodescaler is worse on something in 1 of 2 scenarios." in lines
    assert lines[-2:] == ["Summary: out/demo/summary.md", "Charts: p.png"]


def test_a_difference_within_five_percent_or_one_step_is_noise() -> None:
    close = summary("close", run(idle=2.04, waiting=10.1, reaction=38), run(2.0, 10.0, 30))
    marks = {c.label: c.mark for c in verdict.compare(close)}
    assert marks == {
        "idle node-hours": "within noise",  # 2 %
        "pod-minutes waiting": "within noise",  # 1 %
        "reaction (p50)": "within noise",  # 8 s: within the 10-s step
        "reaction (p99)": "within noise",
    }
    apart = summary("apart", run(idle=2.2, waiting=10.0, reaction=41), run(2.0, 10.0, 30))
    marks = {c.label: c.mark for c in verdict.compare(apart)}
    assert marks["reaction (p50)"] == marks["reaction (p99)"] == "worse"


def test_the_p99_reaction_is_judged_apart_from_the_p50() -> None:
    ours, tuned = run(1.0, 2.0, 5), run(1.0, 2.0, 5)
    ours["reaction_s"]["overall"]["p99"] = 61  # a tick's wait for the slowest
    tuned["reaction_s"]["overall"]["p99"] = 12
    marks = {c.label: c.mark for c in verdict.compare(summary("p99", ours, tuned))}
    assert marks["reaction (p50)"] == "within noise"
    assert marks["reaction (p99)"] == "worse"


def test_harm_is_said_where_either_run_has_some_and_a_loss_is_worse() -> None:
    # Given no pod killed on either side: the verdict does not list it
    quiet = verdict.compare(summary("none", run(1.0, 2.0, 5), run(1.0, 2.0, 5)))
    assert not {c.label for c in quiet} & {h.label for h in verdict.HARMS}
    # When nodescaler kills workers with their instances and loses more Jobs' work
    ours, tuned = run(1.0, 2.0, 5), run(1.0, 2.0, 5)
    ours |= {"pods_killed_with_their_instance": 10, "lost_job_minutes": 138.5}
    tuned |= {"lost_job_minutes": 74.0}
    marks = {c.label: c for c in verdict.compare(summary("harm", ours, tuned))}
    # Then both are named, and worse, in the scenario's line
    assert marks["pods killed with their instance"].mark == "worse"
    assert marks["lost job-minutes"].text() == "lost job-minutes 1.87× (138.5 vs 74)"
    assert marks["lost job-minutes"].mark == "worse"
    line = verdict.verdict([summary("harm", ours, tuned)], None)[1]
    assert "WORSE: " in line and "pods killed with their instance ∞ (10 vs 0)" in line
    # and one pod more than CA's one is within what the sandbox resolves
    two, one = {"pods_killed_with_their_instance": 2}, {"pods_killed_with_their_instance": 1}
    close = verdict.compare(summary("one", run(1.0, 2.0, 5) | two, run(1.0, 2.0, 5) | one))
    assert {c.label: c.mark for c in close}["pods killed with their instance"] == "within noise"


def test_a_figure_a_summary_lacks_is_left_out_and_no_tuned_run_is_said() -> None:
    ours = run(1.0, 2.0, None)  # no reaction measured
    (line,) = verdict.verdict([summary("x", ours, run(1.0, 2.0, 30))], None)[1:2]
    assert "reaction" not in line
    without = {"scenario": "y", verdict.NODESCALER: ours}
    assert "no Cluster Autoscaler (tuned) run" in verdict.verdict([without], None)[1]


def test_simulate_of_one_scenario_writes_the_table_and_charts_and_ends_with_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a sandbox whose one run nodescaler loses (the runner itself: tests/sandbox)
    sandbox = types.SimpleNamespace(
        OUT=tmp_path,
        progress_to_terminal=lambda: None,
        run=lambda scenario, **_: LOSING,
    )
    monkeypatch.setattr(cli, "_sandbox", lambda: sandbox)
    # When one scenario is simulated (piped: capsys is no terminal)
    assert cli.main(["simulate", str(REPO / "scenarios" / "9-spot-at-max.yaml")]) == 0
    # Then the table and the charts are written, and the verdict names them
    out = capsys.readouterr().out.splitlines()
    assert (tmp_path / "summary.md").read_text().startswith("# nodescaler against")
    assert (tmp_path / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    assert out[0].startswith("Verdict: nodescaler against Cluster Autoscaler (tuned)")
    assert "WORSE: pod-minutes waiting 2.30×" in out[1]
    assert out[-2:] == [
        f"Summary: {tmp_path / 'summary.md'}",
        f"Charts: {tmp_path / 'pareto.png'}, {tmp_path / 'own-cluster' / 'chart.png'}",
    ]
