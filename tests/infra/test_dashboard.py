"""What operators see: the dashboard's rows and widgets, read from the synthesized template
(infra/dashboard.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk.assertions import Template
from nodescaler_sandbox.dashboard_layout import resolved as render  # refs shown as <Name>

from tests.infra.stack_template import dashboard_widgets, resources
from tests.infra.test_stack import synth


def dashboard_body(template: Template) -> list[dict[str, Any]]:
    """The dashboard's widgets in order, references shown as their names."""
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    text = render(dashboard["Properties"]["DashboardBody"]).replace("<", "").replace(">", "")
    widgets: list[dict[str, Any]] = json.loads(text)["widgets"]
    return widgets


def searches(widget: str) -> list[str]:
    return [e[0]["expression"] for e in json.loads(widget)["metrics"] if "expression" in e[0]]


def test_the_dashboard_shows_the_groups_of_every_policy_even_those_applied_later(
    template: Template,
) -> None:
    """Given a deployment with three policies; When synthesized; Then the groups' graphs are
    SEARCHes over the Policy and NodeGroup dimensions naming no policy (a policy applied
    with `nodescaler apply` after the deploy shows too), and the decisions table filters
    on none: no row is fixed at synth."""
    widgets = dashboard_widgets(template)
    assert not any(title.startswith("gpu-training") for title in widgets)  # no fixed rows
    for title in (
        "Node groups: desired, current and in-service nodes, forecast and warm",
        "Node groups: pending pods their nodes are to take",
        "Node groups: each metric against its target",
        "Node groups: changes and unavailable metrics",
        "Node groups: backed off or paused, and nodes protected from scale-in",
    ):
        found = searches(widgets[title])
        assert found and all(
            re.search(r"\{Nodescaler,(Metric,)?NodeGroup,Policy,service\}", s) for s in found
        )
        assert not any("Policy=" in s for s in found), title
    backoff = searches(
        widgets["Node groups: backed off or paused, and nodes protected from scale-in"]
    )
    assert [s.split('MetricName="')[1].split('"')[0] for s in backoff] == [
        "BackedOff",
        "Paused",
        "ProtectedNodes",
    ]
    decisions = widgets["Node groups: decisions and what limited them, every policy"]
    assert "decision.policy as policy" in decisions and "filter decision.policy =" not in decisions
    assert "Tick duration and evaluation latency" in widgets


def test_the_dashboard_graphs_each_groups_pending_pods_as_evaluate_reports_them(
    template: Template,
) -> None:
    (search,) = searches(
        dashboard_widgets(template)["Node groups: pending pods their nodes are to take"]
    )
    assert search == (
        'SEARCH(\'{Nodescaler,NodeGroup,Policy,service} MetricName="PendingPods" '
        "service=\"nodescaler-my-cluster\"', 'Maximum', 60)"
    )


def test_the_dashboard_opens_on_every_alarms_state(template: Template) -> None:
    header, status, *_ = dashboard_body(template)
    assert header["type"] == "text" and status["type"] == "alarm"
    assert (status["x"], status["y"], status["width"]) == (0, header["height"], 24)
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    assert sorted(status["properties"]["alarms"]) == sorted(f"{name}.Arn" for name in alarms)


USAGE = "Cluster usage against its limits"


