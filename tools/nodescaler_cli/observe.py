"""`nodescaler status` and `nodescaler explain`: what the autoscaler sees and decided.

They read what the functions read, with the default boto3 credentials (or `--profile`, or
the sandbox's endpoint): the managed groups from Auto Scaling, their state and audit items
from the state table (named with `--table`, or found in the stack's outputs). Each prints
rows through `nodescaler_cli.output`; the JSON keys are listed in docs/cli.md.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from functools import cached_property
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.deployment import (
    CLUSTER_OUTPUT,
    PREFIX,
    STATE_TABLE_OUTPUT,
    deployment_id,
    name_for_cluster,
)
from nodescaler.domain.groups.optin import TagNames, is_managed, read_opt_in
from nodescaler.domain.scaling.decision import Decision, MetricOutcome, MetricStatus
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.pause import in_force
from nodescaler.errors import SettingsError, StateCorruptError
from pydantic.alias_generators import to_camel

from nodescaler_cli.output import render

CDK_JSON = Path("cdk.json")
CONTEXT_KEY = "nodescaler"  # cdk.json's context key (infra/settings.py)
# Fail fast on a wrong endpoint: a person is waiting, not a Lambda's retry budget.
CLI_BOTO_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 2},
    connect_timeout=3,
    read_timeout=10,
    user_agent_extra="nodescaler-cli",
)


class OperatorError(RuntimeError):
    """Something the operator can fix: printed as one line, no traceback."""


class UsageError(OperatorError):
    """A command line argparse could not refuse (a duration that is not positive, options
    that exclude each other): bad input, exit 2."""


def cdk_settings(path: Path | None) -> tuple[Path, dict[str, Any]] | None:
    """cdk.json's `nodescaler` object (`path`, or ./cdk.json when there is one), and the
    file it came from; None without one."""
    if path is None:
        if not CDK_JSON.is_file():
            return None
        path = CDK_JSON
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise SettingsError(f"{path}: cannot read it ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise SettingsError(f"{path}: not JSON: {error}") from None
    context = document.get("context", {}) if isinstance(document, dict) else None
    settings = context.get(CONTEXT_KEY, {}) if isinstance(context, dict) else None
    if not isinstance(settings, dict):
        raise SettingsError(f"{path}: context.{CONTEXT_KEY}: should be an object of settings")
    return path, settings


def deployments_in(path: Path | None) -> list[tuple[str, str]]:
    """Each deployment cdk.json describes, as (its stack, its cluster), named as synth names
    them (infra/settings.py); none without a cdk.json."""
    found = cdk_settings(path)
    if found is None:
        return []
    _, settings = found
    entries = settings.get("deployments") or [{}]
    described = []
    for named in (settings | entry for entry in entries if isinstance(entry, dict)):
        cluster = str(named.get("clusterName") or "")
        name = named.get("name")
        described.append(
            (deployment_id(str(name) if name is not None else name_for_cluster(cluster)), cluster)
        )
    return described


def deployment_from(path: Path | None) -> tuple[str, str] | None:
    """The one deployment cdk.json describes, (stack, cluster); None without a cdk.json.
    Several deployments: which one is the operator's to say."""
    described = deployments_in(path)
    if not described:
        return None
    if len(described) != 1:
        where = cdk_settings(path)
        file = where[0] if where else CDK_JSON
        raise SettingsError(
            f"{file}: context.{CONTEXT_KEY}.deployments: lists "
            f"{', '.join(stack for stack, _ in described)}; pass --deployment or --cluster to "
            "say which"
        )
    return described[0]


