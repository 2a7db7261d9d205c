"""Function settings: read from the environment once, every bad value named by its variable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nodescaler.config import DispatchSettings, EvaluateSettings
from nodescaler.domain.scale_down.pod_rules import DrainRules
from nodescaler.errors import SettingsError
from nodescaler.expander_settings import BalanceExpanderSpec

BASE = {
    "STATE_TABLE_NAME": "nodescaler-state",
    "EVALUATION_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo",
}


def test_settings_read_the_environment_and_default_the_rest() -> None:
    settings = EvaluateSettings.from_environment(BASE | {"DRY_RUN": "true", "UNRELATED": "x"})
    assert settings.state_table == "nodescaler-state"
    assert settings.dry_run is True
    assert settings.tag_names.policy == "nodescaler/policy"
    assert settings.tag_names.paused == "nodescaler/paused"
    renamed = EvaluateSettings.from_environment(BASE | {"TAG_PAUSED": "team/hold"})
    assert renamed.tag_names.paused == "team/hold"
    assert (
        DispatchSettings.from_environment(BASE).evaluation_queue_url == BASE["EVALUATION_QUEUE_URL"]
    )


def test_the_environment_a_model_writes_reads_back_the_same() -> None:
    settings = EvaluateSettings.from_environment(
        BASE | {"AUDIT_TTL_DAYS": "7", "CLUSTER_NAME": "prod"}
    )
    assert EvaluateSettings.from_environment(settings.environment()) == settings


def test_a_chain_ending_in_balance_reads_back_with_the_labels_it_ignores() -> None:
    chain = '[{"name": "least-waste"}, {"name": "balance", "ignoredLabels": ["team"]}]'
    settings = EvaluateSettings.from_environment(BASE | {"EXPANDERS": chain})
    assert [e.name for e in settings.expanders] == ["least-waste", "balance"]
    assert isinstance(balance := settings.expanders[1], BalanceExpanderSpec)
    assert balance.ignored_labels == ["team"]
    assert EvaluateSettings.from_environment(settings.environment()) == settings


@pytest.mark.parametrize(
    ("model", "environment", "message"),
    [
        (
            DispatchSettings,
            {},
            "DispatchSettings: setting STATE_TABLE_NAME is not set; setting EVALUATION_QUEUE_URL "
            "is not set",
        ),
        (EvaluateSettings, {}, "EvaluateSettings: setting STATE_TABLE_NAME is not set"),
        (
            DispatchSettings,
            BASE | {"EVALUATION_QUEUE_URL": "q.fifo"},
            "setting EVALUATION_QUEUE_URL String should match pattern",
        ),
        (
            EvaluateSettings,
            BASE | {"DRY_RUN": "perhaps"},
            "setting DRY_RUN Input should be a valid boolean",
        ),
        (
            EvaluateSettings,
            BASE | {"AUDIT_TTL_DAYS": "0"},
            "setting AUDIT_TTL_DAYS Input should be greater than or equal to 1",
        ),
        (
            DispatchSettings,
            BASE | {"BACKOFF_INITIAL_SECONDS": "0"},
            "setting BACKOFF_INITIAL_SECONDS Input should be greater than or equal to 1",
        ),
        (
            EvaluateSettings,
            BASE | {"KUBERNETES_TIMEOUT_SECONDS": "0"},
            "setting KUBERNETES_TIMEOUT_SECONDS Input should be greater than 0",
        ),
        (
            EvaluateSettings,
            BASE | {"CLUSTER_MAX_NODES": "-1"},
            "setting CLUSTER_MAX_NODES Input should be greater than or equal to 0",
        ),
        (
            EvaluateSettings,
            BASE | {"CLUSTER_MAX_VCPUS": "many"},
            "setting CLUSTER_MAX_VCPUS Input should be a valid integer",
        ),
        (
            DispatchSettings,
            BASE | {"TAG_POLICY": ""},
            "setting TAG_POLICY String should have at least 1 character",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": "least-waste"},
            "setting EXPANDERS Invalid JSON",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": '[{"name": "cheapest"}]'},
            "setting EXPANDERS[0] Input tag 'cheapest' found using 'name' does not match",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": '[{"name": "priority", "priorities": {"1": ["spot-("]}}]'},
            "setting EXPANDERS[0][priority][priorities] Value error, 'spot-(' is not a regular "
            "expression",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": '[{"name": "custom", "timeoutSeconds": 60}]'},
            "setting EXPANDERS[0][custom][functionName] Field required",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": '[{"name": "balance", "ignoreLabels": ["team"]}]'},
            "setting EXPANDERS[0][balance][ignoreLabels] Extra inputs are not permitted",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": '[{"name": "balance", "ignoredLabels": [""]}]'},
            "setting EXPANDERS[0][balance][ignoredLabels][0] String should have at least 1 "
            "character",
        ),
        (
            EvaluateSettings,
            BASE | {"EXPANDERS": '[{"name": "balance"}, {"name": "least-waste"}]'},
            "setting EXPANDERS Value error, expanders[0] is balance: it spreads the chain's "
            "choice over similar groups, so it comes last, once (the chain has 2)",
        ),
    ],
)
def test_a_bad_or_missing_setting_fails_at_once_with_its_name(
    model: type[DispatchSettings | EvaluateSettings], environment: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        model.from_environment(environment)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("given", "timeout"),
    [
        ({}, timedelta(hours=1)),  # Cluster Autoscaler's default
        ({"BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS": "1"}, timedelta(seconds=1)),
        ({"BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS": "604800"}, timedelta(days=7)),
    ],
)
def test_the_system_pod_timeout_is_read_in_seconds_with_cluster_autoscalers_default(
    given: dict[str, str], timeout: timedelta
) -> None:
    rules = EvaluateSettings.from_environment(BASE | given).drain_rules
    assert rules == DrainRules(True, True, timeout)


@pytest.mark.parametrize("value", ["0", "604801", "-5", "1h"])
def test_a_system_pod_timeout_out_of_bounds_is_refused_by_name(value: str) -> None:
    with pytest.raises(SettingsError, match="BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS"):
        EvaluateSettings.from_environment(
            BASE | {"BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS": value}
        )
