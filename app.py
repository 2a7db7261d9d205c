"""CDK entry point: validate cdk.json's settings and the policy documents, then build one
stack per deployment (one, or each of `deployments`).

`-c nodescaler='{...}'` is laid over cdk.json's settings, and each `-c key=value`
(`-c clusterName=prod`) over both. No AWS call happens here. A bad setting or policy stops
synth with one line per problem, naming where the value came from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from nodescaler.errors import SettingsError

from infra.settings import (
    CONTEXT_KEY,
    Sources,
    context_flags,
    json_flag,
    load_deployments,
    unknown_flags,
)
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
        unknown_flags(app.node.get_all_context(), file_context)
        file_settings = file_context.get(CONTEXT_KEY) or {}
        sources = Sources(
            file=file_settings,
            json_flag=json_flag(app.node.try_get_context(CONTEXT_KEY), file_settings),
            flags=context_flags(app.node.try_get_context),
        )
        deployments = load_deployments(sources, HERE)
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