def tag_names_from(path: Path | None) -> TagNames:
    """The tag names of cdk.json's `tags` block (`path`, or ./cdk.json when there is one),
    so status finds the groups the deployed functions manage; the defaults otherwise."""
    found = cdk_settings(path)
    if found is None:
        return TagNames()
    path, settings = found
    where = f"context.{CONTEXT_KEY}.tags"
    tags = settings.get("tags", {})
    if not isinstance(tags, dict):
        raise SettingsError(f"{path}: {where}: should be an object of tag names")
    known = {to_camel(f.name): f.name for f in fields(TagNames)}
    chosen = {}
    for key, value in tags.items():
        if key not in known:
            raise SettingsError(
                f"{path}: {where}.{key}: not a tag setting (known: {', '.join(known)})"
            )
        if not isinstance(value, str) or not value.strip():
            raise SettingsError(f"{path}: {where}.{key}: should be a tag name, got {value!r}")
        chosen[known[key]] = value
    return TagNames(**chosen)


@dataclass(frozen=True)
class Target:
    region: str | None = None
    endpoint_url: str | None = None
    table: str | None = None
    stack: str = PREFIX  # an unnamed deployment's stack
    # Only this cluster's groups; None: the cluster the stack's ClusterName output names (a
    # stack named outright, as a Nodescaler construct in your own stack publishes it).
    cluster: str | None = ""
    profile: str | None = None
    output: str = "table"  # table, json or yaml (nodescaler_cli.output)
    config: Path | None = None  # cdk.json, for its tag names (default: ./cdk.json if any)

    @property
    def region_given(self) -> str | None:
        """--region, else AWS_REGION as the AWS CLI and the other SDKs read it (boto3 reads
        AWS_DEFAULT_REGION alone), else None: the profile's or AWS_DEFAULT_REGION."""
        return self.region or os.environ.get("AWS_REGION") or None

    @cached_property
    def session(self) -> boto3.Session:
        return boto3.Session(profile_name=self.profile, region_name=self.region_given)

    @property
    def region_name(self) -> str:
        """The region the commands read, for messages (the profile's or the environment's)."""
        try:
            return self.region_given or self.session.region_name or "(none configured)"
        except BotoCoreError:
            return self.region_given or "(unknown)"

    def client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.endpoint_url, config=CLI_BOTO_CONFIG)

    @cached_property
    def tag_names(self) -> TagNames:
        return tag_names_from(self.config)

    def state_table(self) -> str:
        return self._state_table

    @cached_property  # resolved once, so an error can name it without asking again
    def _state_table(self) -> str:
        if self.table:
            return self.table
        if STATE_TABLE_OUTPUT not in self.outputs:
            raise OperatorError(
                f"stack {self.stack} has no {STATE_TABLE_OUTPUT} output in region "
                f"{self.region_name}; pass --table"
            )
        return self.outputs[STATE_TABLE_OUTPUT]

    @cached_property
    def outputs(self) -> dict[str, str]:
        """The stack's outputs, by key."""
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=self.stack)["Stacks"]
        except ClientError as error:
            if _code(error) == "ValidationError":  # CloudFormation's "does not exist"
                raise OperatorError(
                    f"stack {self.stack} not found in region {self.region_name}; "
                    "pass --stack or --table"
                ) from None
            raise
        return {o["OutputKey"]: str(o["OutputValue"]) for o in stacks[0].get("Outputs", [])}

    @cached_property
    def cluster_name(self) -> str:
        """The cluster whose groups the commands see: --cluster's, cdk.json's, or the
        stack's (none: the groups that name no cluster)."""
        if self.cluster is not None:
            return self.cluster
        return self.outputs.get(CLUSTER_OUTPUT, "")

    def store(self) -> DynamoStateStore:
        return DynamoStateStore(
            self.client("dynamodb"), self.state_table(), audit_ttl=timedelta(days=30)
        )

    def node_groups(self) -> AsgNodeGroups:
        return AsgNodeGroups(
            self.client("autoscaling"),
            self.client("eks"),
            tag_names=self.tag_names,
            cluster_name=self.cluster_name,
        )

    def show(
        self,
        kind: str,
        rows: Sequence[Mapping[str, Any]],
        *tables: Sequence[Mapping[str, Any]],
        write: Callable[[str], None],
    ) -> None:
        """`rows` as JSON or YAML; for eyes, `tables` (the same rows, made short) aligned,
        a blank line between them."""
        if self.output != "table":
            write(render(kind, rows, self.output))
            return
        write("\n\n".join(filter(None, (render(kind, shown) for shown in tables))))


