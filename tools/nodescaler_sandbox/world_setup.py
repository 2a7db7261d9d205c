"""The world's groups, queues, budgets, buffers and alarms, made on the sandbox before
either controller runs, as the operator and the teams make them: each group's ASG (or EKS
managed node group) with its tags, launch, warm pool and drain hook, its nodes' shape and
labels; the queues; each deployment's PodDisruptionBudget; the namespaces'
CapacityBuffers; the DaemonSets; the alarms on SQS's metrics."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from nodescaler.adapters.aws.instance_types import ARCHITECTURES
from nodescaler.domain.cluster.instance_templates import instance_labels
from nodescaler.domain.groups.node_group import EKS_NODEGROUP_LABEL

from nodescaler_sandbox.eks_scaling import create_managed_node_group
from nodescaler_sandbox.provision import create_group, launch_configuration
from nodescaler_sandbox.workloads import pod

if TYPE_CHECKING:
    from nodescaler_sandbox.sandbox import Sandbox
    from nodescaler_sandbox.scenario_file import (
        GroupSpec,
        NodeShape,
        Scenario,
        TemplatePod,
        WarmPoolSpec,
    )

ZONE_LABEL = "topology.kubernetes.io/zone"  # as the kubelet sets it on EC2 (a group's zone given)


def create(scenario: Scenario, box: Sandbox, queue_names: list[str], *, hooks: bool) -> None:
    """Everything the scenario has, in this order: its groups (`hooks`: with the drain
    hook and the custom termination policy where they ask, as nodescaler's stack puts
    them), its queues, its budgets, its buffers and its alarms."""
    prices = {t: p.on_demand for t, p in scenario.priced().items() if p.on_demand is not None}
    box.warm_pools.prices = prices  # what a waiting warm instance pays a share of
    for group in scenario.groups:
        _group(box, group, hooks=hooks)
    sqs = box.client("sqs")
    for name in queue_names:
        sqs.create_queue(QueueName=name)
    for spec in scenario.deployments:
        if spec.disruption_budget:
            budget = spec.disruption_budget.model_dump(by_alias=True, exclude_none=True)
            box.cluster.store.put(
                "poddisruptionbudgets",
                {
                    "metadata": {"name": spec.name, "namespace": spec.namespace},
                    "spec": budget | {"selector": {"matchLabels": {"app": spec.name}}},
                },
            )
    _write_buffers(scenario, box)
    _write_daemon_sets(scenario, box)
    cloudwatch = box.client("cloudwatch")
    for alarm in scenario.alarms:
        cloudwatch.put_metric_alarm(
            AlarmName=alarm.name,
            Namespace="AWS/SQS",
            MetricName="ApproximateNumberOfMessagesVisible",
            Dimensions=[{"Name": "QueueName", "Value": alarm.queue}],
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=alarm.evaluation_periods,
            Threshold=alarm.threshold,
            ComparisonOperator=alarm.comparison,
        )


def _group(box: Sandbox, group: GroupSpec, *, hooks: bool) -> None:
    """The group's ASG as the operator made it, and its nodes as the cluster will see them."""
    autoscaling, ec2 = box.client("autoscaling"), box.client("ec2")
    template = _launch(box, group)
    shape = _allocatable(group.node) if group.node else instance_capacity(ec2, group.instance_type)
    eks_tags, eks_labels = _managed(box, group)
    create_group(
        autoscaling,
        group.name,
        region=box.cluster.region,
        tags={"nodescaler/enabled": "true", "nodescaler/policy": group.policy}
        | group.node_template_tags(shape)
        | eks_tags,
        min_size=group.min,
        max_size=group.max,
        zone=group.zone,
        launch_configuration=f"{group.name}-lc",  # unless from a launch template
        launch_template=template,
    )
    box.cluster.shapes[group.name] = shape
    box.cluster.labels[group.name] = _labels(box, group) | eks_labels
    box.cluster.taints[group.name] = [t.model_dump() for t in group.taints]
    box.cluster.startup_taints[group.name] = [
        (t.model_dump(exclude={"lifted_after_seconds"}), timedelta(seconds=t.lifted_after_seconds))
        for t in group.startup_taints
    ]
    if group.warm_pool:  # the operator's, before either controller runs
        _put_warm_pool(autoscaling, group.name, group.warm_pool)
    if group.no_capacity:
        box.no_capacity.add(group.name)
    if group.drain and hooks:
        box.hook(group.name)
    if group.termination_policy == "nodescaler" and hooks:
        box.termination.custom_groups.add(group.name)


def _managed(box: Sandbox, group: GroupSpec) -> tuple[dict[str, str], dict[str, str]]:
    """The group as an EKS managed node group, if it is one: the tags EKS puts on its
    ASG, and the label on each of its nodes."""
    if not group.eks_managed:
        return {}, {}
    tags = create_managed_node_group(
        box.client("eks"),
        group.name,
        region=box.cluster.region,
        instance_type=group.instance_type,
        labels=group.labels,
        taints=[t.model_dump() for t in group.taints],
        sizes=(group.min, group.max),
    )
    return tags, {EKS_NODEGROUP_LABEL: group.name}


