"""`nodescaler status` and `nodescaler explain`: what the autoscaler sees and decided.

They read what the functions read, with the default boto3 credentials (or the sandbox's
endpoint): the managed groups from Auto Scaling, their state and audit items from the
state table (named with `--table`, or found in the stack's outputs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.decision import Decision, MetricOutcome, MetricStatus
from nodescaler.domain.optin import TagNames, read_opt_in
from nodescaler.domain.pause import in_force

STATE_OUTPUT = "StateTableName"  # the stack's CfnOutput (infra/stack.py)


class OperatorError(RuntimeError):
    """Something the operator can fix: printed as one line, no traceback."""


@dataclass(frozen=True)
class Target:
    region: str | None = None
    endpoint_url: str | None = None
    table: str | None = None
    stack: str = "Nodescaler"
    cluster: str = ""
    profile: str | None = None
    output: str = "table"  # table, json or yaml (nodescaler_cli.output)

    def client(self, service: str) -> Any:
        session = boto3.Session(profile_name=self.profile, region_name=self.region)
        return session.client(service, endpoint_url=self.endpoint_url)

    def state_table(self) -> str:
        if self.table:
            return self.table
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=self.stack)["Stacks"]
        except Exception as error:
            raise OperatorError(
                f"no --table given, and stack {self.stack} could not be read: {error}"
            ) from None
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        if STATE_OUTPUT not in outputs:
            raise OperatorError(f"stack {self.stack} has no {STATE_OUTPUT} output")
        return str(outputs[STATE_OUTPUT])

    def store(self) -> DynamoStateStore:
        return DynamoStateStore(
            self.client("dynamodb"), self.state_table(), audit_ttl=timedelta(days=30)
        )


def _status(m: MetricOutcome) -> str:
    """The metric's status, and the fallback that applies and since when: "missing, fallback
    hold since ...", or "fallback replicas 2 since ..." for a fallback's vote."""
    if not m.fallback or m.failing_since is None:
        return str(m.status)
    status = "" if m.status is MetricStatus.FALLBACK else f"{m.status}, "
    return f"{status}fallback {m.fallback} since {m.failing_since:%Y-%m-%d %H:%M:%S}Z"


def _metrics(decision: Decision | None) -> str:
    if decision is None:
        return "-"
    cells = []
    for m in decision.metrics:
        value = "?" if m.value is None else f"{m.value:.4g}"
        state = "" if m.status.usable else f" ({_status(m)})"
        cells.append(f"{m.name} {value}/{m.target}{state}")
    return ", ".join(cells)


def _waiting(group: str, decision: Decision | None) -> str | None:
    """Pods that fit no group, as the last decision's pending-pods reading names them: the
    first, and why it does not fit this group."""
    waiting = next((m.waiting for m in decision.metrics if m.waiting), {}) if decision else {}
    if not waiting:
        return None
    pod, why = next(iter(waiting.items()))
    if len(waiting) == 1:
        return f"pod {pod} fits no group (here: {why})"
    return f"{len(waiting)} pods fit no group: {pod} and {len(waiting) - 1} more (here: {why})"


def status(target: Target, write: Callable[[str], None] = print) -> int:
    tags = TagNames()
    groups = AsgNodeGroups(
        target.client("autoscaling"),
        target.client("eks"),
        tag_names=tags,
        cluster_name=target.cluster,
    ).discover()
    store = target.store()
    now = datetime.now(UTC)
    write("group | policy | current → desired | in service | metrics | last decision | notes")
    for group in sorted(groups, key=lambda g: g.name):
        opt_in = read_opt_in(group.name, group.tags, tags)
        state = store.load(group.name)
        decision = state.last_decision
        notes = [*state.problems] + (["dry-run"] if opt_in.dry_run else [])
        notes.extend(p.describe() for p in in_force(state.pause, opt_in.paused, tags.paused, now))
        if state.backoff is not None and state.backoff.active(now):
            notes.append(
                f"backed off until {state.backoff.until:%H:%M:%S}Z: {state.backoff.reason}"
            )
        if waiting := _waiting(group.name, decision):
            notes.append(waiting)
        if group.protected_ids:
            notes.append(f"{len(group.protected_ids)} protected from scale-in")
        write(
            " | ".join(
                [
                    group.name,
                    opt_in.policy or "-",
                    f"{group.desired} → {decision.desired if decision else '-'}",
                    str(group.in_service),
                    _metrics(decision),
                    decision.reason if decision else "never evaluated",
                    "; ".join(notes) or "-",
                ]
            )
        )
    if not groups:
        write("(no managed node groups: none carries nodescaler/enabled=true)")
    return 0


def explain(target: Target, group: str, limit: int, write: Callable[[str], None] = print) -> int:
    decisions = target.store().decisions(group, limit=limit)
    if not decisions:
        raise OperatorError(f"node group {group}: no decisions recorded (is it opted in?)")
    for decision in decisions:
        write(f"{decision.at:%Y-%m-%d %H:%M:%S}Z  {decision.reason}")
        write(
            f"  policy {decision.policy}; bounds [{decision.min_replicas}, "
            f"{decision.max_replicas}]; recommendation {decision.recommendation}; "
            f"limited by {', '.join(decision.limited_by) or 'nothing'}"
        )
        for m in decision.metrics:
            value = "-" if m.value is None else f"{m.value:g}"
            write(
                f"  - {m.name} ({m.type}): {value} against {m.target} → "
                f"{m.recommendation if m.recommendation is not None else '-'} "
                f"[{_status(m)}] {m.detail}"
            )
    return 0
