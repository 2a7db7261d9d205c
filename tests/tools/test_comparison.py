"""The comparison after a run of scenarios: cost and wait against the baseline, and their
ratios, as a table and a Pareto chart."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import comparison

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def summary(
    name: str,
    hours: tuple[float, float],
    waits: tuple[int, int],
    idle: tuple[float, float] = (1.5, 2.5),
    oracle: float = 7.25,
) -> dict[str, Any]:
    def run(node_hours: float, pod_minutes: int, p99: float | None, idle: float) -> dict[str, Any]:
        return {
            "node_hours": node_hours,
            "idle_node_hours": idle,
            "unschedulable_pod_minutes": pod_minutes,
            "pod_wait_minutes": {"overall": {"p99": p99}},
            "pods_killed_with_their_instance": 0,
            "evictions_per_removed_node": 0.5 if p99 == 18.0 else None,
            "disruption_budget_short_minutes": 0,
        }

    return {
        "scenario": name,
        "oracle_node_hours": oracle,
        comparison.NODESCALER: run(hours[0], waits[0], 3.0 if waits[0] else None, idle[0]),
        comparison.BASELINE: run(hours[1], waits[1], 18.0, idle[1]),
    }


def test_ratios_read_below_one_as_better_and_none_against_none_as_even() -> None:
    assert comparison.ratio(5, 10) == 0.5
    assert comparison.ratio(0, 0) == 1.0
    assert math.isinf(comparison.ratio(3, 0))


def test_a_row_a_scenario_with_both_figures_and_their_ratios() -> None:
    rows = comparison.rows(
        [summary("burst", (190, 200), (7200, 7200)), summary("night", (12.62, 10.8), (0, 72))]
    )
    # idle node-hours (ns / CA), ratio, bound, nodescaler against it, reaction p99
    NEW = ["1.5 / 2.5", "0.60", "7.25"]  # noqa: N806
    first = ["190 / 200", "0.95", "7200 / 7200", "1.00", "3 / 18", "- / 0.5", "0 · 0"]
    second = ["12.62 / 10.8", "1.17", "0 / 72", "0.00", "- / 18", "- / 0.5", "0 · 0"]
    assert rows == [
        ["burst", *first, *NEW, "26.21", "- / -"],
        ["night", *second, *NEW, "1.74", "- / -"],
    ]


def cells_of(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_the_table_gives_both_runs_idle_node_hours_and_the_oracles_node_hours() -> None:
    # Given a scenario where nodescaler left 3.2 node-hours idle, the baseline 0.8, and
    # capacity following the pods would have taken 9.5
    text = comparison.markdown([summary("web", (12, 10), (0, 72), idle=(3.2, 0.8), oracle=9.5)])
    header, _, row = text.splitlines()[2:5]
    cells = dict(zip(cells_of(header), cells_of(row), strict=True))
    # Then the table says so, in columns of their own
    assert cells["idle node-hours (ns / CA / tuned)"] == "3.2 / 0.8"
    assert cells["bound node-hours"] == "9.5"
    assert cells["ns / bound"] == "1.26"  # 12 node-hours against 9.5


def with_tuned(base: dict[str, Any], hours: float, waits: int, idle: float) -> dict[str, Any]:
    tuned = dict(base[comparison.BASELINE]) | {
        "node_hours": hours,
        "unschedulable_pod_minutes": waits,
        "idle_node_hours": idle,
    }
    return base | {comparison.TUNED: tuned}


def test_the_table_gives_both_baselines_and_ratios_to_ca_tuned() -> None:
    # Given nodescaler at 12 node-hours (3.2 idle) and 0 pod-minutes, CA's defaults at 10
    # (0.8) and 72, and CA tuned at 15 (6.4 idle) and 4
    base = summary("web", (12, 10), (0, 72), idle=(3.2, 0.8), oracle=9.5)
    text = comparison.markdown([with_tuned(base, 15, 4, 6.4)])
    header, _, row = text.splitlines()[2:5]
    cells = list(zip(cells_of(header), cells_of(row), strict=True))
    # Then every cell gives the three runs, and the ratios are nodescaler / CA tuned
    assert cells[1:5] == [
        ("node-hours (ns / CA / tuned)", "12 / 10 / 15"),
        ("ratio", "0.80"),
        ("unschedulable pod-minutes (ns / CA / tuned)", "0 / 72 / 4"),
        ("ratio", "0.00"),
    ]
    assert cells[8:10] == [
        ("idle node-hours (ns / CA / tuned)", "3.2 / 0.8 / 6.4"),
        ("ratio", "0.50"),
    ]
    assert "nodescaler / CA tuned" in text


def panels(*summaries: dict[str, Any]) -> list[Axes]:
    figure = comparison.pareto_figure(list(summaries))
    return [ax for ax in figure.axes if ax.axison]


def point(ax: Axes, label: str) -> tuple[float, float]:
    (found,) = [line for line in ax.get_lines() if line.get_label() == label]
    ((x, y),) = found.get_xydata()
    return float(x), float(y)


NS, CA, ORACLE = (
    comparison.RUNS[comparison.NODESCALER][0],
    comparison.RUNS[comparison.BASELINE][0],
    comparison.ORACLE[0],
)


def test_every_scenario_has_a_panel_titled_with_its_name() -> None:
    names = [f"{n}-scenario-with-a-long-name" for n in range(1, 17)]
    axes = panels(*(summary(name, (10, 10), (5, 5)) for name in names))
    # Then each of the 16 is named on its own panel, none left to overlapping labels
    assert [ax.get_title(loc="left") for ax in axes] == names


def test_a_run_whose_pods_never_waited_is_drawn_at_zero_not_clipped() -> None:
    # Given nodescaler with no pod-minutes waiting (a ratio of 0 to the baseline's 72)
    (ax,) = panels(summary("night", (12.62, 10.8), (0, 72), idle=(3.2, 0.8), oracle=9.5))
    # Then its point is at 0 on the y axis, inside the panel
    assert point(ax, NS) == (12.62, 0.0)
    assert ax.get_ylim()[0] == 0.0
    assert point(ax, CA) == (10.8, 72.0)
    # and the oracle, which never lets a pod wait, on the x axis at its node-hours
    assert point(ax, ORACLE) == (9.5, 0.0)
    assert ax.get_xlim()[0] == 0.0 and ax.get_xlim()[1] > 12.62


def test_each_runs_idle_node_hours_is_a_bar_to_its_left() -> None:
    (ax,) = panels(summary("night", (12.62, 10.8), (0, 72), idle=(3.2, 0.8), oracle=9.5))
    bars = sorted(
        tuple(map(tuple, segment.round(2).tolist()))
        for collection in ax.collections
        for segment in collection.get_segments()
    )
    # Then from what some pod requested to what was billed, at the run's waits
    assert bars == [((9.42, 0.0), (12.62, 0.0)), ((10.0, 72.0), (10.8, 72.0))]


def test_a_tuned_baseline_is_drawn_when_the_summary_has_it() -> None:
    tuned = summary("web", (12, 10), (0, 72)) | {
        comparison.TUNED: {"node_hours": 11.0, "unschedulable_pod_minutes": 8}
    }
    (ax,) = panels(tuned)
    assert point(ax, comparison.RUNS[comparison.TUNED][0]) == (11.0, 8.0)
    # and nodescaler's ratios to both under the panel
    assert ax.get_xlabel().splitlines()[1] == "ns / tuned: node-h 1.09 · wait 0.00"
    (without,) = panels(summary("web", (12, 10), (0, 72)))
    assert comparison.RUNS[comparison.TUNED][0] not in [
        line.get_label() for line in without.get_lines()
    ]


def test_the_table_and_the_chart_are_written(tmp_path: Path) -> None:
    table, chart = comparison.write(
        tmp_path, [summary("burst", (190, 200), (7200, 7200)), summary("gpu", (3, 0), (5, 0))]
    )
    text = table.read_text()
    assert "| burst | 190 / 200 | 0.95 |" in text
    assert "| gpu | 3 / 0 | ∞ |" in text  # the baseline used none: no ratio to speak of
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
