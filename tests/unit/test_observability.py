"""The figures an evaluation reports: per group, per metric against its target, and system-wide."""

from __future__ import annotations

import json

import pytest
from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scale_up.backoff import BackoffRules, after_failure
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.pause import Pause, hold
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.observability.metric_names import SERVICE_VARIABLE, Dimension, MetricName
from nodescaler.observability.records import Record, emit, result_records
from nodescaler.service.evaluation import EvaluationResult, Outcome

from tests.builders import EXACT, T0, policy, queue_metric, readings, run

GROUP = {Dimension.POLICY: "gpu", Dimension.NODE_GROUP: "ng-test"}


def test_an_acted_scale_out_reports_sizes_changes_usage_and_the_shortfall() -> None:
    # 8 nodes wanted by the group, 5 in service; 60 tasks at 4 per node ask for 15
    decision = run(
        policy(queue_metric("jobs", per_node=4), name="gpu"),
        8,
        readings(jobs=60),
        size=GroupSize(current=8, ready=5),
    ).decision
    records = result_records(EvaluationResult("ng-test", Outcome.ACTED, decision), 850)
    assert records == [
        Record(
            {
                MetricName.EVALUATIONS: 1,
                MetricName.CURRENT_NODES: 8,
                MetricName.DESIRED_NODES: 15,
                MetricName.IN_SERVICE_NODES: 5,
                MetricName.RECOMMENDED_NODES: 15,
                MetricName.METRICS_UNAVAILABLE: 0,
                MetricName.BACKED_OFF: 0,
                MetricName.PROTECTED_NODES: 0,
                MetricName.PAUSED: 0,
                MetricName.UNSERVED: 0,
                MetricName.EVALUATION_LATENCY: 850,
                MetricName.NODES_ADDED: 7,
                MetricName.NODES_REMOVED: 0,
            },
            GROUP,
        ),
        Record({MetricName.METRIC_USAGE: 187.5}, GROUP | {Dimension.METRIC: "jobs"}),
        Record({MetricName.SHORTFALL_NODES: 3, MetricName.BACKED_OFF: 0, MetricName.UNSERVED: 0}),
    ]


def test_a_rejected_group_reports_only_that_it_was_rejected_and_so_unserved() -> None:
    result = EvaluationResult("ng-test", Outcome.REJECTED, problems=("bad tag",))
    rejected = {MetricName.REJECTED: 1, MetricName.UNSERVED: 1}
    assert result_records(result) == [
        Record(rejected, {Dimension.NODE_GROUP: "ng-test"}),
        Record(rejected),  # service-wide: what the unserved-group alarm watches
    ]


def test_given_a_metric_unavailable_then_the_group_and_the_service_report_it_unserved() -> None:
    # Given a policy with two metrics, one of which could not be read; When it is evaluated
    the_policy = policy(queue_metric("jobs", per_node=4), queue_metric("other"), name="gpu")
    decision = run(the_policy, 4, readings(jobs=60)).decision
    (group, *_, system) = result_records(EvaluationResult("ng-test", Outcome.UNCHANGED, decision))
    # Then the group and the service-wide record (the alarm's) say a group is unserved
    assert (group.figures[MetricName.METRICS_UNAVAILABLE], group.figures[MetricName.UNSERVED]) == (
        1,
        1,
    )
    assert system.figures[MetricName.UNSERVED] == 1


def test_given_pending_pods_for_a_group_then_it_reports_how_many_its_nodes_take() -> None:
    # Given a pending-pods reading whose plan puts 7 pending pods on this group's nodes
    the_policy = policy({"type": "PendingPods"}, name="gpu")
    reading = MetricReading(value=2, at=T0, detail="7 pending pods: +2 nodes", pending_pods=7)
    decision = run(the_policy, 1, {"pending-pods": reading}).decision
    # When its evaluation is reported; Then the group's record counts them, for the dashboard
    (group, *_) = result_records(EvaluationResult("ng-test", Outcome.ACTED, decision))
    assert group.figures[MetricName.PENDING_PODS] == 7
    # and a policy without pending pods reports none (not a misleading zero)
    other = run(policy(queue_metric("jobs"), name="gpu"), 1, readings(jobs=8)).decision
    (group, *_) = result_records(EvaluationResult("ng-test", Outcome.ACTED, other))
    assert MetricName.PENDING_PODS not in group.figures


