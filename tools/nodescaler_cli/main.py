"""The operator CLI: validate, simulate, trace, invoke, status, explain, pause and resume
(`nodescaler --help`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodescaler.errors import MalformedEventError, NodescalerError, PolicyError, StateCorruptError

from nodescaler_cli import pause, policies, trace
from nodescaler_cli.event_owner import INVOKED
from nodescaler_cli.output import FORMATS
from nodescaler_cli.schema import SCHEMA_FILE

DEFAULT_POLICIES = Path("policies")


def _validate(args: argparse.Namespace) -> int:
    """Each policy of the paths given (`validate a.yaml b/`, or `-f`), checked as synth and
    apply check them; policies/ when none is given."""
    from nodescaler_cli.policy_input import read_documents

    paths = [*args.paths, *(args.filenames or [])] or [DEFAULT_POLICIES]
    scenarios = [path for path in paths if _is_scenario(path)]
    if policy_paths := [path for path in paths if path not in scenarios]:
        from nodescaler.domain.policy.advice import advice

        for document in read_documents(policy_paths):
            name = document.policy.name
            print(f"{document.source}: policy {name!r} is valid")
            for warning in advice(document.policy):
                print(f"{document.source}: warning: policy {name!r} {warning}")
    for path in scenarios:
        _validate_scenario(path)
    return 0


def _is_scenario(path: Path) -> bool:
    """A sandbox scenario (a mapping with `groups` and no `kind`), which validate checks as
    simulate loads it; anything else is read as policies (and its problems named so)."""
    import yaml

    if not path.is_file() or path.suffix not in (".yaml", ".yml"):
        return False
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return False
    return isinstance(document, dict) and "groups" in document and "kind" not in document


def _validate_scenario(path: Path) -> None:
    """The scenario checked as simulate loads it, and its warnings: a queue policy whose
    tasks per node cannot fit on its node type (`worker_fit`)."""
    _sandbox()  # the dev extras, or one line saying so
    from nodescaler_sandbox.scenario_file import load_scenario
    from nodescaler_sandbox.worker_fit import warnings

    scenario = load_scenario(path)
    print(f"{path}: scenario {scenario.name!r} is valid")
    for warning in warnings(scenario):
        print(f"{path}: warning: {warning}")


def _schema(args: argparse.Namespace) -> int:
    from nodescaler_cli.schema import schema_text

    print(schema_text(), end="")
    return 0


def _sandbox() -> Any:
    """The sandbox's runner, or one line saying what to install when it is not there."""
    from nodescaler_cli.observe import OperatorError

    try:  # what the sandbox imports only once it runs: moto, matplotlib (the dev extras)
        import matplotlib  # noqa: F401
        import moto  # noqa: F401
        from nodescaler_sandbox import runner
    except ImportError as error:
        if (error.name or "").partition(".")[0].startswith("nodescaler"):
            raise  # our own module failed (a checkout mid-change): its traceback says why
        raise OperatorError(
            f"the sandbox needs the dev extras ({error.name or 'a package'} is missing): "
            "run make setup in a checkout, or pip install 'nodescaler[dev]'"
        ) from None
    return runner


def _simulate(args: argparse.Namespace) -> int:
    """Each scenario's timeline and figures on a terminal; piped, the verdict alone (a
    line per scenario). Either way the table and charts are written, one scenario's too."""
    scenarios = _sandbox()
    from nodescaler_sandbox import comparison
    from nodescaler_sandbox.scenario_file import load_scenario

    piped = not sys.stdout.isatty()
    write = (lambda line: None) if piped else print
    files = [args.scenario] if args.scenario else scenarios.scenario_files()
    loaded = [load_scenario(path) for path in files]  # every file checked before any runs
    from nodescaler_sandbox.worker_fit import warnings

    for path, scenario in zip(files, loaded, strict=True):
        for warning in warnings(scenario):  # on stderr: a piped verdict stays one a line
            print(f"{path}: warning: {warning}", file=sys.stderr)
    seeds = list(range(args.seeds))
    if len(loaded) == 1 and len(seeds) == 1:
        progress = scenarios.progress_to_terminal()
        summaries = [scenarios.run(loaded[0], write=write, progress=progress)]
    elif len(loaded) == 1:
        progress = scenarios.progress_to_terminal()
        summaries = [scenarios.run_seeds(loaded[0], seeds, write=write, progress=progress)]
    else:
        summaries = scenarios.run_all(files, loaded, write=write, seeds_run=seeds)
    table, pareto = comparison.write(scenarios.OUT, summaries)  # one scenario's too
    write(f"\n{table.read_text()}")
    print("\n".join(closing_verdict(summaries, table, pareto)))
    return 0