def one_line(error: BaseException) -> str:
    """An error's message on one line (pydantic's, inside some, spans several)."""
    return " ".join(str(error).split())


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def aws_problem(error: BotoCoreError | ClientError, target: Target | None = None) -> str:
    """One line for an AWS error, naming what is missing: the table, the credentials, the
    endpoint, the region or the profile; never botocore's multi-line text."""
    region = target.region_name if target else "(unknown)"
    if isinstance(error, ClientError):
        operation = error.operation_name
        code = _code(error)
        if code == "ResourceNotFoundException" and operation in _DYNAMODB_READS:
            table = target.state_table() if target else "the state table"
            return f"state table {table} does not exist in region {region} (deployed? --table?)"
        message = " ".join(str(error.response.get("Error", {}).get("Message", "")).split())
        return f"AWS refused {operation} in region {region}: {code}: {message or '(no message)'}"
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return "no AWS credentials found: run `aws configure`, set AWS_PROFILE or pass --profile"
    if isinstance(error, ProfileNotFound):
        profile = error.kwargs.get("profile", "?")
        return f"AWS profile {profile} not found in your AWS config or credentials file"
    if isinstance(error, NoRegionError):
        return "no AWS region: pass --region, set AWS_REGION, or set one in your AWS config"
    if isinstance(error, ConnectionError):
        endpoint = error.kwargs.get("endpoint_url") or (target and target.endpoint_url) or "AWS"
        if target is not None and target.endpoint_url:
            return f"cannot reach {endpoint} (is --endpoint-url right, and the network up?)"
        return f"cannot reach {endpoint} (is the network up, and region {region} right?)"
    return one_line(error)


# The state table's operations: a ResourceNotFoundException from one of them is the table.
_DYNAMODB_READS = frozenset(
    {"GetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem"}
    | {"BatchWriteItem", "TransactWriteItems", "TransactGetItems", "DescribeTable"}
)


def _status(m: MetricOutcome) -> str:
    """The metric's status, and the fallback that applies and since when: "missing, fallback
    hold since ...", or "fallback replicas 2 since ..." for a fallback's vote."""
    if not m.fallback or m.failing_since is None:
        return str(m.status)
    status = "" if m.status is MetricStatus.FALLBACK else f"{m.status}, "
    return f"{status}fallback {m.fallback} since {_when(m.failing_since)}"


def _metric(m: MetricOutcome) -> dict[str, Any]:
    return {
        "name": m.name,
        "type": m.type,
        "value": m.value,
        "target": m.target,
        "recommendation": m.recommendation,
        "status": str(m.status),
        "fallback": m.fallback or None,
        "failing_since": _iso(m.failing_since),
        "detail": m.detail,
    }


def _metrics_cell(decision: Decision | None) -> str:
    """A decision's metrics, short: "jobs 40/4/replica", with the status when not usable."""
    if decision is None:
        return "-"
    cells = []
    for m in decision.metrics:
        value = "?" if m.value is None else f"{m.value:.4g}"
        state = "" if m.status.usable else f" ({_status(m)})"
        cells.append(f"{m.name} {value}/{m.target}{state}")
    return ", ".join(cells)


def _waiting(decision: Decision | None) -> str | None:
    """Pods that fit no group, as the last decision's pending-pods reading names them: the
    first, and why it does not fit this group."""
    waiting = next((m.waiting for m in decision.metrics if m.waiting), {}) if decision else {}
    if not waiting:
        return None
    pod, why = next(iter(waiting.items()))
    if len(waiting) == 1:
        return f"pod {pod} fits no group (here: {why})"
    return f"{len(waiting)} pods fit no group: {pod} and {len(waiting) - 1} more (here: {why})"


def _about(group: str, problem: str) -> str:
    """A problem without its "node group X: " prefix: the row names the group already."""
    return problem.removeprefix(f"node group {group}: ")


