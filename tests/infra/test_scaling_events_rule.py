"""docs/operations.md's "Scaling events" rule, run as written in a CDK stack: it routes the events it
names, from source nodescaler, to the SNS topic, and lets EventBridge publish there."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from tests.infra.stack_template import matches
from tests.infra.test_stack import REPO


def readme_rule() -> str:
    page = (REPO / "docs" / "operations.md").read_text()
    section = page.split("## Scaling events\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return str(block)


def sample(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((REPO / "events" / "scaling" / f"{name}.json").read_text())
    return loaded


def test_the_readme_rule_sends_the_pages_worth_events_to_its_topic_and_no_others() -> None:
    stack = cdk.Stack(cdk.App(), "Operator")
    exec(readme_rule(), {"stack": stack})  # as a user's app would run it

    template = Template.from_stack(stack)
    ((topic_id, _),) = template.find_resources("AWS::SNS::Topic").items()
    (rule,) = (r["Properties"] for r in template.find_resources("AWS::Events::Rule").values())
    assert rule["Targets"][0]["Arn"] == {"Ref": topic_id}
    pattern = rule["EventPattern"]
    routed = {
        name: matches(pattern, sample(name))
        for name in ("node-group-resized", "node-group-backed-off", "node-drain-timed-out")
    }
    assert routed == {
        "node-group-resized": False,
        "node-group-backed-off": True,
        "node-drain-timed-out": True,
    }
    (policy,) = template.find_resources("AWS::SNS::TopicPolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (statement["Action"], statement["Principal"]) == (
        "sns:Publish",
        {"Service": "events.amazonaws.com"},
    )
