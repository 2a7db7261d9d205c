"""The handlers as Lambda starts them: settings from the environment, clients from wiring,
every sample in events/ handled (the groups it names exist, in moto)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.errors import PolicyError, SettingsError
from nodescaler_sandbox.lambda_local import LocalContext

from functions.dispatch import handler as dispatch
from functions.evaluate import handler as evaluate
from tests.aws import client, make_asg, make_evaluation_queue, make_state_table
from tests.e2e.conftest import ROOT, TABLE, event


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    make_state_table(TABLE)
    monkeypatch.setenv("STATE_TABLE_NAME", TABLE)
    monkeypatch.setenv("EVALUATION_QUEUE_URL", make_evaluation_queue())
    monkeypatch.setenv("POLICIES_PATH", str(ROOT / "policies"))
    make_asg(
        "gpu-training", tags={"nodescaler/enabled": "true", "nodescaler/policy": "gpu-training"}
    )
    make_asg(
        "web",
        tags={"nodescaler/enabled": "true", "nodescaler/policy": "business-hours"},
        desired=2,
        min_size=2,
        max_size=40,
    )
    client("sqs").create_queue(QueueName="ml-training-queue")
    yield
    dispatch.configured_dispatcher.cache_clear()
    evaluate.configured_function.cache_clear()


@pytest.mark.usefixtures("environment")
def test_the_dispatch_samples_queue_their_groups() -> None:
    tick = dispatch.handler(event("schedule-tick.json"), LocalContext())
    alarm = dispatch.handler(event("alarm-state-change.json"), LocalContext())
    assert tick == {"cause": "tick", "queued": ["gpu-training", "web"]}
    assert alarm == {"cause": "alarm web-requests-high: OK → ALARM", "queued": ["web"]}


@pytest.mark.usefixtures("environment")
def test_the_sqs_sample_evaluates_both_its_groups() -> None:
    response = evaluate.handler(event("evaluate-batch.json"), LocalContext())
    assert response == {"batchItemFailures": []}
    store = DynamoStateStore(client("dynamodb"), TABLE, audit_ttl=timedelta(days=30))
    assert store.load("gpu-training").seen("tick-2026-11-23T09:00:00Z")
    assert store.load("web").seen("c4c1c1c9-6542-e61b-6ef0-8c4d36933a92")


def test_a_missing_setting_fails_the_first_invocation_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STATE_TABLE_NAME", raising=False)
    with pytest.raises(
        SettingsError, match="EvaluateSettings: setting STATE_TABLE_NAME is not set"
    ):
        evaluate.handler(event("evaluate-batch.json"), LocalContext())


def test_a_policy_folder_that_does_not_exist_fails_the_first_invocation_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("EVALUATION_QUEUE_URL", "https://sqs.eu-west-1.amazonaws.com/1/q.fifo")
    monkeypatch.setenv("STATE_TABLE_NAME", "nodescaler-state")
    monkeypatch.setenv("POLICIES_PATH", str(tmp_path / "nowhere"))
    with pytest.raises(PolicyError, match="nowhere: \\(folder\\): no such policy folder"):
        dispatch.handler(event("schedule-tick.json"), LocalContext())