def _labels(box: Sandbox, group: GroupSpec) -> dict[str, str]:
    """Its nodes' labels: EKS's for the instance type, the zone's, the scenario's."""
    ec2 = box.client("ec2")
    if not group.zone:
        return node_labels(ec2, group.instance_type) | group.labels
    box.cluster.zones[group.name] = group.zone
    zoned = {ZONE_LABEL: group.zone}
    return node_labels(ec2, group.instance_type) | zoned | group.labels


def _write_buffers(scenario: Scenario, box: Sandbox) -> None:
    """Each namespace's CapacityBuffer, and the PodTemplate it refers to, as its team
    applies them (`kubectl apply`) before either controller runs."""
    for buffer in scenario.capacity_buffers:
        made = _template_pod(buffer.name, buffer.pod, "default")
        metadata = {"name": buffer.name, "namespace": buffer.namespace}
        box.cluster.store.put(
            "podtemplates", {"metadata": metadata, "template": {"spec": made["spec"]}}
        )
        box.cluster.store.put(
            "capacitybuffers",
            {
                "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
                "kind": "CapacityBuffer",
                "metadata": metadata,
                "spec": {"podTemplateRef": {"name": buffer.name}, "replicas": buffer.replicas},
            },
        )


def _template_pod(name: str, shape: TemplatePod, namespace: str) -> dict[str, Any]:
    """A pod of a template's shape: what it asks for and where it may run."""
    return pod(
        name,
        name,
        shape.cpu,
        shape.memory,
        extended=dict(shape.extended),
        priority=shape.priority,
        node_selector=dict(shape.node_selector),
        tolerations=[t.model_dump() for t in shape.tolerations],
        namespace=namespace,
    )


def _write_daemon_sets(scenario: Scenario, box: Sandbox) -> None:
    """Each DaemonSet, as its owner applies it before either controller runs: the cluster
    puts a pod of it on each node it takes (`SimulatedCluster.daemons_on`)."""
    for daemon in scenario.daemon_sets:
        made = _template_pod(daemon.name, daemon, daemon.namespace)
        labels = {"app": daemon.name}
        written = box.cluster.store.put(
            "daemonsets",
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": daemon.name, "namespace": daemon.namespace},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": made["spec"]},
                },
            },
        )
        box.cluster.daemon_sets.append(written)


def _launch(box: Sandbox, group: GroupSpec) -> str | None:
    """What the group launches from: a launch configuration (None), or, with a capacity
    reservation, a launch template (its name) that prefers open reservations (a launch
    configuration cannot), the reservation made in its zone."""
    autoscaling = box.client("autoscaling")
    if group.capacity_reservation is None:
        launch_configuration(autoscaling, f"{group.name}-lc", group.instance_type)
        return None
    zone = group.zone or f"{box.cluster.region}a"
    box.reservations.reserve(
        group.instance_type, zone, group.capacity_reservation.instances, targeted=False
    )
    box.client("ec2").create_launch_template(
        LaunchTemplateName=f"{group.name}-lt",
        LaunchTemplateData={
            "InstanceType": group.instance_type,
            "ImageId": "ami-12c6146b",
            "CapacityReservationSpecification": {"CapacityReservationPreference": "open"},
        },
    )
    return f"{group.name}-lt"


def _put_warm_pool(autoscaling: Any, group: str, pool: WarmPoolSpec) -> None:
    autoscaling.put_warm_pool(
        AutoScalingGroupName=group,
        MinSize=pool.min_size,
        MaxGroupPreparedCapacity=(
            -1  # unset: the group's max
            if pool.max_group_prepared_capacity is None
            else pool.max_group_prepared_capacity
        ),
        PoolState=pool.pool_state,
    )


def _allocatable(node: NodeShape) -> dict[str, str]:
    shape = {"cpu": node.cpu, "memory": node.memory, "pods": node.pods}
    return shape | {name: str(amount) for name, amount in node.extended.items()}


def node_labels(ec2: Any, instance_type: str) -> dict[str, str]:
    """The labels EKS puts on each node of the type (its instance type, architecture, OS)."""
    described = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    supported = described.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    architecture = next((ARCHITECTURES[a] for a in supported if a in ARCHITECTURES), "amd64")
    return instance_labels(instance_type, architecture)


def instance_capacity(ec2: Any, instance_type: str) -> dict[str, str]:
    """A node's allocatable from its instance type, as EC2 describes it."""
    described = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    shape = {
        "cpu": str(described["VCpuInfo"]["DefaultVCpus"]),
        "memory": f"{described['MemoryInfo']['SizeInMiB']}Mi",
        "pods": "110",
    }
    gpus = sum(  # as the NVIDIA device plugin advertises them
        g.get("Count", 0)
        for g in described.get("GpuInfo", {}).get("Gpus", [])
        if g.get("Manufacturer") == "NVIDIA"
    )
    return shape | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
