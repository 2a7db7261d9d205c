"""The comparison after a run of scenarios: cost and wait against the baseline, and their
ratios, as a table and a Pareto chart."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nodescaler_sandbox import comparison


def summary(name: str, hours: tuple[float, float], waits: tuple[int, int]) -> dict[str, Any]:
    def run(node_hours: float, pod_minutes: int, p99: float | None) -> dict[str, Any]:
        return {
            "node_hours": node_hours,
            "unschedulable_pod_minutes": pod_minutes,
            "pod_wait_minutes": {"overall": {"p99": p99}},
            "pods_killed_with_their_instance": 0,
            "evictions_per_removed_node": 0.5 if p99 == 18.0 else None,
            "disruption_budget_short_minutes": 0,
        }

    return {
        "scenario": name,
        comparison.NODESCALER: run(hours[0], waits[0], 3.0 if waits[0] else None),
        comparison.BASELINE: run(hours[1], waits[1], 18.0),
    }


def test_ratios_read_below_one_as_better_and_none_against_none_as_even() -> None:
    assert comparison.ratio(5, 10) == 0.5
    assert comparison.ratio(0, 0) == 1.0
    assert math.isinf(comparison.ratio(3, 0))


def test_a_row_a_scenario_with_both_figures_and_their_ratios() -> None:
    rows = comparison.rows(
        [summary("burst", (190, 200), (7200, 7200)), summary("night", (12.62, 10.8), (0, 72))]
    )
    assert rows == [
        ["burst", "190 / 200", "0.95", "7200 / 7200", "1.00", "3 / 18", "- / 0.5", "0 · 0"],
        ["night", "12.62 / 10.8", "1.17", "0 / 72", "0.00", "- / 18", "- / 0.5", "0 · 0"],
    ]


def test_the_table_and_the_chart_are_written(tmp_path: Path) -> None:
    table, chart = comparison.write(
        tmp_path, [summary("burst", (190, 200), (7200, 7200)), summary("gpu", (3, 0), (5, 0))]
    )
    text = table.read_text()
    assert "| burst | 190 / 200 | 0.95 |" in text
    assert "| gpu | 3 / 0 | ∞ |" in text  # the baseline used none: no ratio to speak of
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