def _seed_count(text: str) -> int:
    """--seeds: a whole number of seeds, 1 or more (argparse names a bad one)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seeds, 1 or more")
    return int(text)


def closing_verdict(summaries: list[dict[str, Any]], table: Path, pareto: Path) -> list[str]:
    """The run's verdict (nodescaler_sandbox.verdict), naming every chart: the scenario's
    own for one scenario, their folder's pattern for several."""
    from nodescaler_sandbox.verdict import verdict

    folder = pareto.parent
    each = (
        folder / str(summaries[0]["scenario"]) / "chart.png"
        if len(summaries) == 1
        else folder / "<scenario>" / "chart.png"
    )
    return verdict(summaries, table, [pareto, each])


def _invoke(args: argparse.Namespace) -> int:
    scenarios = _sandbox()
    from nodescaler_sandbox.scenario_file import load_event, load_scenario

    from nodescaler_cli.event_owner import misfit

    incoming = load_event(args.event)
    if problem := misfit(args.function, incoming, args.event):
        raise MalformedEventError(problem)
    scenario = load_scenario(args.scenario or scenarios.scenario_files()[0])
    scenarios.invoke(args.function, incoming, scenario)
    return 0


def _target(args: argparse.Namespace) -> Any:
    """The command's AWS target, made once: main names the table it resolved in errors."""
    from nodescaler_cli.observe import Target

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

    from nodescaler_cli.observe import deployment_from, deployments_in

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
    from nodescaler_cli.observe import status, watch

    if args.watch:
        return watch(_target(args), args.groups, args.interval)
    return status(_target(args), args.groups)


def _explain(args: argparse.Namespace) -> int:
    from nodescaler_cli.observe import explain

    return explain(_target(args), args.group, args.last)


def _aws_options(command: argparse.ArgumentParser) -> None:
    """Where the command reads and writes: one group in its --help, listed once."""
    command = command.add_argument_group(AWS_OPTIONS)  # type: ignore[assignment]
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


AWS_OPTIONS = "AWS options (which deployment, where)"
# Each command's --help ends with these, as kubectl's do.
EXAMPLES = {
    "validate": (
        "nodescaler validate                      # every policy in policies/",
        "nodescaler validate -f web.yaml -f gpu/  # files and folders, as apply takes them",
        "nodescaler validate all.yaml             # a file of several documents (---)",
        "nodescaler validate my-scenario.yaml     # a sandbox scenario, and its warnings",
    ),
    "schema": ("nodescaler schema > nodegroup-policy.json  # for your editor",),
    "simulate": (
        "nodescaler simulate                       # every scenario, as make demo runs them",
        "nodescaler simulate scenarios/1-queue-burst.yaml",
        "nodescaler simulate | cat                 # the verdict alone, for a log",
        "nodescaler simulate --seeds 5             # five seeds: each figure's mean and spread",
    ),
    "trace": (
        "nodescaler trace export --prometheus https://prom.example.com --from 7d -o week.csv",
        "nodescaler trace scenario week.csv --groups groups.yaml  # then: simulate week.yaml",
    ),
    "invoke": (
        "nodescaler invoke dispatch events/schedule-tick.json",
        "nodescaler invoke drain events/lifecycle-terminate.json",
        "nodescaler invoke terminate events/termination-request.json",
    ),
    "status": (
        "nodescaler status                         # cdk.json's deployment",
        "nodescaler status -o wide                 # every column",
        "nodescaler status 'web*' --watch          # the groups named web..., every 10 s",
        "nodescaler status --stack Platform        # a Nodescaler construct in your stack",
    ),
    "explain": (
        "nodescaler explain web-asg",
        "nodescaler explain web-asg --last 20 -o yaml",
    ),
    "apply": (
        "nodescaler apply -f policies/web.yaml",
        "nodescaler apply -f policies/ --cluster prod-eu",
    ),
    "get": ("nodescaler get policies", "nodescaler get policies -o json"),
    "diff": ("nodescaler diff -f policies/  # exit code 3 when they differ",),
    "history": ("nodescaler history web",),
    "rollback": ("nodescaler rollback web --to 3",),
    "pause": (
        "nodescaler pause web-asg --for 2h --reason 'load test'",
        "nodescaler pause web-asg --scale-in",
    ),
    "resume": ("nodescaler resume web-asg",),
}


