"""docs/operations.md's alarm table against the synthesized stack: every alarm the stack
defines is explained there, and the page explains no alarm the stack does not define."""

from __future__ import annotations

import re

from aws_cdk.assertions import Template

from tests.infra.test_stack import REPO, synth

DEPLOYMENT = "nodescaler-my-cluster"  # the sample cdk.json's: every alarm's name starts with it


def documented_alarms() -> set[str]:
    """The alarm names in the first column of the page's "What the alarms mean" table."""
    page = (REPO / "docs" / "operations.md").read_text()
    section = page.split("## What the alarms mean\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \|", section, flags=re.MULTILINE)
    return {name for row in rows for name in re.findall(r"`([a-z-]+)`", row)}


def test_given_the_sample_stack_then_the_operations_page_explains_each_of_its_alarms() -> None:
    # Given the stack the sample cdk.json synthesizes (with a cluster: the drain's alarms too)
    template: Template = synth()
    names = [
        alarm["Properties"]["AlarmName"]
        for alarm in template.find_resources("AWS::CloudWatch::Alarm").values()
    ]
    assert all(name.startswith(f"{DEPLOYMENT}-") for name in names), names
    defined = {name.removeprefix(f"{DEPLOYMENT}-") for name in names}
    # When an operator looks an alarm up in docs/operations.md
    documented = documented_alarms()
    # Then each alarm the stack defines has its row, and no row names one it does not define
    assert sorted(defined - documented) == [], "alarms the page does not explain"
    assert sorted(documented - defined) == [], "rows for alarms the stack does not define"
