"""Warnings for a scenario's queue policies whose tasks per node cannot fit on a node, or
that may grow a group past what the queue's workers fill (`nodes_past_workers`), and for
its pods no group's node can hold (`too_big`).

A queue metric's `AverageValue` target says how many tasks a node takes; each task is a
worker pod (KEDA's ScaledJob makes one a message, a request trace's one a `queueLength`),
so the target × a worker's requests must fit in one node's allocatable. When it does not,
the group grows for the target and its workers wait for room (pending pods) until the
group grows for them too: its `PendingPods` metric, or without one its own pending pods
(`domain.scaling.own_pods`, unless `ownPendingPods: false`), a boot time later;
`nodescaler validate` and `simulate` say so, naming both numbers. A warning, not an
error: the policy may mean it (workers sharing a node's spare capacity over time), and
the scenario still runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal

from nodescaler.domain.cluster.quantity import parse_quantity
from nodescaler.domain.policy import MetricBase, NodeGroupPolicy, PendingPodsMetric
from nodescaler.domain.policy.descriptors import metric_type
from nodescaler.domain.policy.metrics import TargetType

from nodescaler_sandbox.scenario_file import GroupSpec, PodShape, Scenario

RESOURCES = ("cpu", "memory")


@dataclass(frozen=True)
class Unfit:
    """A queue metric whose tasks per node need more than a node of its group allocates."""

    group: str
    policy: str
    metric: str
    queue: str
    per_node: float  # the target: tasks a node
    workers: int  # the workers those tasks make
    worker: Mapping[str, Decimal]  # one worker's requests
    node: str  # the group's instance type, or "node" for a shape given in the scenario
    allocatable: Mapping[str, Decimal]
    pending_pods: bool  # whether the policy also grows for waiting workers
    own_pods: bool = False  # ... or the group does without it (`domain.scaling.own_pods`)

    @property
    def fit(self) -> int:
        """How many workers a node takes."""
        return min(
            int(self.allocatable[r] // self.worker[r]) for r in RESOURCES if self.worker[r] > 0
        )

    def describe(self) -> str:
        need = {r: self.worker[r] * self.workers for r in RESOURCES}
        text = (
            f"group {self.group}: policy {self.policy!r} metric {self.metric!r} targets "
            f"{self.per_node:g} tasks of {self.queue} a node: {self.workers} workers × "
            f"{_shown(self.worker)} = {_shown(need)}, more than a {self.node} allocates "
            f"({_shown(self.allocatable)}; {self.fit} workers fit)"
        )
        if self.pending_pods:
            return text + "; its PendingPods metric grows the group for the workers that wait"
        if self.own_pods:
            return text + (
                "; the group grows for the workers that wait once they are Pending (its own "
                "pending pods: the policy has no PendingPods metric); a target of "
                f"{self.fit} a node sizes it for them at once"
            )
        return text + (
            "; the workers will wait for room: lower the target to "
            f"{self.fit} a node, or add a PendingPods metric"
        )


def unfit_queue_targets(
    scenario: Scenario,
    policies: Mapping[str, NodeGroupPolicy],
    instance_types: Mapping[str, Mapping[str, str]],
) -> list[Unfit]:
    """Each group's queue metric whose target a node cannot hold. `instance_types`: an
    instance type's vCPUs and memory (`cpu`, `memory`) when the group gives no `node`."""
    workers = _workers(scenario)
    found = []
    for group, policy, allocatable in _known(scenario, policies, instance_types):
        pending = any(isinstance(m, PendingPodsMetric) for m in policy.spec.metrics)
        own = policy.counts_own_pending_pods  # the sandbox's groups are on its cluster
        node = group.instance_type if group.node is None else "node of the group"
        for metric, queue, per_node in _queue_targets(policy):
            if queue not in workers:
                continue
            shape, per_worker = workers[queue]
            count = math.ceil(per_node / per_worker)
            worker = {r: parse_quantity(getattr(shape, r)) for r in RESOURCES}
            if any(worker[r] * count > allocatable[r] for r in RESOURCES):
                where = (group.name, policy.name, metric.key, queue)
                found.append(
                    Unfit(*where, per_node, count, worker, node, allocatable, pending, own)
                )
    return found


def _known(
    scenario: Scenario,
    policies: Mapping[str, NodeGroupPolicy],
    instance_types: Mapping[str, Mapping[str, str]],
) -> Iterator[tuple[GroupSpec, NodeGroupPolicy, dict[str, Decimal]]]:
    """Each group whose policy and node are known, with what its node allocates."""
    for group in scenario.groups:
        policy = policies.get(group.policy)
        allocatable = _allocatable(group, instance_types)
        if policy is not None and allocatable is not None:
            yield group, policy, allocatable