def _with_examples(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for name, command in commands.choices.items():
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])


def _positive(text: str) -> int:
    """A count of one or more, or argparse's usage error (exit 2)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of one or more")
    return number


def _output_option(command: argparse.ArgumentParser, *, wide: bool = False) -> None:
    """Every read command prints a table for people, or JSON or YAML for scripts; status's
    short table has a wide one with every column."""
    choices = (*FORMATS, "wide") if wide else FORMATS
    command.add_argument(
        "-o",
        "--output",
        choices=choices,
        default="table",
        help=f"table (default), {'wide (every column), ' if wide else ''}json or yaml",
    )


EXIT_CODES = """exit codes:
  0  done
  1  an AWS or operator problem: a missing table, stack, group, profile or credentials, an
     unreachable endpoint, no region, a refused call (one line on stderr says which)
  2  bad input: a wrong command line (argparse's usage error), an invalid policy, scenario,
     event or cdk.json file, an event the function does not take
  3  diff: the stored policies and the files differ"""


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

    _add_offline_commands(commands)
    _add_observing_commands(commands)
    policies.register(commands, _target, _aws_options, _output_option)
    pause.register(commands)
    _with_examples(commands)
    return parser


def _add_offline_commands(commands: Any) -> None:
    """What needs no AWS account: validate, schema, simulate and invoke (the sandbox)."""
    _add_validate(commands)
    schema = commands.add_parser(
        "schema", help=f"print the policies' JSON Schema, for editors (as {SCHEMA_FILE})"
    )
    schema.set_defaults(run=_schema)
    _add_sandbox_commands(commands)


def _add_validate(commands: Any) -> None:
    """validate: policy documents checked offline, with synth's errors."""
    validate = commands.add_parser(
        "validate", help="validate policy documents offline (the same errors as synth)"
    )
    validate.add_argument(
        "paths",
        type=Path,
        nargs="*",
        metavar="PATH",
        help="policy files (several documents each, separated by ---) or folders of them "
        "(default: policies/)",
    )
    validate.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        type=Path,
        action="append",
        help="a policy file or a folder of them, as apply and diff take (repeatable)",
    )
    validate.set_defaults(run=_validate)


def _add_sandbox_commands(commands: Any) -> None:
    """simulate, trace and invoke: the sandbox's scenarios, traces and one-event runs."""
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
    simulate.add_argument(
        "--seeds",
        type=_seed_count,
        default=1,
        metavar="N",
        help="run each scenario with seeds 0 to N-1 (arrivals within a minute, placement "
        "ties) and give each figure's mean and spread, min..max (default: 1, seed 0)",
    )
    simulate.set_defaults(run=_simulate)
    trace.register(commands)

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


def _add_observing_commands(commands: Any) -> None:
    """What reads a deployment: status and explain."""
    status = commands.add_parser(
        "status", help="one row per managed group: sizes, metrics against targets, last decision"
    )
    status.add_argument(
        "groups",
        nargs="*",
        metavar="GROUP",
        help="only these groups: names, or patterns such as 'web*' (default: every one)",
    )
    status.add_argument(
        "-w", "--watch", action="store_true", help="list them again every --interval seconds"
    )
    status.add_argument(
        "--interval", type=_positive, default=10, help="seconds between lists (default: 10)"
    )
    _aws_options(status)
    _output_option(status, wide=True)
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from botocore.exceptions import BotoCoreError, ClientError

    from nodescaler_cli.observe import OperatorError, UsageError, aws_problem, one_line

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
    except NodescalerError as error:  # a bad scenario, event or cdk.json file: a line a defect
        for line in getattr(error, "problems", ()) or (one_line(error),):  # a scenario's lines
            print(f"nodescaler {args.command}: {line}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        problem = aws_problem(error, getattr(args, "target", None))
        print(f"nodescaler {args.command}: {problem}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
