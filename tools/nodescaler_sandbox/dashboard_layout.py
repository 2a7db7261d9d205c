"""The dashboard's layout, drawn from a synthesized template's DashboardBody: an ASCII grid
of its widgets where CloudWatch places them, and a table of what each one plots.

docs/dashboard.md carries the drawing of the sample deployment (cdk.json) between two
markers; a test draws it again from today's template and compares, so it cannot drift.

    python -m nodescaler_sandbox.dashboard_layout                  # cdk.json's, synthesized
    python -m nodescaler_sandbox.dashboard_layout --write docs/dashboard.md
    python -m nodescaler_sandbox.dashboard_layout cdk.out/nodescaler-prod.template.json
"""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

GRID = 24  # CloudWatch's dashboard grid is 24 columns wide
COLUMN = 4  # characters a grid column takes in the drawing; a grid row takes one line
BEGIN = "<!-- dashboard layout: drawn by python -m nodescaler_sandbox.dashboard_layout -->"
END = "<!-- dashboard layout: end -->"
REPO = Path(__file__).resolve().parents[2]
KIND = {"metric": "graph", "log": "logs", "alarm": "alarms", "text": "text"}


def resolved(value: Any) -> str:
    """A template value as text: references shown as <Name> or <Name.Attribute>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(resolved(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    return json.dumps(value)


def widgets(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The widgets of the template's one dashboard, as CloudWatch will read them."""
    (dashboard,) = (
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Dashboard"
    )
    found: list[dict[str, Any]] = json.loads(resolved(dashboard["DashboardBody"]))["widgets"]
    return found


def name(widget: Mapping[str, Any]) -> str:
    """What the widget is: its title, or a text widget's first line."""
    properties = widget["properties"]
    if "title" in properties:
        return str(properties["title"])
    first = str(properties.get("markdown", "")).splitlines()[0] if properties else ""
    return first.lstrip("# ").strip()


def plotted(widget: Mapping[str, Any]) -> str:
    """Each line a graph draws (metric and statistic), or a table's or list's source."""
    properties = widget["properties"]
    if widget["type"] == "alarm":
        return f"the state of {len(properties['alarms'])} alarms"
    if widget["type"] == "log":
        _, fields, *_, limit = (part.strip() for part in str(properties["query"]).split("|"))
        return f"Logs Insights, the latest {limit.removeprefix('limit ')}: {fields}"
    if widget["type"] == "text":
        return "text"
    lines = [_line(entry) for entry in properties.get("metrics", [])]
    lines += [f"line at {a['value']:g} ({a['label']})" for a in _annotations(properties)]
    return "; ".join(lines)


def _annotations(properties: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = properties.get("annotations", {}).get("horizontal", [])
    return found


def _line(entry: Sequence[Any]) -> str:
    options = entry[-1] if isinstance(entry[-1], dict) else {}
    if "expression" in options:
        expression = str(options["expression"])
        metric = re.search(r'MetricName="([^"]+)"', expression)
        statistic = re.search(r"', '([^']+)', \d+\)", expression)
        shape = "sum over groups" if expression.startswith("SUM(") else "per group"
        what = metric.group(1) if metric else expression
        return f"{what} {statistic.group(1) if statistic else ''} ({shape})".replace("  ", " ")
    namespace, metric = entry[0], entry[1]
    return f"{options.get('label') or f'{namespace} {metric}'} ({options.get('stat', 'Average')})"


def draw(found: Sequence[Mapping[str, Any]]) -> str:
    """The widgets as boxes on CloudWatch's grid, each labelled with its kind and name."""
    bottom = max(w["y"] + w["height"] for w in found)
    canvas = [[" "] * (GRID * COLUMN + 1) for _ in range(bottom + 1)]
    for widget in found:
        _box(canvas, widget)
    return "\n".join("".join(row).rstrip() for row in canvas)


def _box(canvas: list[list[str]], widget: Mapping[str, Any]) -> None:
    left, top = widget["x"] * COLUMN, widget["y"]
    right, low = left + widget["width"] * COLUMN, top + widget["height"]
    for column in range(left, right + 1):
        canvas[top][column] = canvas[low][column] = "-"
    for row in range(top, low + 1):
        canvas[row][left] = canvas[row][right] = "|"
    for row, column in ((top, left), (top, right), (low, left), (low, right)):
        canvas[row][column] = "+"
    label = f"[{KIND.get(widget['type'], widget['type'])}] {name(widget)}"
    lines = textwrap.wrap(label, right - left - 3)[: low - top - 1]
    for offset, text in enumerate(lines, start=1):
        canvas[top + offset][left + 2 : left + 2 + len(text)] = list(text)


def table(found: Sequence[Mapping[str, Any]]) -> str:
    rows = ["| # | at (x, y), size | widget | what it shows |", "| --: | --- | --- | --- |"]
    for number, w in enumerate(found, start=1):
        place = f"{w['x']}, {w['y']}; {w['width']}×{w['height']}"
        shows = plotted(w).replace("|", "\\|")
        rows.append(f"| {number} | {place} | {name(w)} | {shows} |")
    return "\n".join(rows)


def layout(template: Mapping[str, Any]) -> str:
    """The drawing and the table, as docs/dashboard.md carries them between its markers."""
    found = widgets(template)
    return f"```text\n{draw(found)}\n```\n\n{table(found)}\n"


def replaced(document: str, rendering: str) -> str:
    """The document with the text between its markers replaced by `rendering`."""
    before, rest = document.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{rendering}{END}{after}"


def embedded(document: str) -> str:
    """The rendering a document carries between its markers."""
    return document.split(BEGIN)[1].split(END, maxsplit=1)[0].removeprefix("\n")


def sample_template(repo: Path = REPO) -> Mapping[str, Any]:
    """cdk.json's deployment, synthesized in this process as `cdk synth` would make it (its
    feature flags; the layers staged, not built: the dashboard does not depend on them)."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from nodescaler_cdk.settings import CONTEXT_KEY, load_settings
    from nodescaler_cdk.stack import NodescalerStack

    context = json.loads((repo / "cdk.json").read_text())["context"]
    flags = {k: v for k, v in context.items() if k.startswith("@aws-cdk")}
    settings, policies = load_settings(context[CONTEXT_KEY], repo)
    app = cdk.App(context=flags | {"aws:cdk:bundling-stacks": []})
    stack = NodescalerStack(app, "Sample", settings=settings, policies=policies)
    return Template.from_stack(stack).to_json()


def main(arguments: Iterator[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "template", type=Path, nargs="?", help="a synthesized template (default: cdk.json's)"
    )
    parser.add_argument("--write", type=Path, help="replace the layout in this markdown file")
    given = parser.parse_args(None if arguments is None else list(arguments))
    template = json.loads(given.template.read_text()) if given.template else sample_template()
    rendering = layout(template)
    if given.write is None:
        print(rendering, end="")
        return
    given.write.write_text(replaced(given.write.read_text(), rendering))


if __name__ == "__main__":
    main()
