"""Scenario files: a workload over time for the sandbox to run (see scenarios/README.md);
and the sample events `nodescaler invoke` sends.

A scenario names its node groups (each opted in with a policy), the workloads that load
them (deployments whose replica count follows a curve, queues whose tasks worker pods
take), and how long to run. Times are minutes from the start, or "HH:MM".
Loading one checks every field; a mistake is one line naming the file and the field.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from nodescaler.adapters.deployed_policies import load_policies
from nodescaler.domain.cluster.instance_templates import TEMPLATE_TAG
from nodescaler.domain.outside_text import bounded_problems
from nodescaler.domain.policy import CloudWatchMetric, PrometheusMetric
from nodescaler.errors import PolicyError
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from nodescaler_sandbox import metric_math, replay_figures, traces
from nodescaler_sandbox.scenario_checks import (
    ScenarioError,
    check_fault,
    check_points,
    check_zones_and_names,
)


def _minute(value: Any) -> Any:
    """Minutes, or "HH:MM" from the start."""
    if isinstance(value, str) and ":" in value:
        hours, _, minutes = value.partition(":")
        try:
            return int(hours) * 60 + int(minutes)
        except ValueError:
            raise ValueError(f'"{value}" is not a time: use minutes or "HH:MM"') from None
    return value


Minute = Annotated[float, BeforeValidator(_minute), Field(ge=0)]
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"  # a namespace's or an object's name
Count = Annotated[int, Field(ge=0)]
DEFAULT_START = "2026-11-23 09:00 UTC"  # a Monday morning


def _start(value: Any) -> Any:
    """ "YYYY-MM-DD HH:MM Zone/Name" → an aware datetime in that zone."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    value = str(value)  # YAML reads a bare 2027-03-28 as a date: a zone is still needed
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2})\s+(\S+)", value.strip())
    if match is None:
        raise ValueError(f'"{value}" is not "YYYY-MM-DD HH:MM Zone" (e.g. "{DEFAULT_START}")')
    day, time, zone = match.groups()
    try:
        where = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{zone!r} is not an IANA time zone (e.g. Europe/Paris)") from None
    try:
        return datetime.fromisoformat(f"{day}T{time}").replace(tzinfo=where)
    except ValueError as error:
        raise ValueError(f'"{value}": {error}') from None


Start = Annotated[datetime, BeforeValidator(_start)]
# An extended resource, named as Kubernetes names them: a domain, a slash, a name.
EXTENDED_RESOURCE = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _extended_apart(value: Any) -> Any:
    """Keys like `nvidia.com/gpu` beside cpu and memory go to `extended`."""
    if not isinstance(value, dict):
        return value
    extended = {k: v for k, v in value.items() if isinstance(k, str) and "/" in k}
    if not extended:
        return value
    for key in extended:
        if not EXTENDED_RESOURCE.match(key):
            raise ValueError(f"{key!r} is not an extended resource name (domain/name)")
    rest = {k: v for k, v in value.items() if k not in extended}
    return rest | {"extended": dict(value.get("extended", {})) | extended}


class _Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class NodeShape(_Spec):
    cpu: str
    memory: str
    pods: str = "110"
    extended: dict[str, Count] = {}  # written beside cpu: `nvidia.com/gpu: 1`

    _apart = model_validator(mode="before")(_extended_apart)


class Taint(_Spec):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule"] = "NoSchedule"


class StartupTaint(Taint):  # new nodes register with it; their agent lifts it after
    lifted_after_seconds: Annotated[float, Field(ge=0, le=3600)] = 30


class WarmPoolSpec(_Spec):
    """The group's warm pool as its operator configured it (PutWarmPool): the baseline keeps
    it so; a warmPool forecast resizes it under nodescaler."""

    min_size: Count = 0
    max_group_prepared_capacity: Count | None = None  # unset: the group's max
    pool_state: Literal["Stopped", "Hibernated", "Running"] = "Stopped"


class ReservationSpec(_Spec):
    """An open On-Demand Capacity Reservation of the group's instance type in its zone,
    which its launch template prefers (CapacityReservationPreference "open"): as EC2
    matches them, any instance of that type launched in that zone uses it while it has
    room (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html)."""

    instances: Annotated[int, Field(gt=0)]


ZONE = r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$"  # an Availability Zone's name: eu-west-1b


