"""What the whole stack costs a month, priced from AWS's public prices, resource by
resource of the synthesized template, for a typical deployment (`TYPICAL`).

Every resource type the template holds is either priced here (`PRICED`) or named as free
with the reason (`FREE`); a type in neither is an error, so a resource added to the stack
cannot go unpriced (tests/infra/test_stack_cost.py, which also checks the README's figure).
The template gives what it can (how many alarms, each function's memory, the tick's rate);
`Usage` states the rest, each an assumption a reader can change. Prices: us-east-1, on
demand, free tiers left out, as read on 2026-11-28 from the pages in `SOURCES`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

SOURCES = {
    "cloudwatch": "https://aws.amazon.com/cloudwatch/pricing/",
    "dynamodb": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "lambda": "https://aws.amazon.com/lambda/pricing/",
    "sqs": "https://aws.amazon.com/sqs/pricing/",
    "scheduler": "https://aws.amazon.com/eventbridge/pricing/",
}
ALARM_METRIC = 0.10  # a standard-resolution alarm, per metric it reads, a month
HIGH_RESOLUTION_ALARM_METRIC = 0.30  # an alarm on a period under 60 s
DASHBOARD = 3.00  # a month
CUSTOM_METRIC = 0.30  # a custom metric (name and dimensions; EMF's too), a month, first 10,000
LOG_INGESTED_GB = 0.50
LOG_STORED_GB_MONTH = 0.03
DYNAMODB_WRITE_MILLION = 0.625  # on-demand write request units
DYNAMODB_READ_MILLION = 0.125  # on-demand read request units
DYNAMODB_GB_MONTH = 0.25
LAMBDA_ARM_GB_SECOND = 0.0000133334
LAMBDA_REQUEST_MILLION = 0.20
SQS_FIFO_MILLION = 0.50
SQS_STANDARD_MILLION = 0.40
SCHEDULER_MILLION = 1.00  # EventBridge Scheduler invocations

MINUTES_A_MONTH = 43_200  # 30 days


@dataclass(frozen=True)
class Usage:
    """What a typical deployment does in a month, beyond what the template says."""

    groups: int = 20  # opted-in node groups, each evaluated every tick
    metrics_per_group: float = 1.5  # a policy's metrics (each reports its own MetricUsage)
    policy_queues: int = 2  # SQS queues the policies read (the fast path polls each)
    # custom metrics a group reports each evaluation (reports.py: sizes, evaluations, latency,
    # backoff, pause, unserved, pending pods...), and those of the whole deployment
    custom_metrics_per_group: int = 12
    custom_metrics_per_deployment: int = 10
    evaluate_seconds: float = 0.3  # billed per evaluation
    dispatch_seconds: float = 1.0  # billed per tick
    fast_path_seconds: float = 55.1  # billed per minute (make bench, docs/architecture.md)
    drains: int = 300  # nodes drained a month
    drain_seconds: float = 60.0
    terminations: int = 300  # termination-policy calls a month
    terminate_seconds: float = 0.5
    log_kb_per_evaluation: float = 3.0  # the decision's log line and its EMF record
    audit_kb: float = 2.0  # a decision's audit item, kept audit_ttl_days (30)
    # one transaction (2 units a KB): the state item, up to 3 KB where a noisy group's demand
    # history (tenths of a node, forecast.py) compresses least, and the audit item (2 KB)
    write_units_per_evaluation: float = 10.0
    read_units_per_evaluation: float = 2.0  # state and policy reads
    empty_receives_a_minute: float = 15.0  # the event source's long polls of the FIFO queue


TYPICAL = Usage()


@dataclass(frozen=True)
class Line:
    """One line of the bill: what, how much a month, and how it was reckoned."""

    item: str
    dollars: float
    how: str


Resources = Mapping[str, Mapping[str, Any]]
Pricer = Callable[[Resources, Usage, float], list[Line]]  # resources of a type, usage, ticks


def _ticks(template: Mapping[str, Any]) -> float:
    """Ticks a month, from the tick's schedule (`rate(N minutes)`)."""
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Scheduler::Schedule":
            rate = re.search(
                r"rate\((\d+) minutes?\)", resource["Properties"]["ScheduleExpression"]
            )
            if rate:
                return MINUTES_A_MONTH / int(rate.group(1))
    raise ValueError("the template has no tick schedule (AWS::Scheduler::Schedule, rate(...))")


