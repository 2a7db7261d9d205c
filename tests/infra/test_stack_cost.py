"""What the whole stack costs a month, computed from the synthesized template: every
resource type is priced or named free (a resource added and not priced fails here), and
the README's table is this computation's."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from aws_cdk.assertions import Template
from nodescaler_bench import stack_cost

from tests.infra.test_stack import REPO

pytestmark = pytest.mark.infra


def test_every_resource_of_the_stack_is_priced_or_named_free(template: Template) -> None:
    assert stack_cost.unpriced(template.to_json()) == []


def test_a_resource_added_to_the_stack_and_not_priced_fails_the_bill(template: Template) -> None:
    # Given the stack with one more resource, of a type priced nowhere
    grown: dict[str, Any] = copy.deepcopy(template.to_json())
    grown["Resources"]["NewKey"] = {"Type": "AWS::KMS::Key", "Properties": {}}
    # Then the bill is refused, naming it, rather than left short
    with pytest.raises(ValueError, match=r"priced nowhere .*\['AWS::KMS::Key'\]"):
        stack_cost.monthly(grown)


def test_the_bill_reads_the_template_its_alarms_functions_and_tick(template: Template) -> None:
    lines = {line.item: line for line in stack_cost.monthly(template.to_json())}
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert lines["CloudWatch alarms"].how.startswith(f"{len(alarms)} alarms")
    assert lines["CloudWatch alarms"].dollars >= len(alarms) * stack_cost.ALARM_METRIC
    functions = [item for item in lines if item.startswith("Lambda ")]
    folders = sorted(p.name for p in (REPO / "functions").iterdir() if p.is_dir())
    assert len(functions) == len(folders)  # each deployed function billed, none twice
    # a tick every minute: 43,200 dispatches a month
    assert lines["Lambda Dispatch"].how.startswith("43,200 invocations")


def test_the_readme_shows_the_bill_as_computed(template: Template) -> None:
    readme = (REPO / "README.md").read_text()
    rows = stack_cost.readme_rows(stack_cost.monthly(template.to_json()))
    for item, dollars in rows:
        assert f"| {item} | ${dollars:,.2f} |" in readme, item
    total = rows[-1][1]
    assert f"costs about **${total:,.0f} a month**" in readme
    # and the page cited for each price is AWS's own
    assert all(
        re.match(r"https://aws\.amazon\.com/\S+/pricing/", u) for u in stack_cost.SOURCES.values()
    )
