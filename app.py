"""CDK entry point: validate cdk.json's settings and the policy documents, then build the stack.

No AWS call happens here. A bad setting or policy stops synth with one line per problem.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from nodescaler.errors import SettingsError

from infra.settings import CONTEXT_KEY, load_settings
from infra.stack import NodescalerStack

HERE = Path(__file__).resolve().parent


def main() -> None:
    # No construct stack traces: the CLI would print a line of jsii's JavaScript above each
    # warning (the alarms' with no destination), which says nothing to whoever deploys.
    app = cdk.App(stack_traces=False)
    context = app.node.try_get_context(CONTEXT_KEY)
    if context is None:  # run as `python app.py`, without the CDK CLI passing cdk.json's context
        context = json.loads((HERE / "cdk.json").read_text())["context"].get(CONTEXT_KEY)
    try:
        settings, policies = load_settings(context, HERE)
    except SettingsError as error:
        sys.exit(f"nodescaler: cannot synthesize:\n{error}")
    NodescalerStack(app, "Nodescaler", settings=settings, policies=policies)
    # AwsSolutions and Serverless findings are synth errors; the constructs suppress, with
    # reasons, the few that are intended.
    cdk.Aspects.of(app).add(AwsSolutionsChecks())
    cdk.Aspects.of(app).add(ServerlessChecks())
    app.synth()


if __name__ == "__main__":
    main()
