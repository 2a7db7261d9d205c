"""The drain's settings, its one-line report and its figures."""

from __future__ import annotations

import pytest
from nodescaler.config import DrainSettings
from nodescaler.domain.scale_down.drain import (
    DrainOutcome,
    DrainResult,
    LifecycleResult,
    PodNote,
    Replacement,
    ReplacementOutcome,
)
from nodescaler.errors import SettingsError
from nodescaler.observability.metric_names import Dimension, MetricName
from nodescaler.observability.records import Record, drain_records

QUEUE = {"EVALUATION_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo"}


def test_drain_settings_default_to_ten_minutes_heartbeats_every_minute_and_continue() -> None:
    settings = DrainSettings.from_environment(QUEUE | {"CLUSTER_NAME": "prod"})
    assert (
        settings.drain_timeout_seconds,
        settings.heartbeat_seconds,
        settings.max_grace_seconds,
        settings.drain_timeout_result,
        settings.kubeconfig_path,
    ) == (600, 60, 600, "CONTINUE", None)
    assert DrainSettings.from_environment(settings.environment()) == settings


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({}, "DrainSettings: setting EVALUATION_QUEUE_URL is not set"),
        (
            QUEUE | {"DRAIN_TIMEOUT_SECONDS": "900"},
            "setting DRAIN_TIMEOUT_SECONDS Input should be less than or equal to 840",
        ),
        (
            QUEUE | {"DRAIN_TIMEOUT_RESULT": "STOP"},
            "setting DRAIN_TIMEOUT_RESULT Input should be 'CONTINUE' or 'ABANDON'",
        ),
        (
            QUEUE | {"HEARTBEAT_SECONDS": "5"},
            "setting HEARTBEAT_SECONDS Input should be greater than or equal to 10",
        ),
    ],
)
def test_a_bad_drain_setting_is_named(environment: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        DrainSettings.from_environment(environment)
    assert message in str(caught.value)


BLOCKED = PodNote("default/web-1", "blocked by PodDisruptionBudget default/web-pdb (...)")


def test_a_timed_out_drain_says_which_pods_stayed_and_what_auto_scaling_was_told() -> None:
    result = DrainResult(
        "i-0b1c2d3e4f5a6b7c8",
        "lifecycle-action",
        DrainOutcome.TIMED_OUT,
        node="ip-1",
        node_group="web",
        evicted=("default/web-0",),
        remaining=(BLOCKED,),
        lifecycle_result=LifecycleResult.CONTINUE,
        seconds=600,
    )
    assert result.message == (
        "node ip-1 (i-0b1c2d3e4f5a6b7c8) not drained in 600 s: 1 pods evicted, left: "
        "default/web-1 blocked by PodDisruptionBudget default/web-pdb (...); "
        "lifecycle action completed with CONTINUE"
    )
    figures = {MetricName.PODS_EVICTED: 1, MetricName.DRAIN_TIMEOUTS: 1}
    assert drain_records(result) == [
        Record(figures),
        Record(figures, {Dimension.NODE_GROUP: "web"}),
    ]


@pytest.mark.parametrize(
    ("outcome", "replacement", "figures"),
    [
        (
            DrainOutcome.DRAINED,
            ReplacementOutcome.QUEUED,
            {MetricName.NODES_DRAINED: 1, MetricName.REEVALUATIONS_QUEUED: 1},
        ),
        (
            DrainOutcome.NOT_IN_CLUSTER,
            ReplacementOutcome.UNMANAGED,
            {MetricName.DRAIN_SKIPPED: 1, MetricName.UNMANAGED_INTERRUPTIONS: 1},
        ),
        (
            DrainOutcome.FAILED,
            ReplacementOutcome.UNMANAGED,
            {MetricName.DRAIN_FAILURES: 1, MetricName.UNMANAGED_INTERRUPTIONS: 1},
        ),
        (DrainOutcome.DRAINED, ReplacementOutcome.FAILED, {MetricName.NODES_DRAINED: 1}),
    ],
)
def test_a_spot_drain_counts_its_outcome_and_what_it_did_for_replacement_capacity(
    outcome: DrainOutcome, replacement: ReplacementOutcome, figures: dict[MetricName, float]
) -> None:
    result = DrainResult(
        "i-0a1b2c3d4e5f6a7b8",
        "spot-interruption",
        outcome,
        replacement=Replacement(replacement, None, "..."),
    )
    assert drain_records(result) == [Record({MetricName.PODS_EVICTED: 0} | figures)]


def test_a_spot_warning_for_a_group_not_ours_is_counted_as_ignored_and_unmanaged() -> None:
    result = DrainResult(
        "i-0a1b2c3d4e5f6a7b8",
        "spot-interruption",
        DrainOutcome.NOT_OURS,
        node_group="legacy",
        problem="instance i-0a1b2c3d4e5f6a7b8 is in node group legacy, which is neither "
        "opted in nor one of the stack's drainGroups",
    )
    assert result.message == (
        "instance i-0a1b2c3d4e5f6a7b8 is in node group legacy, which is neither opted in nor "
        "one of the stack's drainGroups: its node is left alone"
    )
    figures = {
        MetricName.PODS_EVICTED: 0,
        MetricName.IGNORED_EVENTS: 1,
        MetricName.UNMANAGED_INTERRUPTIONS: 1,
    }
    assert drain_records(result) == [
        Record(figures),
        Record(figures, {Dimension.NODE_GROUP: "legacy"}),
    ]
