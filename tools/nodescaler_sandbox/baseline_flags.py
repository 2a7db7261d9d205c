"""Cluster Autoscaler's flags and settings, as the baseline (`baseline`) models release
1.37: their defaults, what an operator may change, and what it reads of a group."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.domain.cluster.instance_templates import EKS_TAINT_EFFECTS

SCAN = timedelta(seconds=10)  # --scan-interval: how often `act` runs
UNNEEDED = timedelta(minutes=10)  # --scale-down-unneeded-time
DELAY_AFTER_ADD = timedelta(minutes=10)  # --scale-down-delay-after-add
UTILIZATION = 0.5  # --scale-down-utilization-threshold
PROVISION_TIMEOUT = timedelta(minutes=15)  # --max-node-provision-time
MAX_NODE_STARTUP = timedelta(minutes=15)  # clusterstate: MaxNodeStartupTime, not a flag
INITIAL_BACKOFF = timedelta(minutes=5)  # --initial-node-group-backoff-duration
MAX_BACKOFF = timedelta(minutes=30)  # --max-node-group-backoff-duration
BACKOFF_RESET = timedelta(hours=3)  # --node-group-backoff-reset-timeout
MAX_SCALE_DOWN_PARALLELISM = 10  # --max-scale-down-parallelism (empty and drained nodes)
MAX_DRAIN_PARALLELISM = 1  # --max-drain-parallelism
MAX_POD_EVICTION_TIME = timedelta(minutes=2)  # --max-pod-eviction-time
DELAY_AFTER_FAILURE = timedelta(minutes=3)  # --scale-down-delay-after-failure
GPU_UTILIZATION = 0.5  # --scale-down-gpu-utilization-threshold
BSP_DISRUPTION_TIMEOUT = timedelta(hours=1)  # --blocking-system-pod-distruption-timeout
MAX_BULK_SOFT_TAINT_COUNT = 10  # --max-bulk-soft-taint-count
UNREMOVABLE_RECHECK = timedelta(minutes=5)  # --unremovable-node-recheck-timeout
# cloudprovider/aws/aws_manager.go, refreshInterval: the Auto Scaling cache (bounds, failed
# launches) is regenerated at most once a minute (AwsManager.Refresh, each loop)
CLOUD_REFRESH = timedelta(minutes=1)
DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"  # utils/taints/taints.go
GPU_LABEL = "k8s.amazonaws.com/accelerator"  # cloudprovider/aws/aws_cloud_provider.go
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")  # utils/gpu
LONG_TERMINATING_EXTRA = timedelta(seconds=30)  # utils/drain, PodLongTerminatingExtraThreshold
RELEASE = "cluster-autoscaler-1.37"  # the release whose rules this module follows


# utils/taints/taints.go: a taint whose key starts so is a startup taint, whatever the flags
STARTUP_TAINT_PREFIXES = (
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
)
EXPENDABLE_BELOW = -10  # --expendable-pods-priority-cutoff
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"


@dataclass(frozen=True)
class Flags:
    """The command-line flags an operator may change that this model reads, at their
    defaults in the release it follows (config/flags/flags.go)."""

    scale_down_delay_after_add: timedelta = DELAY_AFTER_ADD
    unremovable_node_recheck_timeout: timedelta = UNREMOVABLE_RECHECK
    max_scale_down_parallelism: int = MAX_SCALE_DOWN_PARALLELISM
    max_drain_parallelism: int = MAX_DRAIN_PARALLELISM
    frequent_loops_enabled: bool = True  # on by default since 1.35 (main.go, LoopTrigger)
    ignore_daemonsets_utilization: bool = False
    ignore_mirror_pods_utilization: bool = False
    startup_taints: tuple[str, ...] = ()  # --startup-taint, once for each key

    def starting(self, node: dict[str, Any], now: datetime | None = None) -> bool:
        """A node with a startup taint: unready to Cluster Autoscaler, never a template,
        and (given `now`) among its group's upcoming nodes while created less than
        MaxNodeStartupTime ago (FAQ, "How does Cluster Autoscaler treat nodes with
        status/startup/ignore taints?")."""
        tainted = any(
            t["key"].startswith(STARTUP_TAINT_PREFIXES) or t["key"] in self.startup_taints
            for t in node["spec"].get("taints") or []
        )
        if not tainted or now is None:
            return tainted
        created = node["metadata"]["creationTimestamp"].replace("Z", "+00:00")
        return now - datetime.fromisoformat(created) < MAX_NODE_STARTUP

    def as_flags(self) -> dict[str, str | int | float | bool]:
        """The flags as an operator writes them on the command line."""
        flags: dict[str, str | int | float | bool] = {
            "--scan-interval": f"{int(SCAN.total_seconds())}s",
            "--frequent-loops-enabled": self.frequent_loops_enabled,
            "--scale-down-delay-after-add": _go(self.scale_down_delay_after_add),
            "--unremovable-node-recheck-timeout": _go(self.unremovable_node_recheck_timeout),
            "--scale-down-unneeded-time": _go(UNNEEDED),
            "--scale-down-utilization-threshold": UTILIZATION,
            "--scale-down-gpu-utilization-threshold": GPU_UTILIZATION,
            "--scale-down-delay-after-failure": _go(DELAY_AFTER_FAILURE),
            "--max-scale-down-parallelism": self.max_scale_down_parallelism,
            "--max-drain-parallelism": self.max_drain_parallelism,
            "--max-pod-eviction-time": _go(MAX_POD_EVICTION_TIME),
            "--max-bulk-soft-taint-count": MAX_BULK_SOFT_TAINT_COUNT,
            "--blocking-system-pod-distruption-timeout": _go(BSP_DISRUPTION_TIMEOUT),
            "--ignore-daemonsets-utilization": self.ignore_daemonsets_utilization,
            "--ignore-mirror-pods-utilization": self.ignore_mirror_pods_utilization,
            "--max-node-provision-time": _go(PROVISION_TIMEOUT),
            "--initial-node-group-backoff-duration": _go(INITIAL_BACKOFF),
            "--max-node-group-backoff-duration": _go(MAX_BACKOFF),
            "--node-group-backoff-reset-timeout": _go(BACKOFF_RESET),
            "--expendable-pods-priority-cutoff": EXPENDABLE_BELOW,
        }
        if self.startup_taints:  # repeated on the command line, one key each
            flags["--startup-taint"] = ",".join(self.startup_taints)
        return flags


def _go(duration: timedelta) -> str:
    """A duration as Go prints it: 600 s → "10m0s"."""
    hours, rest = divmod(int(duration.total_seconds()), 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


@dataclass(frozen=True)
class GroupSpec:
    """What the baseline knows of a group, as Cluster Autoscaler reads it from AWS."""

    min: int
    max: int
    capacity: dict[str, str]  # its instance type's vCPUs, memory (and GPUs)
    tags: dict[str, str]  # the Auto Scaling group's tags
    # what its instance type labels every node with (on AWS, Cluster Autoscaler builds a
    # node of a group at zero with them: instance type, architecture, OS)
    labels: dict[str, str] = field(default_factory=dict)
    # An EKS managed node group's labels and taints, as DescribeNodegroup answers them
    eks_labels: dict[str, str] = field(default_factory=dict)
    eks_taints: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Limits:
    """--max-nodes-total, --cores-total, --memory-total (None: no limit)."""

    nodes: int | None = None
    vcpus: int | None = None
    memory_gib: int | None = None

    @classmethod
    def of(cls, environment: dict[str, str]) -> Limits:
        def read(name: str) -> int | None:
            return int(environment[name]) if name in environment else None

        return cls(
            read("CLUSTER_MAX_NODES"), read("CLUSTER_MAX_VCPUS"), read("CLUSTER_MAX_MEMORY_GIB")
        )


@dataclass(frozen=True)
class DrainFlags:
    """--skip-nodes-with-system-pods and --skip-nodes-with-local-storage (true by default),
    from the scenario's SKIP_NODES_WITH_* settings, and --blocking-system-pod-distruption-
    timeout (1h) from its BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS, as the functions
    read them."""

    system_pods: bool = True
    local_storage: bool = True
    system_pod_timeout: timedelta = BSP_DISRUPTION_TIMEOUT

    @classmethod
    def of(cls, environment: dict[str, str]) -> DrainFlags:
        def read(name: str) -> bool:
            return environment.get(name, "true").lower() == "true"

        timeout = environment.get("BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS")
        return cls(
            read("SKIP_NODES_WITH_SYSTEM_PODS"),
            read("SKIP_NODES_WITH_LOCAL_STORAGE"),
            BSP_DISRUPTION_TIMEOUT if timeout is None else timedelta(seconds=int(timeout)),
        )


def managed_node_group(
    eks: Any, tags: dict[str, str]
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The labels and taints DescribeNodegroup gives the EKS managed node group an ASG's
    tags name (eks:cluster-name, eks:nodegroup-name), as the AWS provider reads them for a
    node of a group at zero (aws_wrapper.go, getManagedNodegroupInfo: taints in EKS's
    effect names); none for another group, or when EKS refuses (it logs the error)."""
    cluster, nodegroup = tags.get("eks:cluster-name"), tags.get("eks:nodegroup-name")
    if not cluster or not nodegroup:
        return {}, []
    try:
        found = eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)
    except ClientError:
        return {}, []
    described = found["nodegroup"]
    taints = [
        {"key": t["key"], "value": t.get("value", ""), "effect": EKS_TAINT_EFFECTS[t["effect"]]}
        for t in described.get("taints") or []
        if t.get("effect") in EKS_TAINT_EFFECTS
    ]
    return dict(described.get("labels") or {}), taints
