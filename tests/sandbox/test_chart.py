"""The scenario chart: one panel per group, written as a PNG of the size it promises."""

from __future__ import annotations

import struct
from pathlib import Path

from nodescaler_tools.chart import DPI, MAX_PANELS, PANEL_INCHES, GroupChart, render


def size_of(png: Path) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def busy(group: str) -> GroupChart:
    minutes = list(range(60))
    return GroupChart(
        group=group,
        minutes=minutes,
        desired=[0] * 5 + [6] * 50 + [0] * 5,
        in_service=[0] * 8 + [6] * 47 + [0] * 5,
        metrics={"queue": [None] + [100.0 - m for m in minutes[1:]]},  # one missing value
        targets={"queue": 4.0},
        scale_events=[(5, 0, 6), (55, 6, 0)],
        backoffs=[(10.0, 15.0)],
        launch_failures=[10.0],
        baseline_desired=[0] * 6 + [6] * 54,
    )


def test_one_panel_a_group_even_an_empty_one(tmp_path: Path) -> None:
    empty = GroupChart("idle-ng", minutes=[], desired=[], in_service=[], metrics={}, targets={})
    path = render(tmp_path / "chart.png", "two groups", [busy("gpu-ng"), empty])
    width, height = size_of(path)
    assert (width, height) == (PANEL_INCHES[0] * DPI, 2 * PANEL_INCHES[1] * DPI)
    assert path.stat().st_size > 10_000  # drawn, not blank


def test_at_most_six_panels(tmp_path: Path) -> None:
    path = render(tmp_path / "chart.png", "many", [busy(f"ng-{n}") for n in range(9)])
    assert size_of(path)[1] == MAX_PANELS * PANEL_INCHES[1] * DPI