def _alarms(alarms: Resources, usage: Usage, ticks: float) -> list[Line]:
    dollars = 0.0
    for alarm in alarms.values():
        properties = alarm["Properties"]
        metrics = properties.get("Metrics")
        count = sum(1 for m in metrics if "MetricStat" in m) if metrics else 1
        fast = int(properties.get("Period", 60)) < 60
        dollars += count * (HIGH_RESOLUTION_ALARM_METRIC if fast else ALARM_METRIC)
    return [Line("CloudWatch alarms", dollars, f"{len(alarms)} alarms, per metric read")]


def _dashboards(dashboards: Resources, usage: Usage, ticks: float) -> list[Line]:
    return [Line("CloudWatch dashboard", DASHBOARD * len(dashboards), f"{len(dashboards)} x $3")]


def _table(tables: Resources, usage: Usage, ticks: float) -> list[Line]:
    evaluations = ticks * usage.groups
    lines = []
    for table in tables.values():
        replicas = len(table["Properties"].get("Replicas", [])) or 1
        writes = evaluations * usage.write_units_per_evaluation * replicas
        reads = evaluations * usage.read_units_per_evaluation
        stored = evaluations * usage.audit_kb / 1e6 * replicas  # GB, a month's audit items
        dollars = (
            writes / 1e6 * DYNAMODB_WRITE_MILLION
            + reads / 1e6 * DYNAMODB_READ_MILLION
            + stored * DYNAMODB_GB_MONTH
        )
        how = f"{writes / 1e6:.1f} M writes, {reads / 1e6:.1f} M reads, {stored:.1f} GB"
        lines.append(Line("DynamoDB state table (on demand)", dollars, how))
    return lines


# What each function is billed a month: (invocations, seconds each), by its folder's name.
def _invocations(usage: Usage, ticks: float) -> dict[str, tuple[float, float]]:
    return {
        "Dispatch": (ticks, usage.dispatch_seconds),
        "Evaluate": (ticks * usage.groups, usage.evaluate_seconds),
        "FastPath": (MINUTES_A_MONTH, usage.fast_path_seconds),
        "Drain": (usage.drains, usage.drain_seconds),
        "Terminate": (usage.terminations, usage.terminate_seconds),
    }


def _functions(functions: Resources, usage: Usage, ticks: float) -> list[Line]:
    billed = _invocations(usage, ticks)
    lines = []
    for logical, function in sorted(functions.items()):
        name = next((n for n in billed if logical.startswith(f"Nodescaler{n}Function")), None)
        if name is None:
            raise ValueError(f"{logical}: a function whose invocations are not reckoned")
        invocations, seconds = billed[name]
        gb_seconds = invocations * seconds * int(function["Properties"]["MemorySize"]) / 1024
        dollars = gb_seconds * LAMBDA_ARM_GB_SECOND + invocations / 1e6 * LAMBDA_REQUEST_MILLION
        how = f"{invocations:,.0f} invocations, {gb_seconds:,.0f} GB-s"
        lines.append(Line(f"Lambda {name}", dollars, how))
    return lines


def _queues(queues: Resources, usage: Usage, ticks: float) -> list[Line]:
    evaluations = ticks * usage.groups
    # send, receive and delete each request; the event source's empty long polls; the dead
    # letter queues stay empty. The fast path reads each policy queue every 5 s.
    fifo = evaluations * 3 + usage.empty_receives_a_minute * MINUTES_A_MONTH
    policy_reads = usage.policy_queues * MINUTES_A_MONTH * 12
    dollars = fifo / 1e6 * SQS_FIFO_MILLION + policy_reads / 1e6 * SQS_STANDARD_MILLION
    how = f"{fifo / 1e6:.1f} M FIFO requests, {policy_reads / 1e6:.1f} M queue-length reads"
    return [Line(f"SQS ({len(queues)} queues)", dollars, how)]