def plotted(widget: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Each metric a graph plots by name: (name, its service, statistic, axis)."""
    return [
        (m[1], m[3], m[-1]["stat"], m[-1].get("yAxis", "left"))
        for m in widget["properties"]["metrics"]
        if m[0] == "Nodescaler" and m[2] == "service"
    ]


def test_given_limits_on_nodes_and_vcpus_then_the_usage_widget_marks_each_and_no_other() -> None:
    """Given maxNodes 100 and maxVcpus 400 (no memory limit); When synthesized; Then the
    cluster's nodes, vCPUs and memory as the limiter counts them are graphed (their
    maximum each minute), with a line at 100 nodes and at 400 vCPUs, and none for memory."""
    limited = synth(clusterLimits={"maxNodes": 100, "maxVcpus": 400})
    (usage,) = [w for w in dashboard_body(limited) if w["properties"].get("title") == USAGE]
    assert plotted(usage) == [
        ("ClusterNodes", "nodescaler-my-cluster", "Maximum", "left"),
        ("ClusterVcpus", "nodescaler-my-cluster", "Maximum", "right"),
        ("ClusterMemoryGiB", "nodescaler-my-cluster", "Maximum", "right"),
    ]
    assert usage["properties"]["annotations"]["horizontal"] == [
        {"value": 100, "label": "maxNodes", "yAxis": "left"},
        {"value": 400, "label": "maxVcpus", "yAxis": "right"},
    ]
    (current,) = searches(json.dumps(usage["properties"]))
    assert current.startswith("SUM(SEARCH(") and 'MetricName="CurrentNodes"' in current


def usage_widget(template: Template) -> dict[str, Any]:
    (usage,) = [
        w for w in dashboard_body(template) if w["properties"].get("title", "").startswith(USAGE)
    ]
    return usage


def test_given_no_limits_then_the_usage_widget_draws_no_limit_line(template: Template) -> None:
    # Given cdk.json's clusterLimits all null; When synthesized; Then no line, and it says so
    usage = usage_widget(template)
    assert usage["properties"]["title"] == f"{USAGE} (none set)"
    assert "annotations" not in usage["properties"]


def test_given_a_memory_limit_alone_then_its_line_is_the_only_one() -> None:
    usage = usage_widget(synth(clusterLimits={"maxMemoryGib": 512}))
    assert usage["properties"]["annotations"]["horizontal"] == [
        {"value": 512, "label": "maxMemoryGib", "yAxis": "right"}
    ]


def test_the_dashboard_shows_each_groups_unused_reserved_capacity_groups_added_later_too(
    template: Template,
) -> None:
    """Given the deployment; When synthesized; Then reserved capacity unused is a SEARCH over
    the NodeGroup dimension (no group fixed at synth), its minimum each minute."""
    (search,) = searches(
        dashboard_widgets(template)["Reserved capacity unused, by node group (reserved-first)"]
    )
    assert search == (
        'SEARCH(\'{Nodescaler,NodeGroup,service} MetricName="ReservedCapacityUnused" '
        "service=\"nodescaler-my-cluster\"', 'Minimum', 60)"
    )


def test_the_dashboard_shows_the_events_refused_as_unconfirmed(template: Template) -> None:
    # a forged drain or launch-failure event is refused and counted: an operator sees it
    (problems,) = [
        w for title, w in dashboard_widgets(template).items() if title.startswith("Problems")
    ]
    assert '"UnconfirmedEvents"' in problems


def test_the_dashboard_shows_launch_failures_by_group_and_every_functions_health(
    template: Template,
) -> None:
    widgets = dashboard_widgets(template)
    launches = widgets["Launch failures, by node group (each backs its group off)"]
    assert '{Nodescaler,NodeGroup,service} MetricName=\\"LaunchFailures\\"' in launches
    health = widgets["Invocations, errors, throttles"]
    for name in ("dispatch", "evaluate", "drain"):
        assert all(f"{name} {what}" in health for what in ("invocations", "errors", "throttles"))
    queues = widgets["Queues: waiting evaluations and dead letters"]
    assert all(f"{name} dead letters" in queues for name in ("dispatch", "evaluation", "drain"))


def test_the_dashboard_has_a_drain_row(template: Template) -> None:
    widgets = dashboard_widgets(template)
    outcomes = widgets["Drains: done, timed out, failed, lifecycle actions expired"]
    for metric in ("NodesDrained", "DrainTimeouts", "DrainFailures", "LifecycleActionsExpired"):
        assert f'"{metric}", "service", "nodescaler-my-cluster"' in outcomes
    assert (
        '"PodsEvicted", "service", "nodescaler-my-cluster"'
        in widgets["Pods evicted, and how long drains take"]
    )
    assert "Drains: the latest, and what was left on the node" in widgets
