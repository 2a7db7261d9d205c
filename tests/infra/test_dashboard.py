"""What operators see: the dashboard's rows and widgets, read from the synthesized template
(infra/dashboard.py)."""

from __future__ import annotations

from aws_cdk.assertions import Template

from tests.infra.stack_template import dashboard_widgets


def test_the_dashboard_has_a_row_per_policy_built_from_searches(template: Template) -> None:
    widgets = dashboard_widgets(template)
    for policy in ("gpu-training", "microservices", "business-hours"):
        assert f"{policy}: desired, current and in-service nodes" in widgets
        assert f"{policy}: each metric against its target" in widgets
        assert f"{policy}: decisions and what limited them" in widgets
        backoff = widgets[f"{policy}: backed off or paused, and nodes protected from scale-in"]
        assert f'MetricName=\\"BackedOff\\" Policy=\\"{policy}\\"' in backoff
        assert f'MetricName=\\"Paused\\" Policy=\\"{policy}\\"' in backoff
        assert f'MetricName=\\"ProtectedNodes\\" Policy=\\"{policy}\\"' in backoff
        assert "NodeGroup,Policy,service" in backoff  # the dimensions evaluate reports
    assert 'MetricName=\\"DesiredNodes\\" Policy=\\"gpu-training\\"' in "".join(widgets.values())
    assert "Tick duration and evaluation latency" in widgets


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