def test_a_duplicate_or_skipped_evaluation_reports_nothing() -> None:
    decision = run(policy(), 1, readings(jobs=4)).decision
    assert result_records(EvaluationResult("ng-test", Outcome.DUPLICATE, decision)) == []
    assert result_records(EvaluationResult("ng-test", Outcome.SKIPPED)) == []


def test_a_dry_run_change_is_counted_as_such_and_not_as_nodes_added() -> None:
    decision = run(policy(), 1, readings(jobs=40)).decision
    (group, *_) = result_records(EvaluationResult("ng-test", Outcome.DRY_RUN, decision))
    assert group.figures[MetricName.DRY_RUN_CHANGES] == 1
    assert MetricName.NODES_ADDED not in group.figures


def test_a_backed_off_group_reports_it_and_its_protected_instances() -> None:
    now = T0
    backoff = after_failure(None, now, "InsufficientInstanceCapacity", BackoffRules())
    decision = run(
        policy(queue_metric("jobs", per_node=4), name="gpu"),
        4,
        readings(jobs=60),
        size=GroupSize(current=4, protected=2),
        backoff=backoff,
    ).decision
    (group, *_, system) = result_records(EvaluationResult("ng-test", Outcome.UNCHANGED, decision))
    assert group.figures[MetricName.BACKED_OFF] == 1
    assert system.figures[MetricName.BACKED_OFF] == 1  # what the backoff alarm watches
    assert group.figures[MetricName.PROTECTED_NODES] == 2


def test_a_forecast_is_reported_whether_acted_on_or_only_recorded() -> None:
    for mode in ("ForecastOnly", "ForecastAndScale"):
        predictive = {"type": "Predictive", "predictive": {"mode": mode}}
        the_policy = policy(queue_metric("jobs", per_node=4), predictive, name="gpu")
        forecast = MetricReading(value=12, at=T0, detail="12 for Mon 12:05 UTC")
        decision = run(the_policy, 2, readings(jobs=8) | {"predictive": forecast}).decision
        (figures, *_) = result_records(EvaluationResult("ng-test", Outcome.ACTED, decision))
        assert figures.figures[MetricName.FORECAST_NODES] == 12
    without = run(policy(queue_metric("jobs"), name="gpu"), 2, readings(jobs=8)).decision
    (figures, *_) = result_records(EvaluationResult("ng-test", Outcome.ACTED, without))
    assert MetricName.FORECAST_NODES not in figures.figures


def test_each_record_carries_the_service_its_deployment_sets_else_nodescaler(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [Record({MetricName.MALFORMED_EVENTS: 1}), Record({MetricName.REJECTED: 1}, GROUP)]
    monkeypatch.setenv(SERVICE_VARIABLE, "nodescaler-blue")  # as infra sets each function's
    emit(records)
    monkeypatch.delenv(SERVICE_VARIABLE)  # the sandbox and tests
    emit(records)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(emf["service"], emf["_aws"]["CloudWatchMetrics"]) for emf in printed] == [
        (service, [{"Namespace": "Nodescaler", "Dimensions": [dimensions], "Metrics": [metric]}])
        for service in ("nodescaler-blue", "nodescaler")
        for dimensions, metric in (
            (["service"], {"Name": "MalformedEvents", "Unit": "Count"}),
            (["Policy", "NodeGroup", "service"], {"Name": "NodeGroupRejected", "Unit": "Count"}),
        )
    ]


def test_a_paused_group_reports_it_whether_or_not_the_pause_held_anything() -> None:
    pause = Pause(direction=PauseDirection.SCALE_IN, by="tag nodescaler/paused")
    exact = policy(queue_metric("jobs", per_node=4), behavior=EXACT)
    for jobs, held in ((4, True), (60, False)):  # 1 node wanted (held), then 15 (not held)
        decision = hold(run(exact, 4, readings(jobs=jobs)).decision, [pause])
        assert (decision.would_desire is not None) is held
        (group, *_) = result_records(EvaluationResult("ng-test", Outcome.UNCHANGED, decision))
        assert group.figures[MetricName.PAUSED] == 1
    unpaused = run(exact, 4, readings(jobs=4)).decision
    (group, *_) = result_records(EvaluationResult("ng-test", Outcome.ACTED, unpaused))
    assert group.figures[MetricName.PAUSED] == 0
