"""The dashboard's layout as docs/dashboard.md draws it: from the synthesized template's
DashboardBody, so the page cannot drift from what `cdk deploy` creates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nodescaler_sandbox.dashboard_layout import (
    BEGIN,
    END,
    draw,
    embedded,
    layout,
    main,
    plotted,
    replaced,
)

from tests.infra.test_stack import REPO, synth

PAGE = REPO / "docs" / "dashboard.md"


def test_the_docs_layout_is_the_one_todays_template_draws() -> None:
    """Given cdk.json's deployment synthesized today; When its dashboard is drawn; Then
    docs/dashboard.md carries exactly that drawing (redraw it with the tool's --write)."""
    drawn = layout(synth().to_json())
    assert embedded(PAGE.read_text()) == drawn, (
        "docs/dashboard.md's layout is stale: run "
        "python -m nodescaler_sandbox.dashboard_layout --write docs/dashboard.md"
    )
    # and it shows what an operator opens the page for, in CloudWatch's order
    titles = [line for line in drawn.splitlines() if line.startswith("| ")]
    assert "[alarms] Alarms" in drawn.splitlines()[4]  # right under the header
    assert any("Node groups: pending pods" in t and "PendingPods Maximum" in t for t in titles)


def body(*widgets: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps({"widgets": list(widgets)})
    properties = {"DashboardBody": {"Fn::Join": ["", [text]]}}
    return {
        "Resources": {"Dashboard": {"Type": "AWS::CloudWatch::Dashboard", "Properties": properties}}
    }


GRAPH = {
    "type": "metric",
    "x": 12,
    "y": 0,
    "width": 12,
    "height": 3,
    "properties": {
        "title": "Node groups: pending pods",
        "metrics": [
            [
                {
                    "expression": "SEARCH('{Nodescaler,NodeGroup,Policy,service} "
                    'MetricName="PendingPods" service="x"\', \'Maximum\', 60)',
                    "label": "pending",
                }
            ]
        ],
        "annotations": {"horizontal": [{"value": 100, "label": "maxNodes"}]},
    },
}
ALARMS = {
    "type": "alarm",
    "x": 0,
    "y": 0,
    "width": 12,
    "height": 3,
    "properties": {"title": "Alarms", "alarms": ["a", "b"]},
}


def test_each_widget_is_a_box_where_cloudwatch_places_it_naming_what_it_plots() -> None:
    # Given two widgets side by side on the top row; When drawn
    drawing = draw([ALARMS, GRAPH])
    # Then each is a box 4 characters a grid column wide, one line a grid row high
    assert drawing.splitlines() == [
        "+" + "-" * 47 + "+" + "-" * 47 + "+",
        "| [alarms] Alarms" + " " * 31 + "| [graph] Node groups: pending pods" + " " * 13 + "|",
        "|" + " " * 47 + "|" + " " * 47 + "|",
        "+" + "-" * 47 + "+" + "-" * 47 + "+",
    ]
    assert plotted(GRAPH) == "PendingPods Maximum (per group); line at 100 (maxNodes)"
    assert plotted(ALARMS) == "the state of 2 alarms"


def test_given_a_template_file_then_the_tool_rewrites_only_the_pages_layout(
    tmp_path: Path,
) -> None:
    template = tmp_path / "template.json"
    template.write_text(json.dumps(body(ALARMS, GRAPH)))
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\n{BEGIN}\nold drawing\n{END}\n\nAfter.\n")
    main([str(template), "--write", str(page)])
    written = page.read_text()
    assert written.startswith("# Title\n\n") and written.endswith(f"{END}\n\nAfter.\n")
    assert "old drawing" not in written
    assert embedded(written) == layout(json.loads(template.read_text()))
    assert replaced(written, embedded(written)) == written  # redrawing changes nothing