class GroupSpec(_Spec):
    name: str = Field(min_length=1, max_length=255)
    policy: str
    min: Count = 0
    max: Count
    instance_type: str = "m5.4xlarge"
    # What a node of the group can allocate; default: the instance type's vCPUs and memory.
    node: NodeShape | None = None
    labels: dict[str, str] = {}
    taints: list[Taint] = []  # only pods that tolerate them are scheduled there
    startup_taints: list[StartupTaint] = []  # on each new node until its agent runs
    no_capacity: bool = False  # every launch fails, as when EC2 has none of the type
    drain: bool = False  # a terminate lifecycle hook: the drain function runs on scale-in
    warm_pool: WarmPoolSpec | None = None  # pre-initialised instances scale-outs take first
    # An EKS managed node group (its ASG is EKS's): DescribeNodegroup answers its labels,
    # taints, instance type and scalingConfig (min, max); its nodes carry EKS's label
    eks_managed: bool = False
    zone: str | None = Field(default=None, pattern=ZONE)  # its one zone; unset: the region's a
    capacity_reservation: ReservationSpec | None = None  # reserved room its launches use first
    # Which instances a scale-in takes under nodescaler: its terminate function, as the
    # README attaches it, or Auto Scaling's default policy (the baseline's runs use that).
    termination_policy: Literal["nodescaler", "default"] = "nodescaler"
    # The Auto Scaling group's tags beyond the opt-in. Unset: Cluster Autoscaler's
    # node-template tags for the labels, taints and node shape (given, or the instance
    # type's), as a group scaled from zero needs; set: exactly these (`{}`: none).
    tags: dict[str, str] | None = None
    # What its instances are bought as: which price its node-hours cost (`cost_usd`)
    capacity_type: Literal["on-demand", "spot"] = "on-demand"

    def node_template_tags(self, allocatable: dict[str, str]) -> dict[str, str]:
        """The group's tags: as given, else derived from its labels, taints and what its
        nodes allocate."""
        if self.tags is not None:
            return dict(self.tags)
        tags = {f"{TEMPLATE_TAG}label/{k}": v for k, v in self.labels.items()}
        tags |= {f"{TEMPLATE_TAG}taint/{t.key}": f"{t.value}:{t.effect}" for t in self.taints}
        tags |= {f"{TEMPLATE_TAG}resources/{k}": v for k, v in allocatable.items()}
        return tags


class Budget(_Spec):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodShape(_Spec):
    cpu: str = "1"
    memory: str = "1Gi"
    extended: dict[str, Count] = {}  # written beside cpu: `nvidia.com/gpu: 1`
    ready_after_seconds: Annotated[float, Field(ge=0)] = 0
    node_selector: dict[str, str] = {}
    tolerations: list[Taint] = []  # each tolerates the taint with its key, value and effect
    # The pods' priority; below -10 they are expendable: no scale-up for them.
    priority: Annotated[int, Field(ge=-(2**31), le=10**9)] = 0
    namespace: str = Field(default="default", pattern=DNS_LABEL)
    # Pods no controller made (as `kubectl run` makes one); the sandbox keeps their number.
    bare: bool = False
    # A volume that goes with the node: an emptyDir (scratch space) or a hostPath.
    local_storage: Literal["emptyDir", "hostPath"] | None = None
    # e.g. cluster-autoscaler.kubernetes.io/safe-to-evict: "true"
    annotations: dict[str, str] = {}

    _apart = model_validator(mode="before")(_extended_apart)


class TemplatePod(_Spec):
    """A PodTemplate's pod: what it asks for and where it may run."""

    cpu: str = "1"
    memory: str = "1Gi"
    extended: dict[str, Count] = {}  # written beside cpu: `nvidia.com/gpu: 1`
    node_selector: dict[str, str] = {}
    tolerations: list[Taint] = []
    priority: Annotated[int, Field(ge=-(2**31), le=10**9)] = 0

    _apart = model_validator(mode="before")(_extended_apart)


class CapacityBufferSpec(_Spec):
    """A namespace's CapacityBuffer (autoscaling.x-k8s.io/v1alpha1): `replicas` pods of the
    shape of a PodTemplate of its own (`pod`), which the sandbox writes beside it."""

    name: str = Field(pattern=DNS_LABEL)
    namespace: str = Field(default="default", pattern=DNS_LABEL)
    replicas: Count
    pod: TemplatePod


class DaemonSetSpec(TemplatePod):
    """A DaemonSet (kube-proxy, the CNI, a log agent): a pod of this shape on each node its
    nodeSelector and tolerations take, from the moment the node registers."""

    name: str = Field(pattern=DNS_LABEL)
    namespace: str = Field(default="kube-system", pattern=DNS_LABEL)


