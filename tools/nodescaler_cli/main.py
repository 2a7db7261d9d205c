"""The operator CLI: validate, simulate, invoke, status, explain, pause and resume
(`nodescaler --help`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodescaler.adapters.policy_files import load_policies, load_policy_file
from nodescaler.errors import NodescalerError, PolicyError

from nodescaler_cli import pause
from nodescaler_cli.output import FORMATS

DEFAULT_POLICIES = Path("policies")


def _validate(args: argparse.Namespace) -> int:
    path: Path = args.path
    if path.is_file():
        policy = load_policy_file(path)
        print(f"{path}: policy {policy.name!r} is valid")
        return 0
    policies = load_policies(path)
    for name in sorted(policies):
        print(f"{path}: policy {name!r} is valid")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    # The sandbox is imported only for the commands that run it.
    from nodescaler_sandbox import comparison
    from nodescaler_sandbox import runner as scenarios
    from nodescaler_sandbox.scenario_file import load_scenario

    files = [args.scenario] if args.scenario else scenarios.scenario_files()
    loaded = [load_scenario(path) for path in files]  # every file checked before any runs
    if len(loaded) == 1:
        summaries = [scenarios.run(loaded[0], progress=scenarios.progress_to_terminal())]
    else:
        summaries = scenarios.run_all(files, loaded)
    if len(summaries) > 1:  # one scenario alone leaves the last run's comparison as it was
        table, chart = comparison.write(scenarios.OUT, summaries)
        print(f"\n{table.read_text()}")
        print(f"Cost and wait, every scenario: {table} and {chart}")
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from nodescaler_sandbox import runner as scenarios
    from nodescaler_sandbox.scenario_file import load_event, load_scenario

    incoming = load_event(args.event)
    scenario = load_scenario(args.scenario or scenarios.scenario_files()[0])
    scenarios.invoke(args.function, incoming, scenario)
    return 0


def _target(args: argparse.Namespace) -> Any:
    from nodescaler_cli.operator import Target

    return Target(
        region=args.region,
        endpoint_url=args.endpoint_url,
        table=args.table,
        stack=args.stack,
        cluster=args.cluster,
        profile=args.profile,
        output=getattr(args, "output", "table"),
    )


def _status(args: argparse.Namespace) -> int:
    from nodescaler_cli.operator import status

    return status(_target(args))


def _explain(args: argparse.Namespace) -> int:
    from nodescaler_cli.operator import explain

    return explain(_target(args), args.group, args.last)


def _aws_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--region", help="AWS region (default: your AWS configuration)")
    command.add_argument("--endpoint-url", help="an AWS endpoint, e.g. the sandbox's moto server")
    command.add_argument("--table", help="the state table (default: from the stack's outputs)")
    command.add_argument("--stack", default="Nodescaler", help="the stack (default: Nodescaler)")
    command.add_argument("--cluster", default="", help="only groups tagged with this cluster")
    command.add_argument("--profile", help="the AWS profile (default: your AWS configuration)")


def _output_option(command: argparse.ArgumentParser) -> None:
    """Every read command prints a table for people, or JSON or YAML for scripts."""
    command.add_argument(
        "-o", "--output", choices=FORMATS, default="table", help="table (default), json or yaml"
    )


FUNCTIONS = ("dispatch", "evaluate", "drain")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nodescaler", description="Operate and try nodescaler.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate", help="validate policy documents offline (the same errors as synth)"
    )
    validate.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=DEFAULT_POLICIES,
        help="a policy file or a folder of them (default: policies/)",
    )
    validate.set_defaults(run=_validate)

    simulate = commands.add_parser(
        "simulate",
        help="run scenarios in the sandbox, under nodescaler and a Cluster Autoscaler "
        "baseline (what make demo runs)",
    )
    simulate.add_argument(
        "scenario",
        type=Path,
        nargs="?",
        help="a scenario file (default: every one in scenarios/, as make demo runs them)",
    )
    simulate.set_defaults(run=_simulate)

    invoke = commands.add_parser(
        "invoke", help="run one function's handler on an event, in the sandbox"
    )
    invoke.add_argument("function", choices=FUNCTIONS, help="the function")
    invoke.add_argument("event", type=Path, help="the event, a JSON file (see events/)")
    invoke.add_argument(
        "--scenario",
        type=Path,
        help="the world to run it in: a scenario file, at its first minute "
        "(default: the first in scenarios/)",
    )
    invoke.set_defaults(run=_invoke)

    status = commands.add_parser(
        "status", help="one row per managed group: sizes, metrics against targets, last decision"
    )
    _aws_options(status)
    status.set_defaults(run=_status)

    explain = commands.add_parser(
        "explain", help="a group's last decisions with every input and what limited them"
    )
    explain.add_argument("group", help="the Auto Scaling Group's name")
    explain.add_argument("--last", type=int, default=5, help="how many decisions (default: 5)")
    _aws_options(explain)
    explain.set_defaults(run=_explain)
    pause.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    from nodescaler_cli.operator import OperatorError

    try:
        code: int = args.run(args)
    except PolicyError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return 2
    except NodescalerError as error:  # a bad scenario or event file: one line, named
        print(f"nodescaler {args.command}: {error}", file=sys.stderr)
        return 2
    except (OperatorError, BotoCoreError, ClientError) as error:
        print(f"nodescaler {args.command}: {error}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