def nodes_past_workers(
    scenario: Scenario,
    policies: Mapping[str, NodeGroupPolicy],
    instance_types: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """Each group a queue metric may grow past the nodes its queues' workers fill at their
    maximum: those nodes would wait empty (no worker comes) until its window lets them go."""
    most = {q.name: q.max_workers for q in scenario.queues}
    most |= {t.name: t.max_workers for t in scenario.request_traces}
    workers, found = _workers(scenario), []
    for group, policy, allocatable in _known(scenario, policies, instance_types):
        read: dict[str, list[tuple[str, int]]] = {}
        for metric, queue, per_node in _queue_targets(policy):
            shape, per_worker = workers.get(queue, (None, 1))
            fit = None if shape is None else _fit(shape, group, allocatable)
            if fit is not None:  # its workers' and the node's every resource known
                a_node = max(min(math.ceil(per_node / per_worker), fit), 1)
                read.setdefault(metric.key, []).append((queue, a_node))
        allowed = min(policy.spec.max_replicas, group.max)
        for metric_key, queues in read.items():
            filled = sum(math.ceil(most[q] / a_node) for q, a_node in queues)
            if allowed > filled:
                said = " and ".join(f"{q}'s {most[q]} ({a} a node)" for q, a in queues)
                found.append(
                    f"group {group.name}: policy {policy.name!r} metric {metric_key!r} may "
                    f"grow it to {allowed} nodes, but the workers at most ({said}) fill "
                    f"{filled}: nodes past {filled} would wait empty; a maxReplicas of "
                    f"{filled} (the workers' maximum / workers a node) keeps them off"
                )
    return found


def _fit(shape: PodShape, group: GroupSpec, allocatable: Mapping[str, Decimal]) -> int | None:
    """How many of these workers a node of the group holds (any number, for a worker that
    asks nothing); None where it asks an extended resource the node's count of is unknown."""
    asked = {r: parse_quantity(getattr(shape, r)) for r in RESOURCES}
    has = dict(allocatable)
    for name, count in shape.extended.items():
        held = group.node.extended.get(name) if group.node is not None else None
        if held is None and name == "nvidia.com/gpu" and group.node is None:
            held = _gpus(group.instance_type)
        if held is None:
            return None
        asked[name], has[name] = Decimal(count), Decimal(held)
    fits = [int(has[r] // amount) for r, amount in asked.items() if amount > 0]
    return min(fits, default=2**31)  # a worker that asks nothing: as many as come


def _gpus(instance_type: str) -> int | None:
    """An instance type's NVIDIA GPUs, as EC2 describes it (None if unknown)."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES
    from nodescaler.adapters.aws.instance_types import shape_of

    described = INSTANCE_TYPES.get(instance_type)
    return None if described is None else shape_of(instance_type, described).nvidia_gpus


def _workers(scenario: Scenario) -> dict[str, tuple[PodShape, int]]:
    """Each queue's worker and the tasks one worker takes."""
    workers = {q.name: (q.worker, 1) for q in scenario.queues}
    for trace in scenario.request_traces:
        workers[trace.name] = (trace.worker, trace.queue_length)
    return workers


def _queue_targets(policy: NodeGroupPolicy) -> Iterator[tuple[MetricBase, str, float]]:
    """(metric, queue name, tasks a node) of each queue metric with a per-node target."""
    for metric in policy.spec.metrics:
        target = getattr(metric, "target", None)
        if target is None or target.type is not TargetType.AVERAGE_VALUE:
            continue
        for queue in sorted(metric_type(metric).queues(metric)):
            yield metric, queue, float(target.average_value)


def _allocatable(
    group: GroupSpec, instance_types: Mapping[str, Mapping[str, str]]
) -> dict[str, Decimal] | None:
    shape = (
        group.node.model_dump()
        if group.node is not None
        else instance_types.get(group.instance_type)
    )
    if shape is None:
        return None
    return {r: parse_quantity(shape[r]) for r in RESOURCES}


def _shown(amounts: Mapping[str, Decimal]) -> str:
    cpu = amounts["cpu"]
    gib = amounts["memory"] / Decimal(2**30)
    return f"{cpu.normalize():f} cpu, {round(gib, 1).normalize():f}Gi"


def instance_shape(instance_type: str) -> dict[str, str] | None:
    """An instance type's vCPUs and memory, as EC2 describes it (moto's copy of EC2's
    table, read offline; what the sandbox's nodes allocate), or None if unknown."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    described = INSTANCE_TYPES.get(instance_type)
    if described is None:
        return None
    vcpus = described["VCpuInfo"]["DefaultVCpus"]
    return {"cpu": str(vcpus), "memory": f"{described['MemoryInfo']['SizeInMiB']}Mi"}


def too_big(scenario: Scenario, instance_types: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Each workload (a deployment, a queue's or a request trace's worker) whose pod asks
    more CPU or memory than a node of any group allocates: its pods would wait for ever,
    and no group grows for them (`simulate` counts them in `pods_that_fit_no_group`)."""
    nodes = {g.name: a for g in scenario.groups if (a := _allocatable(g, instance_types))}
    if not nodes or len(nodes) < len(scenario.groups):  # a group's node unknown: no guess
        return []
    largest, room = max(nodes.items(), key=lambda kv: (kv[1]["memory"], kv[1]["cpu"]))
    workloads: list[tuple[str, PodShape]] = [
        (f"deployment {d.name}", d) for d in scenario.deployments
    ]
    workloads += [(f"queue {q.name}'s worker", q.worker) for q in scenario.queues]
    workloads += [(f"request trace {t.name}'s worker", t.worker) for t in scenario.request_traces]
    found = []
    for what, shape in workloads:
        asked = {r: parse_quantity(getattr(shape, r)) for r in RESOURCES}
        if not any(all(asked[r] <= a[r] for r in RESOURCES) for a in nodes.values()):
            found.append(
                f"{what} asks {_shown(asked)} a pod, more than a node of any group allocates "
                f"(the roomiest, group {largest}: {_shown(room)}): its pods will wait, and "
                "no group grows for them"
            )
    return found


def buffers_never_kept(
    scenario: Scenario,
    policies: Mapping[str, NodeGroupPolicy],
    instance_types: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """Each group's capacity buffer whose pod no node of the group can ever hold (too large,
    a taint it does not tolerate, a label it selects that the nodes lack): the buffer keeps
    no room, and its metric reads as missing, so the group never scales in while it lasts."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES
    from nodescaler.adapters.aws.instance_types import shape_of
    from nodescaler.domain.ahead.group_buffers import buffer_pod
    from nodescaler.domain.cluster.instance_templates import (
        NodegroupLabels,
        template_from_instance_type,
        zone_labels,
    )
    from nodescaler.domain.cluster.predicates import why_not
    from nodescaler.domain.cluster.snapshot import Taint

    found = []
    for group, policy, _ in _known(scenario, policies, instance_types):
        described = INSTANCE_TYPES.get(group.instance_type)
        if described is None or group.node is not None:  # its node not EC2's: no guess
            continue
        zone = zone_labels((group.zone,) if group.zone else ())
        shape = shape_of(group.instance_type, described)
        # the node of the group at zero, as nodescaler's own plan sees it: its tags, and
        # what its nodes register with (an EKS managed group's labels and taints)
        registers = NodegroupLabels(
            dict(group.labels), tuple(Taint(t.key, t.value, t.effect) for t in group.taints)
        )
        tags = group.node_template_tags({})
        node = template_from_instance_type(group.name, shape, tags, zone, registers)
        for index, buffer in enumerate(policy.buffers):
            if (why := why_not(buffer_pod(buffer, "buffer"), node)) is not None:
                found.append(
                    f"group {group.name}: policy {policy.name!r} buffer[{index}] "
                    f"({buffer.describe()}): a buffer pod {why}: it keeps no room, and the "
                    "group does not scale in while it cannot be placed"
                )
    return found


def warnings(scenario: Scenario) -> list[str]:
    """The scenario's unfit queue targets, buffers no node holds, pods no group's node
    holds and its groups' policies' own warnings (`domain.policy.advice`), in words (its
    policies loaded from its folder)."""
    from nodescaler.adapters.deployed_policies import load_policies
    from nodescaler.domain.policy.advice import advice

    policies = load_policies(scenario.policies_path)
    types = {g.instance_type for g in scenario.groups if g.node is None}
    shapes = {t: shape for t in types if (shape := instance_shape(t)) is not None}
    unfit = [u.describe() for u in unfit_queue_targets(scenario, policies, shapes)]
    unkept = buffers_never_kept(scenario, policies, shapes)
    used = sorted({g.policy for g in scenario.groups if g.policy in policies})
    advised = [f"policy {p!r} {w}" for p in used for w in advice(policies[p])]
    past = nodes_past_workers(scenario, policies, shapes)
    return unfit + past + unkept + too_big(scenario, shapes) + advised