class ZonalShiftSpec(_Spec):
    """An ARC zonal shift away from `zone`, started at `from`, expiring at `until`."""

    zone: str = Field(pattern=ZONE)
    start: Minute = Field(alias="from")
    until: Minute


class DeploymentSpec(PodShape):
    name: str
    replicas: dict[Minute, Count] = Field(min_length=1)  # a curve: linear between points
    disruption_budget: Budget | None = None
    # Its pods spread one a node: a required podAntiAffinity on kubernetes.io/hostname
    # selecting its own app label (an HA workload's replicas)
    one_per_node: bool = False


class QueueSpec(_Spec):
    name: str
    tasks: dict[Minute, Count]  # tasks sent at these minutes
    task_minutes: Annotated[float, Field(gt=0)]
    worker: PodShape = PodShape()
    max_workers: Annotated[int, Field(gt=0)]


class AlarmSpec(_Spec):
    """A CloudWatch alarm on a queue's ApproximateNumberOfMessagesVisible, which the
    sandbox evaluates every minute (moto stores alarms but never evaluates them)."""

    name: str
    queue: str
    comparison: Literal[
        "GreaterThanThreshold",
        "GreaterThanOrEqualToThreshold",
        "LessThanThreshold",
        "LessThanOrEqualToThreshold",
    ] = "GreaterThanThreshold"
    threshold: float
    evaluation_periods: Annotated[int, Field(ge=1)] = 1


class GaugeSpec(_Spec):
    """A gauge the sandbox's Prometheus scrapes: a queue's messages, or a deployment's
    replicas as its curve says them."""

    name: str = Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
    queue: str | None = None
    deployment: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> GaugeSpec:
        if (self.queue is None) == (self.deployment is None):
            raise ValueError("give exactly one of queue or deployment")
        return self


class PrometheusSpec(_Spec):
    """A Prometheus server the sandbox starts for the nodescaler run, answering the
    policies' AMP workspaces (moto has no AMP query API), scraping these gauges."""

    gauges: list[GaugeSpec] = Field(min_length=1)


class PodTraceSpec(traces.TraceWindow):
    """A pod trace beside the scenario (`traces`): a row a pod, jobs or services."""

    name: str = Field(default="trace", pattern=r"^[a-z0-9][a-z0-9-]*$")  # the pods' app
    ready_after_seconds: Annotated[float, Field(ge=0)] = 0


