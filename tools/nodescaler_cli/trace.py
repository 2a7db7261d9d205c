"""`nodescaler trace export` (a pod trace from a cluster's Prometheus or kubectl
snapshots) and `nodescaler trace scenario` (that trace against your own groups and
policies, a scenario `nodescaler simulate` runs under nodescaler and Cluster Autoscaler)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# A week of a large cluster's pods is tens of MB of answer; a query may take a while.
EXPORT_MAX_BYTES = 256 * 2**20
EXPORT_QUERY_SECONDS = 120.0
_AGO = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
MAX_MINUTES = 7 * 24 * 60  # a scenario's longest run
STATUS_ONLY = ("current", "desired", "in_service", "metrics", "last_decision", "decided_at")


def _moment(text: str, now: datetime | None = None) -> datetime:
    """--from/--until: RFC 3339 (2026-11-20T00:00:00Z), or a time ago (7d, 12h, 30m)."""
    from nodescaler_cli.observe import UsageError

    if found := _AGO.match(text):
        ago = timedelta(**{_UNITS[found[2]]: int(found[1])})
        return (now or datetime.now(UTC)) - ago
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{text!r} is not a time: 2026-11-20T00:00:00Z, or 7d, 12h, 30m ago"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _duration(text: str) -> float:
    """--chunk: 6h, 30m, 90s or 1d, in seconds."""
    from nodescaler_cli.observe import UsageError

    found = re.match(r"^(\d+)([smhd])$", text)
    if not found or int(found[1]) == 0:
        raise UsageError(f"--chunk {text!r}: a duration such as 6h, 30m or 90s")
    return int(found[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[found[2]]


def _export(args: argparse.Namespace) -> int:
    from nodescaler_cli.observe import UsageError
    from nodescaler_cli.trace_export import from_snapshots, write_trace

    if args.kubectl_snapshots is not None:
        pods, start, end = from_snapshots(args.kubectl_snapshots)
        if args.start:
            start = _moment(args.start).timestamp()
        if args.until:
            end = _moment(args.until).timestamp()
        left_out: list[str] = []
        if end <= start:
            raise UsageError("--until must be after --from (and the last snapshot after the first)")
    else:
        start = _moment(args.start or "7d").timestamp()
        end = _moment(args.until).timestamp() if args.until else datetime.now(UTC).timestamp()
        if end <= start:
            raise UsageError("--until must be after --from")
        pods, left_out = _from_prometheus(args, start, end)
    rows = write_trace(pods, start, end, args.output)
    began = datetime.fromtimestamp(start, UTC).isoformat().replace("+00:00", "Z")
    print(f"{args.output}: {rows} pods from {began}, {(end - start) / 3600:.1f} hours")
    if left_out:
        print(f"not replayed (resources the sandbox does not model): {', '.join(left_out)}")
    return 0


def _from_prometheus(args: argparse.Namespace, start: float, end: float) -> Any:
    """Through the product's Prometheus client: SigV4 for a workspace, a bearer token from
    Secrets Manager (sent only to the --prometheus origin) for a server."""
    import boto3
    from nodescaler.adapters.prometheus import PrometheusQueries
    from nodescaler.domain.policy import PrometheusSource
    from nodescaler.domain.token_origins import origin
    from nodescaler.errors import PrometheusQueryError, PrometheusUnavailableError
    from pydantic import ValidationError

    from nodescaler_cli.observe import OperatorError, UsageError
    from nodescaler_cli.trace_export import from_prometheus

    given = {"server_address": args.prometheus, "workspace": args.workspace}
    given |= {"region": args.region if args.workspace else None}
    given |= {"bearer_token_secret": args.bearer_token_secret}
    endpoint = {k: v for k, v in given.items() if v is not None}
    try:
        PrometheusSource(query="up", **endpoint)
    except ValidationError as error:
        raise UsageError(error.errors()[0]["msg"].removeprefix("Value error, ")) from None
    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    secret = args.bearer_token_secret
    queries = PrometheusQueries(
        region=session.region_name or "",
        credentials=session.get_credentials,
        secrets=lambda: session.client("secretsmanager"),
        token_origins=frozenset({(secret, origin(args.prometheus))}) if secret else frozenset(),
    )
    where = args.prometheus or args.workspace

    def ask(query: str) -> list[dict[str, Any]]:
        source = PrometheusSource(query=query, **endpoint)
        try:
            return queries.vector(source, seconds=EXPORT_QUERY_SECONDS, max_bytes=EXPORT_MAX_BYTES)
        except PrometheusQueryError as error:
            big = any(word in str(error) for word in ("bytes", "too many samples"))
            hint = " (a smaller --chunk reads less at once)" if big else ""
            raise OperatorError(f"Prometheus at {where}: {query}: {error}{hint}") from None
        except PrometheusUnavailableError as error:
            raise OperatorError(f"Prometheus at {where}: {query}: {error}") from None

    step = args.step or max(60, int((end - start) / 2000))  # a week: 5 minutes
    return from_prometheus(ask, start, end, step, _duration(args.chunk))


def _scenario(args: argparse.Namespace) -> int:
    """A scenario file beside the trace's folder: the trace as a pod trace, the groups and
    policies given; loaded once to check it, as simulate will."""
    import yaml
    from nodescaler_sandbox.scenario_file import load_scenario
    from nodescaler_sandbox.traces import TraceWindow, check

    output: Path = args.output or args.trace.with_suffix(".yaml")
    groups = _groups(args.groups, args.instance_type)
    window = TraceWindow(file=_relative(args.trace, output.parent))
    minutes = args.minutes or _trace_minutes(window, output.parent)
    scenario = {
        "name": args.name,
        "description": f"The pod trace {args.trace.name} under these groups and policies.",
        "minutes": minutes,
        "policies": _relative(args.policies, output.parent),
        "groups": groups,
        "podTraces": [{"name": args.name, "file": window.file}],
    }
    if args.prices is not None:
        scenario["priceTable"] = _relative(args.prices, output.parent)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(yaml.safe_dump(scenario, sort_keys=False))
    load_scenario(output)
    rows = check(window, output.parent)
    print(f"{output}: {rows} pods over {minutes} minutes on {len(groups)} group(s)")
    print(f"run it: nodescaler simulate {output}")
    return 0


def _relative(path: Path, folder: Path) -> str:
    import os

    return os.path.relpath(path.resolve(), folder.resolve())


def _trace_minutes(window: Any, folder: Path) -> int:
    """The trace's length: its last arrival, deletion or job's end (if it ran at once), in
    whole minutes, at least 1 and at most a scenario's week."""
    from nodescaler_sandbox.traces import pod_rows

    last = 0.0
    for row in pod_rows(window, folder):
        last = max(last, row.arrival_s, row.delete_s or 0, row.arrival_s + (row.run_s or 0))
    return min(max(int(last // 60) + 1, 1), MAX_MINUTES)


def _groups(path: Path, instance_types: list[str]) -> list[dict[str, Any]]:
    """The groups of a file: a scenario's `groups` (name, policy, min, max, instanceType,
    ...) or `nodescaler status -o yaml`'s (group, policy, min, max); `--instance-type
    GROUP=TYPE` sets a group's type (status does not show it). Each has the drain hook
    unless its entry says `drain: false`."""
    import yaml
    from nodescaler_sandbox.scenario_checks import ScenarioError

    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ScenarioError(f"{path}: cannot read it as YAML ({error})") from None
    listed = document.get("groups") if isinstance(document, dict) else None
    if not isinstance(listed, list) or not listed:
        raise ScenarioError(f"{path}: groups: a list of groups (as status -o yaml prints)")
    types = dict(t.partition("=")[::2] for t in instance_types)
    groups = []
    for index, listed_group in enumerate(listed):
        if not isinstance(listed_group, dict):
            raise ScenarioError(f"{path}: groups.{index}: not a group")
        group = {k: v for k, v in listed_group.items() if k not in (*STATUS_ONLY, "notes")}
        if "group" in group:
            group = {"name": group.pop("group")} | group
        if not group.get("policy"):
            raise ScenarioError(f"{path}: groups.{index}.policy: the group has no policy")
        if group.get("name") in types:
            group["instanceType"] = types.pop(group["name"])
        # drained as docs/deploy.md sets a group up (its drain hook), unless the file says not
        group.setdefault("drain", True)
        groups.append(group)
    if types:
        raise ScenarioError(f"--instance-type: no group named {', '.join(sorted(types))}")
    return groups


EXAMPLES = {
    "export": (
        "nodescaler trace export --prometheus https://prom.example.com --from 7d -o week.csv",
        "nodescaler trace export --workspace ws-... --region eu-west-1 --from 7d -o week.csv",
        "nodescaler trace export --kubectl-snapshots snapshots/ -o week.csv",
    ),
    "scenario": (
        "nodescaler status -o yaml > groups.yaml",
        "nodescaler trace scenario week.csv --groups groups.yaml --policies policies/ "
        "--instance-type web-asg=m5.xlarge",
        "nodescaler simulate week.yaml",
    ),
}


def register(commands: Any) -> None:
    trace = commands.add_parser(
        "trace", help="a pod trace of your cluster, and a scenario to replay it (simulate)"
    )
    verbs = trace.add_subparsers(dest="verb", required=True, metavar="VERB")
    export = verbs.add_parser(
        "export", help="write a pod trace from Prometheus (kube-state-metrics) or kubectl"
    )
    source = export.add_mutually_exclusive_group(required=True)
    source.add_argument("--prometheus", metavar="URL", help="a Prometheus server's address")
    source.add_argument("--workspace", help="an Amazon Managed Prometheus workspace (id or ARN)")
    source.add_argument(
        "--kubectl-snapshots",
        type=Path,
        metavar="DIR",
        help="a folder of `kubectl get pods -A -o json` outputs, each named by its time",
    )
    export.add_argument("--bearer-token-secret", help="Secrets Manager secret with the token")
    export.add_argument("--region", help="the workspace's and secret's AWS region")
    export.add_argument("--profile", help="the AWS profile (default: your AWS configuration)")
    export.add_argument("--from", dest="start", help="RFC 3339 or 7d/12h ago (default: 7d)")
    export.add_argument("--until", help="RFC 3339 or 1d/12h ago (default: now)")
    export.add_argument(
        "--step",
        type=int,
        help="seconds: how finely deletions are timed (default: 60, or range/2000 if more)",
    )
    export.add_argument(
        "--chunk",
        default="6h",
        help="how much of the range one query reads (default: 6h; less if Prometheus "
        "says a query loads too many samples)",
    )
    export.add_argument("-o", "--output", type=Path, default=Path("trace.csv"))
    export.set_defaults(run=_export)

    scenario = verbs.add_parser("scenario", help="a scenario replaying a pod trace on your groups")
    scenario.add_argument("trace", type=Path, help="the pod trace (trace export's)")
    scenario.add_argument(
        "--groups", type=Path, required=True, help="status -o yaml, or a scenario's groups"
    )
    scenario.add_argument("--policies", type=Path, default=Path("policies"))
    scenario.add_argument(
        "--instance-type", action="append", default=[], metavar="GROUP=TYPE", help="repeatable"
    )
    scenario.add_argument(
        "--prices", type=Path, help="a price table (YAML: type: {onDemand: $, spot: $})"
    )
    scenario.add_argument("--name", default="my-cluster", help="the scenario's name")
    scenario.add_argument("--minutes", type=int, help="default: the trace's length")
    scenario.add_argument("-o", "--output", type=Path, help="default: the trace's, .yaml")
    scenario.set_defaults(run=_scenario)
    for name, command in verbs.choices.items():
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