def _notes(group: Any, opt_in: Any, state: GroupState, tags: TagNames, now: datetime) -> list[str]:
    notes = [_about(group.name, p) for p in dict.fromkeys([*opt_in.problems, *state.problems])]
    if opt_in.dry_run:
        notes.append("dry-run")
    notes.extend(p.describe() for p in in_force(state.pause, opt_in.paused, tags.paused, now))
    if state.backoff is not None and state.backoff.active(now):
        notes.append(f"backed off until {state.backoff.until:%H:%M:%S}Z: {state.backoff.reason}")
    if waiting := _waiting(state.last_decision):
        notes.append(waiting)
    if group.protected_ids:
        notes.append(f"{len(group.protected_ids)} protected from scale-in")
    return notes


# The keys of `nodescaler status -o json`'s rows, in order (docs/cli.md lists them).
STATUS_KEYS = (
    "group",
    "policy",
    "current",
    "desired",
    "in_service",
    "min",
    "max",
    "metrics",
    "last_decision",
    "decided_at",
    "notes",
)


def status_rows(
    target: Target, now: datetime, only: Sequence[str] = ()
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """One row per managed group (those `only` names, when given), with what is wrong with
    it, and its wide table row; one group's unreadable state is a note on its row, not the
    end of the listing."""
    tags = target.tag_names
    groups = [g for g in target.node_groups().discover() if _chosen(g.name, only)]
    store = target.store()
    rows = []
    for group in sorted(groups, key=lambda g: g.name):
        opt_in = read_opt_in(group.name, group.tags, tags)
        try:
            state = store.load(group.name)
        except StateCorruptError as error:
            state = GroupState(group=group.name, problems=(one_line(error),))
        decision = state.last_decision
        row = {
            "group": group.name,
            "policy": opt_in.policy,
            "current": group.desired,
            "desired": decision.desired if decision else None,
            "in_service": group.in_service,
            "min": group.min_size,
            "max": group.max_size,
            "metrics": [_metric(m) for m in decision.metrics] if decision else [],
            "last_decision": decision.reason if decision else None,
            "decided_at": _iso(decision.at) if decision else None,
            "notes": _notes(group, opt_in, state, tags, now),
        }
        shown = row | {
            "desired": "-" if decision is None else decision.desired,
            "metrics": _metrics_cell(decision),
            "last_decision": decision.reason if decision else "never evaluated",
        }
        del shown["decided_at"]
        rows.append((row, shown))
    return rows


WIDE = "wide"  # status's -o wide: every column
SHORT_WIDTH = 80  # the short table's lines, at most (a terminal's classic width)


def status(target: Target, only: Sequence[str] = (), write: Callable[[str], None] = print) -> int:
    """The managed groups (`only` those named: names, or patterns such as `web*`): short
    columns, every column with `-o wide`, or JSON or YAML."""
    rows = status_rows(target, datetime.now(UTC), only)
    if not rows and target.output in ("table", WIDE):
        chosen = f" named {' or '.join(only)}" if only else ""
        write(f"(no managed node groups{chosen}: none carries {target.tag_names.enabled}=true)")
        return 0
    if target.output == WIDE:
        write(render("groups", [shown for _, shown in rows]))
    elif target.output == "table":
        short = render("groups", [_short(row) for row, _ in rows])
        write("\n".join(_clip(line, SHORT_WIDTH) for line in short.split("\n")))
    else:
        write(render("groups", [row for row, _ in rows], target.output))
    return 0


def watch(
    target: Target,
    only: Sequence[str],
    every: int,
    write: Callable[[str], None] = print,
    sleep: Callable[[float], None] | None = None,
) -> int:
    """status again every `every` seconds, each under the time it was read, until Ctrl-C."""
    try:
        while True:
            write(f"{datetime.now(UTC):%H:%M:%S}Z (every {every} s; Ctrl-C to stop)")
            status(target, only, write)
            write("")
            (sleep or time.sleep)(every)
    except KeyboardInterrupt:
        return 0


def _chosen(group: str, only: Sequence[str]) -> bool:
    return not only or any(fnmatchcase(group, pattern) for pattern in only)


def _short(row: Mapping[str, Any]) -> dict[str, Any]:
    """A status row in few, short columns: the notes' first word stands for them."""
    decision = row["desired"] is not None
    first = row["notes"][0] if row["notes"] else ("ok" if decision else "never evaluated")
    return {
        "group": _clip(row["group"], 24),
        "policy": _clip(row["policy"] or "-", 16),
        "nodes": f"{row['in_service']}/{row['current']}",
        "desired": row["desired"] if decision else "-",
        "min-max": f"{row['min']}-{row['max']}",
        "status": first + (f" (+{len(row['notes']) - 1})" if len(row["notes"]) > 1 else ""),
    }


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# The keys of `nodescaler explain -o json`'s rows, in order (docs/cli.md lists them).
EXPLAIN_KEYS = (
    "group",
    "at",
    "policy",
    "policy_version",
    "current",
    "desired",
    "min",
    "max",
    "recommendation",
    "limited_by",
    "metrics",
    "reason",
)


def _version(decision: Decision) -> str:
    """`v3` for a version stored with `nodescaler apply`, `(deployed)` for the stack's."""
    version = decision.policy_version
    return f"v{version}" if isinstance(version, int) else f"({version})"


def explain(target: Target, group: str, limit: int, write: Callable[[str], None] = print) -> int:
    decisions = target.store().decisions(group, limit=limit)
    if not decisions:
        raise OperatorError(_why_no_decisions(target, group))
    rows = [
        {
            "group": d.node_group,
            "at": _iso(d.at),
            "policy": d.policy,
            "policy_version": d.policy_version,
            "current": d.current,
            "desired": d.desired,
            "min": d.min_replicas,
            "max": d.max_replicas,
            "recommendation": d.recommendation,
            "limited_by": [str(held) for held in d.limited_by],
            "metrics": [_metric(m) for m in d.metrics],
            "reason": d.reason,
        }
        for d in decisions
    ]
    # For eyes: each decision on a line, then each metric's reading in it.
    decided = [
        {
            "at": _when(d.at),
            "policy": f"{d.policy} {_version(d)}",
            "change": f"{d.current} → {d.desired}",
            "bounds": f"[{d.min_replicas}, {d.max_replicas}]",
            "recommends": d.recommendation,
            "limited_by": ", ".join(d.limited_by) or "nothing",
            "reason": d.reason,
        }
        for d in decisions
    ]
    readings = [
        {
            "at": _when(d.at),
            "metric": m.name,
            "type": m.type,
            "value": "-" if m.value is None else f"{m.value:g}",
            "target": m.target,
            "wants": m.recommendation,
            "status": _status(m),
            "detail": m.detail,
        }
        for d in decisions
        for m in d.metrics
    ]
    target.show("decisions", rows, decided, readings, write=write)
    return 0


def _when(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S}Z"


def _iso(at: datetime | None) -> str | None:
    """A time in JSON and YAML: ISO 8601 in UTC, as AWS writes them."""
    return None if at is None else at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _why_no_decisions(target: Target, group: str) -> str:
    """No decision recorded: the group does not exist, is not managed, is rejected (and
    why), or has not been evaluated yet."""
    found = target.node_groups().get(group)
    if found is None:
        return f"node group {group} not found in region {target.region_name}"
    tags = target.tag_names
    if not is_managed(found.tags, tags, target.cluster_name):
        where = f" and {tags.cluster}={target.cluster_name}" if target.cluster_name else ""
        return f"node group {group} is not managed: it is not tagged {tags.enabled}=true{where}"
    state = target.store().load(group)
    problems = [*read_opt_in(group, found.tags, tags).problems, *state.problems]
    if problems:
        return "; ".join(dict.fromkeys(problems)) + " (no decisions recorded)"
    return f"node group {group}: no decisions recorded yet (it is evaluated at the next tick)"
