"""The operator CLI: validate, simulate, invoke, status, explain, pause and resume
(`nodescaler --help`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodescaler.adapters.policy_files import load_policies, load_policy_file
from nodescaler.errors import MalformedEventError, NodescalerError, PolicyError, StateCorruptError

from nodescaler_cli import pause, policies
from nodescaler_cli.event_fit import INVOKED
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

    from nodescaler_cli.event_fit import misfit

    incoming = load_event(args.event)
    if problem := misfit(args.function, incoming, args.event):
        raise MalformedEventError(problem)
    scenario = load_scenario(args.scenario or scenarios.scenario_files()[0])
    scenarios.invoke(args.function, incoming, scenario)
    return 0


def _target(args: argparse.Namespace) -> Any:
    """The command's AWS target, made once: main names the table it resolved in errors."""
    from nodescaler_cli.operator import Target

    if getattr(args, "target", None) is None:
        stack, cluster = _deployment(args)
        args.target = Target(
            region=args.region,
            endpoint_url=args.endpoint_url,
            table=args.table,
            stack=stack,
            cluster=cluster,
            profile=args.profile,
            output=getattr(args, "output", "table"),
            config=args.config,
        )
    return args.target


def _deployment(args: argparse.Namespace) -> tuple[str, str | None]:
    """The stack, as synth names it, and the cluster whose groups it manages: by --stack; by
    --deployment or --cluster, as cdk.json describes it when it does; else the one deployment
    cdk.json describes. A pause or a status then sees only the groups that deployment scales."""
    from nodescaler.deployment import PREFIX, deployment_id, name_for_cluster

    from nodescaler_cli.operator import deployment_from, deployments_in

    if args.stack or args.table:  # named outright: --cluster, or the stack's, narrows them
        stack = args.stack or (deployment_from(args.config) or (PREFIX, ""))[0]
        return str(stack), args.cluster or (None if args.stack and not args.table else "")
    described = deployments_in(args.config) if args.deployment or args.cluster else []
    if args.deployment is not None:
        stack = deployment_id(args.deployment)
        known = dict(described)
        return stack, args.cluster or known.get(stack, "")
    if args.cluster:
        by_cluster = {cluster: stack for stack, cluster in described}
        return by_cluster.get(args.cluster, deployment_id(name_for_cluster(args.cluster))), (
            args.cluster
        )
    return deployment_from(args.config) or (PREFIX, "")


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
    command.add_argument(
        "--deployment",
        help="the deployment whose stack holds the state table (default: the --cluster's "
        "name, else cdk.json's deployment)",
    )
    command.add_argument("--stack", help="the stack (default: nodescaler-<deployment>)")
    command.add_argument(
        "--cluster",
        default="",
        help="only groups tagged with this cluster (default: the cluster of the deployment "
        "cdk.json describes, unless --stack or --table is given)",
    )
    command.add_argument("--profile", help="the AWS profile (default: your AWS configuration)")
    command.add_argument(
        "--config",
        type=Path,
        help="the cdk.json whose tag names to use (default: ./cdk.json when there is one)",
    )


def _positive(text: str) -> int:
    """A count of one or more, or argparse's usage error (exit 2)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of one or more")
    return number


def _output_option(command: argparse.ArgumentParser) -> None:
    """Every read command prints a table for people, or JSON or YAML for scripts."""
    command.add_argument(
        "-o", "--output", choices=FORMATS, default="table", help="table (default), json or yaml"
    )


EXIT_CODES = """exit codes:
  0  done
  1  an AWS or operator problem: a missing table, stack, group, profile or credentials, an
     unreachable endpoint, a refused call (one line on stderr says which)
  2  bad input: a wrong command line (argparse's usage error), an invalid policy, scenario,
     event or cdk.json file, an event the function does not take"""


def version() -> str:
    """The installed package's version; pyproject.toml's when run from a checkout."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("nodescaler")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nodescaler",
        description="Operate and try nodescaler.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
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
    invoke.add_argument("function", choices=INVOKED, help="the function")
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
    _output_option(status)
    status.set_defaults(run=_status)

    explain = commands.add_parser(
        "explain", help="a group's last decisions with every input and what limited them"
    )
    explain.add_argument("group", help="the Auto Scaling Group's name")
    explain.add_argument(
        "--last", type=_positive, default=5, help="how many decisions (default: 5)"
    )
    _aws_options(explain)
    _output_option(explain)
    explain.set_defaults(run=_explain)
    policies.register(commands, _target, _aws_options, _output_option)
    pause.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    from nodescaler_cli.operator import OperatorError, UsageError, aws_problem, one_line

    try:
        code: int = args.run(args)
    except BrokenPipeError:  # `nodescaler status | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    except PolicyError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return 2
    except UsageError as error:
        print(f"nodescaler {args.command}: {error}", file=sys.stderr)
        return 2
    except (OperatorError, StateCorruptError) as error:  # what is in AWS, not what was given
        print(f"nodescaler {args.command}: {one_line(error)}", file=sys.stderr)
        return 1
    except NodescalerError as error:  # a bad scenario, event or cdk.json file: one line, named
        print(f"nodescaler {args.command}: {one_line(error)}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        problem = aws_problem(error, getattr(args, "target", None))
        print(f"nodescaler {args.command}: {problem}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
