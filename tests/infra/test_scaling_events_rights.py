"""Scaling events in the stack: dispatch, evaluate and drain may PutEvents on the one bus
the settings name (the default bus unless told), and are told which; terminate may not."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template
from nodescaler.config import DispatchSettings, DrainSettings, EvaluateSettings

from infra.settings import load_settings
from tests.infra.stack_template import actions_of, function, render, role_statements, statement_for
from tests.infra.test_stack import CDK_CONTEXT, REPO, synth

ANNOUNCING = {"dispatch": DispatchSettings, "evaluate": EvaluateSettings, "drain": DrainSettings}
BUS = "arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>:event-bus/"


def put_events_resources(template: Template, folder: str) -> list[str]:
    statement = statement_for(role_statements(template, folder), "events:PutEvents")
    assert statement["Effect"] == "Allow"
    assert actions_of(statement) == ["events:PutEvents"]  # nothing else on the bus
    resources = statement["Resource"]
    return [render(r) for r in (resources if isinstance(resources, list) else [resources])]


def bus_setting(template: Template, folder: str) -> str:
    """The bus the function's settings model reads from its environment."""
    alias = ANNOUNCING[folder].model_fields["event_bus_name"].alias
    assert alias is not None
    return str(function(template, folder)["Environment"]["Variables"][alias])


@pytest.mark.parametrize("folder", sorted(ANNOUNCING))
def test_given_the_sample_then_each_announcing_function_puts_events_on_the_default_bus_only(
    template: Template, folder: str
) -> None:
    assert put_events_resources(template, folder) == [f"{BUS}default"]
    assert bus_setting(template, folder) == "default"


def test_the_termination_policy_function_puts_no_events(template: Template) -> None:
    statements = role_statements(template, "terminate")
    assert not [s for s in statements if any(a.startswith("events:") for a in actions_of(s))]


@pytest.mark.parametrize(
    ("bus", "resource"),
    [
        ("platform-events", f"{BUS}platform-events"),
        (
            "arn:aws:events:eu-west-1:111122223333:event-bus/central",
            "arn:aws:events:eu-west-1:111122223333:event-bus/central",
        ),
    ],
)
def test_given_a_named_bus_then_the_functions_put_on_it_and_on_no_other(
    bus: str, resource: str
) -> None:
    template = synth(eventBus=bus)
    for folder in ANNOUNCING:
        assert put_events_resources(template, folder) == [resource]
        assert bus_setting(template, folder) == bus


@pytest.mark.parametrize("bus", ["", "my bus", "bus*"])
def test_given_a_bad_bus_name_then_synth_names_the_setting(bus: Any) -> None:
    from nodescaler.errors import SettingsError

    with pytest.raises(SettingsError, match=r"cdk\.json: context\.nodescaler\.eventBus: "):
        load_settings(CDK_CONTEXT | {"eventBus": bus}, REPO)