def _logs(groups: Resources, usage: Usage, ticks: float) -> list[Line]:
    ingested = ticks * usage.groups * usage.log_kb_per_evaluation / 1e6  # GB a month
    days = max(int(g["Properties"].get("RetentionInDays", 30)) for g in groups.values())
    stored = ingested * days / 30
    dollars = ingested * LOG_INGESTED_GB + stored * LOG_STORED_GB_MONTH
    return [Line("CloudWatch Logs", dollars, f"{ingested:.1f} GB ingested, kept {days} days")]


def _schedules(schedules: Resources, usage: Usage, ticks: float) -> list[Line]:
    return [Line("EventBridge Scheduler (the tick)", ticks / 1e6 * SCHEDULER_MILLION, "")]


def custom_metrics(usage: Usage) -> Line:
    """The functions' EMF records: each metric name and dimension set is a custom metric."""
    count = (
        usage.groups * (usage.custom_metrics_per_group + usage.metrics_per_group)
        + usage.custom_metrics_per_deployment
    )
    return Line("CloudWatch custom metrics (EMF)", count * CUSTOM_METRIC, f"{count:.0f} metrics")


PRICED: dict[str, Pricer] = {
    "AWS::CloudWatch::Alarm": _alarms,
    "AWS::CloudWatch::Dashboard": _dashboards,
    "AWS::DynamoDB::GlobalTable": _table,
    "AWS::Lambda::Function": _functions,
    "AWS::SQS::Queue": _queues,
    "AWS::Logs::LogGroup": _logs,
    "AWS::Scheduler::Schedule": _schedules,
}
FREE = {
    "AWS::EKS::AccessEntry": "EKS charges for the cluster, not its access entries",
    "AWS::Events::Rule": "rules on AWS services' events and scheduled rules are free",
    "AWS::IAM::ManagedPolicy": "IAM is free",
    "AWS::IAM::Policy": "IAM is free",
    "AWS::IAM::Role": "IAM is free",
    "AWS::Lambda::EventInvokeConfig": "a function's setting",
    "AWS::Lambda::EventSourceMapping": "its polls are priced with the queue",
    "AWS::Lambda::LayerVersion": "within Lambda's 75 GB of code storage",
    "AWS::Lambda::Permission": "a function's setting",
    "AWS::SQS::QueuePolicy": "a queue's setting",
}


def unpriced(template: Mapping[str, Any]) -> list[str]:
    """The resource types of the template priced nowhere, by name."""
    types = {resource["Type"] for resource in template["Resources"].values()}
    return sorted(types - set(PRICED) - set(FREE))


def monthly(template: Mapping[str, Any], usage: Usage = TYPICAL) -> list[Line]:
    """The bill's lines for a template (its JSON), in the order of `PRICED`, the custom
    metrics last. A resource type priced nowhere is an error, named."""
    missing = unpriced(template)
    if missing:
        raise ValueError(
            f"resources priced nowhere (tools/nodescaler_bench/stack_cost.py): {missing}"
        )
    ticks = _ticks(template)
    lines = []
    for kind, price in PRICED.items():
        found = {n: r for n, r in template["Resources"].items() if r["Type"] == kind}
        if found:
            lines += price(found, usage, ticks)
    return [*lines, custom_metrics(usage)]


def total(lines: list[Line]) -> float:
    return sum(line.dollars for line in lines)


def readme_rows(lines: list[Line]) -> list[tuple[str, float]]:
    """The bill as the README shows it: the custom metrics, the functions, the alarms and
    dashboard, the rest, and the total."""

    def of(*prefixes: str) -> float:
        return sum(line.dollars for line in lines if line.item.startswith(prefixes))

    rows = [
        ("CloudWatch custom metrics (the functions' EMF records)", of("CloudWatch custom")),
        (
            f"Lambda: the five functions (the fast path alone ${of('Lambda FastPath'):.2f})",
            of("Lambda"),
        ),
        ("CloudWatch alarms and dashboard", of("CloudWatch alarms", "CloudWatch dashboard")),
        (
            "DynamoDB, SQS, CloudWatch Logs, EventBridge Scheduler",
            of("DynamoDB", "SQS", "CloudWatch Logs", "EventBridge"),
        ),
    ]
    return [*rows, ("total", total(lines))]