class RequestTraceSpec(traces.TraceWindow):
    """A request trace beside the scenario: its requests sent to the SQS queue `name`,
    whose workers KEDA scales (`queueLength` messages a worker, at most `maxWorkers`)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    worker: PodShape = PodShape()
    max_workers: Annotated[int, Field(gt=0)]
    queue_length: Annotated[int, Field(gt=0)] = traces.KEDA_QUEUE_LENGTH


FAULT_KINDS = (
    "queue-deleted",  # target: a queue of the scenario; deleted, its messages lost, then made anew
    "cloudwatch-outage",  # CloudWatch answers 503 ServiceUnavailable
    "kubernetes-down",  # the API server refuses connections
    "kubernetes-slow",  # the API server answers `seconds` late
    "throttling",  # target: a service (autoscaling, cloudwatch, dynamodb, ec2, eks, sqs)
)
STEP_CHOICES = tuple(s for s in range(1, 61) if 60 % s == 0)


class FaultSpec(_Spec):
    """A window in which something the product calls fails (see `outages`)."""

    start: Minute = Field(alias="from")
    until: Minute
    kind: Literal[FAULT_KINDS]  # type: ignore[valid-type]
    target: str | None = None
    seconds: Annotated[float, Field(gt=0, le=60)] = 2  # kubernetes-slow: how late (real time)


class Scenario(_Spec):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = ""
    start: Start = Field(default_factory=lambda: _start(DEFAULT_START))
    minutes: Annotated[int, Field(gt=0, le=7 * 24 * 60)]
    # node-hours and unschedulable pod-minutes count from here: a forecast's days of
    # learning are left out of the comparison (both runs alike)
    judged_from: Minute = 0
    tick_minutes: Annotated[int, Field(ge=1, le=60)] = 1
    # The world's step: pods, tasks, nodes and the baseline move this often (seconds, a
    # divisor of 60, so every minute boundary, where SQS publishes, is a step).
    step_seconds: Annotated[int, Field(ge=1, le=60)] = 10
    boot_minutes: Annotated[float, Field(ge=0)] = 3
    warm_boot_minutes: Annotated[float, Field(ge=0)] = 1  # from a warm pool to a Ready node
    policies: str = "../policies"  # a folder of policy files, relative to the scenario
    environment: dict[str, str] = {}  # the functions' settings, e.g. EXPANDERS
    groups: list[GroupSpec] = Field(min_length=1)
    deployments: list[DeploymentSpec] = []
    queues: list[QueueSpec] = []
    alarms: list[AlarmSpec] = []
    faults: list[FaultSpec] = []
    capacity_buffers: list[CapacityBufferSpec] = []
    daemon_sets: list[DaemonSetSpec] = []
    zonal_shifts: list[ZonalShiftSpec] = []
    prometheus: PrometheusSpec | None = None
    pod_traces: list[PodTraceSpec] = []  # demand read from CSV files beside the scenario
    request_traces: list[RequestTraceSpec] = []
    # $ an hour of an instance type (on demand), or {onDemand, spot}, over the table's (cost_usd)
    prices: replay_figures.PriceTable = {}
    price_table: str | None = None  # a YAML file of prices, relative to the scenario
    path: Path = Field(default=Path("."), exclude=True)

    @property
    def policies_path(self) -> Path:
        return (self.path.parent / self.policies).resolve()

    def priced(self) -> dict[str, replay_figures.Price]:
        """Each instance type's prices: the sandbox's, the price table's, the scenario's."""
        table = None if self.price_table is None else self.path.parent / self.price_table
        return replay_figures.prices_for(table, dict(self.prices))


def load_scenario(path: Path) -> Scenario:
    """The scenario in `path`, checked; `ScenarioError` names what is wrong and where."""
    try:
        document = yaml.safe_load(_read(path))
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not YAML: {error}") from None
    if not isinstance(document, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping (name, minutes, groups, ...)")
    try:
        scenario = Scenario.model_validate(document | {"path": path})
    except ValidationError as error:
        raise _invalid(path, error) from None
    _check_references(scenario)
    return scenario


def _invalid(path: Path, error: ValidationError) -> ScenarioError:
    """Each schema problem where it is, bounded (`bounded_problems`): all to fix at once."""
    named = (
        f"{'.'.join(str(part) for part in e['loc']) or '(top)'}: {e['msg']}" for e in error.errors()
    )
    lines = tuple(f"{path}: {p}" for p in bounded_problems(dict.fromkeys(named)))
    return ScenarioError("\n".join(lines), lines)


def load_event(path: Path) -> Any:
    """A sample event (a JSON file) for `nodescaler invoke`."""
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as error:
        raise ScenarioError(f"{path}: not JSON: {error}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read it ({error.strerror})") from None


def _check_references(scenario: Scenario) -> None:
    """What a field cannot check alone, in this order: the run's length and step, what
    alarms and faults name, zones and buffers, gauges, prices, traces, each group's bounds,
    then the policies the groups name (the first problem named, by file and field)."""
    where = scenario.path
    _check_run(where, scenario)
    check_points(where, scenario)
    queues = {q.name for q in scenario.queues}
    for index, alarm in enumerate(scenario.alarms):
        if alarm.queue not in queues:
            raise ScenarioError(
                f"{where}: alarms.{index}.queue: no queue named {alarm.queue!r} in the scenario"
            )
    for index, fault in enumerate(scenario.faults):
        check_fault(f"{where}: faults.{index}", fault, queues)
    check_zones_and_names(where, scenario)
    _check_gauges(where, scenario)
    try:
        prices = scenario.priced()
    except traces.TraceError as error:
        raise ScenarioError(f"{where}: priceTable: {error}") from None
    _check_traces(where, scenario)
    for index, group in enumerate(scenario.groups):
        if group.min > group.max:
            raise ScenarioError(
                f"{where}: groups.{index}: min {group.min} is above max {group.max}"
            )
        price = prices.get(group.instance_type)
        if group.warm_pool and (price is None or price.on_demand is None):
            raise ScenarioError(
                f"{where}: groups.{index}.warmPool: no on-demand price for {group.instance_type}, "
                "which a waiting instance pays a share of: give one under prices"
            )
    _check_policies(where, scenario)


def _check_run(where: Path, scenario: Scenario) -> None:
    """Groups named once; something judged before the end; a step that divides a minute."""
    names = [g.name for g in scenario.groups]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{where}: groups: a group name appears twice")
    if scenario.judged_from >= scenario.minutes:
        raise ScenarioError(
            f"{where}: judgedFrom: minute {scenario.judged_from:g} is not before the end of "
            f"the run (minute {scenario.minutes}): nothing would be judged"
        )
    if 60 % scenario.step_seconds:
        raise ScenarioError(
            f"{where}: stepSeconds: {scenario.step_seconds} does not divide a minute "
            f"(use one of {', '.join(str(s) for s in STEP_CHOICES)}): SQS publishes its "
            "metrics on the minute, which must be a step"
        )


def _check_policies(where: Path, scenario: Scenario) -> None:
    """The policies folder loads, and each group's policy is in it, with metrics the
    sandbox can answer (its Prometheus declared; metric math moto's evaluator takes)."""
    if not scenario.policies_path.is_dir():
        raise ScenarioError(f"{where}: policies: no folder {scenario.policies_path}")
    try:
        policies = load_policies(scenario.policies_path)
    except PolicyError as error:
        raise ScenarioError(f"{where}: policies: {error.problems[0]}") from None
    for index, group in enumerate(scenario.groups):
        if group.policy not in policies:
            known = ", ".join(sorted(policies)) or "none"
            raise ScenarioError(
                f"{where}: groups.{index}.policy: no policy {group.policy!r} in "
                f"{scenario.policies_path} (it has: {known})"
            )
        for metric in policies[group.policy].spec.metrics:
            _check_metric(f"{where}: groups.{index}.policy", scenario, group.policy, metric)


def _check_metric(where: str, scenario: Scenario, policy: str, metric: Any) -> None:
    """A Prometheus metric's server declared; a metric-math expression moto can evaluate."""
    if isinstance(metric, PrometheusMetric):
        _check_prometheus(where, scenario, policy, metric)
    if not isinstance(metric, CloudWatchMetric) or metric.cloud_watch.expression is None:
        return
    try:
        metric_math.check(metric.cloud_watch.expression, list(metric.cloud_watch.metrics))
    except metric_math.UnsupportedExpressionError as error:
        raise ScenarioError(
            f"{where}: policy {policy!r}, metric "
            f"{metric.key!r}: {error} (moto evaluates no metric math)"
        ) from None


def _check_prometheus(
    where: str, scenario: Scenario, policy: str, metric: PrometheusMetric
) -> None:
    """The sandbox answers AMP workspaces with the Prometheus the scenario declares."""
    named = f"policy {policy!r}, metric {metric.key!r}"
    if metric.prometheus.workspace is None:
        raise ScenarioError(
            f"{where}: {named}: the sandbox answers AMP workspaces only, not serverAddress "
            f"{metric.prometheus.server_address} (nothing beyond loopback is reached)"
        )
    if scenario.prometheus is None:
        raise ScenarioError(
            f"{where}: {named} queries Prometheus: declare the gauges it reads under "
            "prometheus.gauges"
        )


def _check_traces(where: Path, scenario: Scenario) -> None:
    """Each trace read whole (a row at a time): a bad row named by file, line and column;
    names apart from the queues' and deployments'."""
    taken = {q.name for q in scenario.queues} | {d.name for d in scenario.deployments}
    named: list[tuple[str, PodTraceSpec | RequestTraceSpec]] = [
        (f"podTraces.{i}", t) for i, t in enumerate(scenario.pod_traces)
    ]
    named += [(f"requestTraces.{i}", t) for i, t in enumerate(scenario.request_traces)]
    for field, trace in named:
        if trace.name in taken:
            raise ScenarioError(f"{where}: {field}.name: {trace.name!r} is taken already")
        taken.add(trace.name)
        if trace.until is not None and trace.until <= trace.start:
            raise ScenarioError(
                f"{where}: {field}.until: {trace.until:g} is not after from ({trace.start:g})"
            )
        try:
            traces.check(trace, where.parent, requests=isinstance(trace, RequestTraceSpec))
        except traces.TraceError as error:
            raise ScenarioError(f"{where}: {field}: {error}") from None


def _check_gauges(where: Path, scenario: Scenario) -> None:
    if scenario.prometheus is None:
        return
    queues = {q.name for q in scenario.queues}
    deployments = {d.name for d in scenario.deployments}
    for index, gauge in enumerate(scenario.prometheus.gauges):
        if gauge.queue is not None and gauge.queue not in queues:
            raise ScenarioError(
                f"{where}: prometheus.gauges.{index}.queue: no queue named {gauge.queue!r} "
                "in the scenario"
            )
        if gauge.deployment is not None and gauge.deployment not in deployments:
            raise ScenarioError(
                f"{where}: prometheus.gauges.{index}.deployment: no deployment named "
                f"{gauge.deployment!r} in the scenario"
            )
