"""CDK entry point: validate cdk.json's settings and the policy documents, then build one
stack per deployment (one, or each of `deployments`).

`-c nodescaler='{...}'` is laid over cdk.json's settings. No AWS call happens here. A bad
setting or policy stops synth with one line per problem.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from nodescaler.errors import SettingsError

from infra.settings import CONTEXT_KEY, load_deployments, with_override
from infra.stack import NodescalerStack

HERE = Path(__file__).resolve().parent


def main() -> None:
    # cdk.json's context (the feature flags too) for `python app.py`, which the CDK CLI
    # overrides with what it passes: cdk.json's own, and `-c` values (a string of JSON).
    config = Path("cdk.json") if Path("cdk.json").is_file() else HERE / "cdk.json"
    file_context = json.loads(config.read_text()).get("context", {})
    # No construct stack traces: the CLI would print a line of jsii's JavaScript above each
    # warning (the alarms' with no destination), which says nothing to whoever deploys.
    app = cdk.App(context=file_context, stack_traces=False)
    try:
        context = with_override(
            file_context.get(CONTEXT_KEY), app.node.try_get_context(CONTEXT_KEY)
        )
        deployments = load_deployments(context, HERE)
    except SettingsError as error:
        sys.exit(f"nodescaler: cannot synthesize:\n{error}")
    for settings, policies in deployments:
        NodescalerStack(
            app,
            settings.deployment,
            settings=settings,
            policies=policies,
            policies_folder=settings.policies_path(HERE),
        )
    # AwsSolutions and Serverless findings are synth errors; the constructs suppress, with
    # reasons, the few that are intended.
    cdk.Aspects.of(app).add(AwsSolutionsChecks())
    cdk.Aspects.of(app).add(ServerlessChecks())
    app.synth()


if __name__ == "__main__":
    main()
