"""A reactive baseline in the manner of Cluster Autoscaler, scaling the same sandbox world,
so a scenario's summary can show what a metrics-driven policy buys.

A model of Cluster Autoscaler 1.37 (`RELEASE`: its rules as the cluster-autoscaler-release-1.37
branch has them, each cited where it is modelled; its flags in `Flags`), not Cluster
Autoscaler itself:
- it looks at pending pods only (no queues, no reservation targets), every 10 s (`SCAN`,
  --scan-interval): the sandbox calls `act` at each scan, on a world that moves every
  10 s too (`cadence`); where the world's step is longer, one call stands for the scans
  within the step;
- scale-up: the unschedulable pods (not the expendable: priority below -10) are offered to
  every group below its maximum, not backed off, with room under the cluster's limits
  (`--max-nodes-total`, `--cores-total`, `--memory-total`: the scenario's CLUSTER_MAX_*
  settings) and whose new node fits some of them; each option asks for as many nodes as a
  first-fit packing of its pods needs (after filling the nodes already on their way),
  capped by the group's maximum and the limits. The scenario's expander chain (the same
  EXPANDERS the functions read: priority, weighted-priority by tier, least-waste,
  most-pods, random as the first left) picks one; with `balance` last in the chain
  (--balance-similar-node-groups) its nodes are split over the options of similar groups
  that take all of its pods (nodescaler's own test of similarity), the smallest first,
  within each one's room. A new node is modelled on a live node
  of the group; a group at zero is read as Cluster Autoscaler reads it, from its instance
  type and its node-template tags (labels, taints, resources): without them it cannot
  take pods that need them; an EKS managed node group's labels and taints from
  DescribeNodegroup are added (the AWS provider's managed node group cache). A group
  whose launch failed is backed off at the Auto Scaling cache's next refresh (at most
  once a minute, when it also reads the groups' bounds), as the AWS provider learns it: it
  lists the group's scaling activities while the group has fewer instances than it asked
  for, and a Failed one since its last
  SetDesiredCapacity makes the missing instances placeholders that cannot come, which are
  deleted (desired back to the instances it has) and the group backed off
  (cloudprovider/aws/auto_scaling_groups.go, createPlaceholdersForDesiredNonStartedInstances
  and isNodeGroupAvailable). A group whose nodes have not registered 15 minutes after it
  asked (max-node-provision-time) is backed off too and its request taken back. A backoff
  lasts 5 minutes, doubles at each failure after one ends, up to 30, is forgotten 3 hours
  after the last failure and ends when a scale-up of the group completes
  (utils/backoff/exponential_backoff.go; clusterstate.updateScaleRequests);
- scale-down, planned in every loop (one that scaled up too): a node whose utilization
  (`utilization`: its pods' requests over its allocatable, the larger of CPU and memory,
  its GPUs' alone on a GPU node) is at or below half (its group's
  scaledownutilizationthreshold tag when it has one), and whose pods would fit on the
  other nodes (none of them a node found removable before it), is unneeded, unless a pod
  on it may not be moved (simulator/drainability/rules: no controller, a kube-system pod
  no budget selects for its first hour, local storage, safe-to-evict "false", a budget
  with no disruption left, spent over the nodes found removable; `DrainFlags`). Unneeded
  nodes carry the DeletionCandidateOfClusterAutoscaler PreferNoSchedule taint, ten put or
  taken off a loop. After 10 minutes unneeded (its group's scaledownunneededtime tag
  when it has one; and --scale-down-delay-after-add after the last scale-up) it
  is removed: the node cordoned and its pods evicted,
  those a PodDisruptionBudget keeps tried again at each scan for up to 2 minutes, after
  which the drain fails, the node is uncordoned and scale-down waits 3 minutes (the FAQ:
  "retrying, if needed, for up to 2 min"; --scale-down-delay-after-failure); once it is
  empty, the instance terminated with the desired capacity decremented. Up to 10 nodes
  are deleted at once (--max-scale-down-parallelism), one of them drained
  (--max-drain-parallelism), empty ones first; never below the group's minimum. Whether
  a node's pods would fit elsewhere is asked of every predicate the sandbox's pods and
  nodes carry (CPU, memory, pod slots, extended resources,
  nodeSelector, required node affinity, taints), with the baseline's own check, not
  nodescaler's.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.adapters.k8s.conversion import node_from_json
from nodescaler.domain.cluster.predicates import EKS_TAINT_EFFECTS, NodeTemplate
from nodescaler.domain.cluster.quantity import millicores, whole_units
from nodescaler.domain.scale_up.balance import IGNORED_LABELS, even_split, similar

from nodescaler_sandbox.cluster import Room, SimulatedCluster, quantities, requests
from nodescaler_sandbox.kube.apiserver import ApiError
from nodescaler_sandbox.provision import group_sizes

SCAN = timedelta(seconds=10)  # --scan-interval: how often `act` runs
UNNEEDED = timedelta(minutes=10)  # --scale-down-unneeded-time
DELAY_AFTER_ADD = timedelta(minutes=10)  # --scale-down-delay-after-add
UTILIZATION = 0.5  # --scale-down-utilization-threshold
PROVISION_TIMEOUT = timedelta(minutes=15)  # --max-node-provision-time
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
# cloudprovider/aws/aws_manager.go, refreshInterval: the Auto Scaling cache (bounds, failed
# launches) is regenerated at most once a minute (AwsManager.Refresh, each loop)
CLOUD_REFRESH = timedelta(minutes=1)
DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"  # utils/taints/taints.go
GPU_LABEL = "k8s.amazonaws.com/accelerator"  # cloudprovider/aws/aws_cloud_provider.go
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")  # utils/gpu
LONG_TERMINATING_EXTRA = timedelta(seconds=30)  # utils/drain, PodLongTerminatingExtraThreshold
RELEASE = "cluster-autoscaler-1.37"  # the release whose rules this module follows


EXPENDABLE_BELOW = -10  # --expendable-pods-priority-cutoff
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"


@dataclass(frozen=True)
class Flags:
    """The command-line flags an operator may change that this model reads, at their
    defaults in the release it follows (config/flags/flags.go)."""

    scale_down_delay_after_add: timedelta = DELAY_AFTER_ADD
    max_scale_down_parallelism: int = MAX_SCALE_DOWN_PARALLELISM
    max_drain_parallelism: int = MAX_DRAIN_PARALLELISM
    frequent_loops_enabled: bool = True  # on by default since 1.35 (main.go, LoopTrigger)
    ignore_daemonsets_utilization: bool = False
    ignore_mirror_pods_utilization: bool = False

    def as_flags(self) -> dict[str, str | int | float | bool]:
        """The flags as an operator writes them on the command line."""
        return {
            "--scan-interval": f"{int(SCAN.total_seconds())}s",
            "--frequent-loops-enabled": self.frequent_loops_enabled,
            "--scale-down-delay-after-add": _go(self.scale_down_delay_after_add),
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


def _go(duration: timedelta) -> str:
    """A duration as Go prints it: 600 s → "10m0s"."""
    hours, rest = divmod(int(duration.total_seconds()), 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


@dataclass
class Asked:
    at: datetime
    registered: int  # nodes the group had when it asked


@dataclass
class Backoff:
    """Cluster Autoscaler's exponential node-group backoff (utils/backoff,
    exponential_backoff.go): the first failure backs a group off for `initial`; a failure
    after that backoff ended doubles it, up to `longest`; failures while it lasts do not;
    `reset` after its last failure the group starts again from `initial`."""

    initial: timedelta = INITIAL_BACKOFF
    longest: timedelta = MAX_BACKOFF
    reset: timedelta = BACKOFF_RESET
    # group → (duration, until, last failure)
    groups: dict[str, tuple[timedelta, datetime, datetime]] = field(default_factory=dict)

    def fail(self, group: str, now: datetime) -> datetime:
        """A failed scale-up of `group`: until when it is backed off."""
        duration = self.initial
        if group in self.groups:
            last, until, _ = self.groups[group]
            duration = min(2 * last, self.longest) if until < now else last
        self.groups[group] = (duration, now + duration, now)
        return now + duration

    def active(self, group: str, now: datetime) -> bool:
        return group in self.groups and self.groups[group][1] > now

    def forget_stale(self, now: datetime) -> None:
        """RemoveStaleBackoffData: groups whose last failure is `reset` old start afresh."""
        self.groups = {g: b for g, b in self.groups.items() if b[2] + self.reset >= now}

    def succeeded(self, group: str) -> None:
        """A scale-up of the group completed: its backoff is removed (RemoveBackoff)."""
        self.groups.pop(group, None)


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
    from the scenario's SKIP_NODES_WITH_* settings, as the functions read them."""

    system_pods: bool = True
    local_storage: bool = True

    @classmethod
    def of(cls, environment: dict[str, str]) -> DrainFlags:
        def read(name: str) -> bool:
            return environment.get(name, "true").lower() == "true"

        return cls(read("SKIP_NODES_WITH_SYSTEM_PODS"), read("SKIP_NODES_WITH_LOCAL_STORAGE"))


@dataclass(frozen=True)
class Option:
    """A group the pending pods could grow: by how many nodes, for which pods."""

    group: str
    nodes: int
    pods: list[dict[str, Any]]
    waste: float  # the share of the new nodes' CPU and memory the pods leave unused


@dataclass
class ReactiveBaseline:
    cluster: SimulatedCluster
    autoscaling: Any  # an Auto Scaling client the sandbox watches (refusals, write counts)
    groups: dict[str, GroupSpec]  # in the scenario's order
    expanders: list[Any]  # the EXPANDERS chain (nodescaler.config.ExpanderSpec)
    limits: Limits = field(default_factory=Limits)
    flags: DrainFlags = field(default_factory=DrainFlags)
    settings: Flags = field(default_factory=Flags)
    unneeded: dict[str, datetime] = field(default_factory=dict)  # node → since
    asked: dict[str, Asked] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    updated: dict[str, datetime] = field(default_factory=dict)  # group → last set
    draining: dict[str, str] = field(default_factory=dict)  # node → group
    drain_started: dict[str, datetime] = field(default_factory=dict)  # node → first eviction
    last_scale_up: datetime | None = None
    last_failed_scale_down: datetime | None = None
    last_scan: datetime | None = None
    refreshed: datetime | None = None  # the Auto Scaling cache's last regeneration

    @staticmethod
    def expander_chain(expanders: str | None) -> list[Any]:
        """The functions' EXPANDERS setting, or their default chain."""
        from nodescaler.config import DEFAULT_EXPANDERS, ExpanderSpec
        from pydantic import TypeAdapter

        if not expanders:
            return list(DEFAULT_EXPANDERS)
        return TypeAdapter(list[ExpanderSpec]).validate_json(expanders)

    def act(self, now: datetime) -> None:
        """What the scans since the last call do (one a SCAN; within one step of the
        sandbox they see the same world, so one stands for them but for how many empty
        nodes they may delete)."""
        scans = max(int((now - self.last_scan) / SCAN), 1) if self.last_scan else 1
        self.last_scan = now
        desired = self._desired()  # kept current by `_set` through the scan
        self.backoff.forget_stale(now)
        self._refresh(now, desired)
        self._time_out_provisioning(now, desired)
        # core/static_autoscaler.go, RunOnce: scale-down's planning runs in every loop,
        # one that scaled up too (its nodes stay tracked as unneeded); a scale-up only
        # puts the deletions in cooldown (isScaleDownInCooldown, --scale-down-delay-after-add)
        self._scale_up(now, desired)
        self._scale_down(now, desired, scans)

    def _refresh(self, now: datetime, desired: dict[str, int]) -> None:
        """The AWS provider's Auto Scaling cache, regenerated at most once a minute
        (aws_manager.go, Refresh; auto_scaling_groups.go, regenerate): each group's bounds
        as a scheduled action left them, and the failed launches it reads there. Between
        refreshes a failure is not seen."""
        if self.refreshed is not None and now - self.refreshed < CLOUD_REFRESH:
            return
        self.refresh_bounds(self.autoscaling)
        self._abort_failed_launches(now, desired)
        self.refreshed = now

    # --- scale-up ------------------------------------------------------------------------

    def _scale_up(self, now: datetime, desired: dict[str, int]) -> bool:
        store = self.cluster.store
        pending = [
            p
            for p in store.objects["pods"].values()
            if not p["spec"].get("nodeName")
            and any(c.get("reason") == "Unschedulable" for c in p["status"].get("conditions", []))
            and p["spec"].get("priority", 0) >= EXPENDABLE_BELOW
        ]
        if not pending:
            return False
        for group in self.groups:  # pods that will fit on nodes on their way wait for them
            upcoming = max(desired[group] - len(self.cluster.group_nodes(group)), 0)
            pending = _fill(pending, self._template(group), upcoming)
        options = [
            option
            for group in self.groups
            if not self.backoff.active(group, now)
            and (option := self._option(group, pending, desired))
        ]
        if not options:
            return False
        chosen = self._expand(options)
        for group, nodes in self._balance(chosen, options, desired).items():
            if nodes <= 0:
                continue
            registered = len(self.cluster.group_nodes(group))
            self._set(group, desired[group] + nodes, desired, now)  # pods unschedulable
            self.asked.setdefault(group, Asked(now, registered))
        self.last_scale_up = now
        return True

    def _balance(
        self, chosen: Option, options: list[Option], desired: dict[str, int]
    ) -> dict[str, int]:
        """The chosen option's nodes, split over the similar groups among the options that
        can take all of its pods when the chain ends in `balance`; else all to it."""
        spec = next((s for s in self.expanders if s.name == "balance"), None)
        if spec is None:
            return {chosen.group: chosen.nodes}
        ignored = IGNORED_LABELS | set(spec.ignored_labels)
        mine = self._shape(chosen.group)
        peers = [chosen.group] + [
            o.group
            for o in options
            if o.group != chosen.group
            and similar(mine, self._shape(o.group), ignored)
            and all(
                Room.of(self._template(o.group)).fits(*requests(p), p["spec"]) for p in chosen.pods
            )
        ]
        room: dict[str, int | None] = {
            g: min(self.groups[g].max - desired[g], self._under_limits(g, desired)) for g in peers
        }
        return even_split(chosen.nodes, {g: desired[g] for g in peers}, room, first=chosen.group)

    def _shape(self, group: str) -> NodeTemplate:
        return NodeTemplate.from_node(group, node_from_json(self._template(group)))

    def _option(
        self, group: str, pending: list[dict[str, Any]], desired: dict[str, int]
    ) -> Option | None:
        template = self._template(group)
        empty = Room.of(template)
        fits = [p for p in pending if empty.fits(*requests(p), p["spec"])]
        if not fits:
            return None
        room = min(self.groups[group].max - desired[group], self._under_limits(group, desired))
        nodes, taken, _ = _first_fit(fits, template, room)
        if nodes <= 0:
            return None
        cpu, memory = quantities(template["status"]["allocatable"])
        used = [requests(p) for p in taken]
        waste = (1 - sum(c for c, _ in used) / (cpu * nodes)) + (
            1 - sum(m for _, m in used) / (memory * nodes)
        )
        return Option(group, nodes, taken, waste)

    def _under_limits(self, group: str, desired: dict[str, int]) -> int:
        """How many nodes `group` may add under the cluster's limits."""
        room = [10**9]
        if self.limits.nodes is not None:
            room.append(self.limits.nodes - sum(desired.values()))
        for limit, size in (
            (self.limits.vcpus, lambda g: millicores(self.groups[g].capacity["cpu"]) // 1000),
            (
                self.limits.memory_gib,
                lambda g: whole_units(self.groups[g].capacity["memory"]) / 2**30,
            ),
        ):
            if limit is not None:
                used = sum(desired[g] * size(g) for g in self.groups)
                room.append(int((limit - used) // size(group)) if size(group) else 10**9)
        return min(room)

    def _expand(self, options: list[Option]) -> Option:
        """The expander chain narrows the options, first to last; the first left wins."""
        for spec in self.expanders:
            if len(options) == 1:
                break
            if spec.name == "priority":
                ranked = [spec.priorities[p] for p in sorted(spec.priorities, reverse=True)]
                best = min(_rank(o.group, ranked) for o in options)
                options = [o for o in options if _rank(o.group, ranked) == best]
            elif spec.name == "weighted-priority":
                ranked = [list(spec.tiers[p]) for p in sorted(spec.tiers, reverse=True)]
                best = min(_rank(o.group, ranked) for o in options)
                options = [o for o in options if _rank(o.group, ranked) == best]
            elif spec.name == "least-waste":
                least = min(o.waste for o in options)
                options = [o for o in options if o.waste <= least + 1e-9]
            elif spec.name == "most-pods":
                most = max(len(o.pods) for o in options)
                options = [o for o in options if len(o.pods) == most]
            elif spec.name == "random":
                options = options[:1]  # the first: a run must be repeatable
            # balance narrows nothing: it spreads the choice (`_balance`)
            # a custom expander (a Lambda function) is not modelled: the chain goes on
        return options[0]

    def _template(self, group: str) -> dict[str, Any]:
        """A new node of the group: like a live one, or, at zero, from its instance type
        and node-template tags, as Cluster Autoscaler builds it."""
        live = self.cluster.group_nodes(group)
        if live:
            return live[0]
        spec = self.groups[group]
        allocatable = dict(spec.capacity)
        labels = dict(spec.labels)
        taints = []
        for key, value in spec.tags.items():
            kind, _, name = key.removeprefix(TEMPLATE_TAG).partition("/")
            if not key.startswith(TEMPLATE_TAG):
                continue
            if kind == "label":
                labels[name] = value
            elif kind == "taint":
                taint_value, colon, effect = value.rpartition(":")
                if not colon:
                    taint_value, effect = value, "NoSchedule"
                taints.append({"key": name, "value": taint_value, "effect": effect})
            elif kind == "resources":
                allocatable[name] = value
        # an EKS managed node group's, from DescribeNodegroup: its labels over the tags', its
        # taints beside them (cloudprovider/aws/aws_manager.go, buildNodeFromTemplate)
        labels |= spec.eks_labels
        taints += spec.eks_taints
        return {
            "metadata": {"name": f"template-{group}", "labels": labels},
            "spec": {"taints": taints},
            "status": {
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def _abort_failed_launches(self, now: datetime, desired: dict[str, int]) -> None:
        """A group short of the instances it asked for whose scaling activities show a
        failure since it was last set: the instances that cannot come are given up (its
        desired capacity back to the instances it has) and the group backed off."""
        for group, (_, instances) in group_sizes(self.cluster.region).items():
            if group not in self.asked or len(instances) >= desired[group]:
                continue
            try:
                activities = self.autoscaling.describe_scaling_activities(
                    AutoScalingGroupName=group
                )["Activities"]
            except ClientError:  # as the provider does: assume the group can still launch
                continue
            if launch_failed_since(activities, self.updated.get(group, now)):
                del self.asked[group]
                self.backoff.fail(group, now)
                self._set(group, max(len(instances), self.groups[group].min), desired, now)

    def _time_out_provisioning(self, now: datetime, desired: dict[str, int]) -> None:
        for group, asked in list(self.asked.items()):
            registered = len(self.cluster.group_nodes(group))
            if registered >= desired[group]:
                del self.asked[group]
                self.backoff.succeeded(group)
            elif now - asked.at >= PROVISION_TIMEOUT:  # not registered in 15 min: backed off
                del self.asked[group]
                self.backoff.fail(group, now)
                self._set(group, max(registered, self.groups[group].min), desired, now)

    # --- scale-down ----------------------------------------------------------------------

    def _scale_down(self, now: datetime, desired: dict[str, int], scans: int = 1) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.cluster.store.objects["nodes"].values()}
        pods_on: dict[str, list[dict[str, Any]]] = {name: [] for name in nodes}
        for found in self.cluster.store.objects["pods"].values():
            if found["spec"].get("nodeName") in pods_on:
                pods_on[found["spec"]["nodeName"]].append(found)
        unneeded = self._plan(nodes, pods_on, now)
        self.unneeded = {n: self.unneeded.get(n, now) for n in unneeded}
        self._soft_taint(nodes, now)
        if self._may_scale_down(now):
            self._start_deletions(nodes, pods_on, desired, now, scans)
        self._carry_on_draining(nodes, pods_on, desired, now)

    def _plan(
        self,
        nodes: dict[str, dict[str, Any]],
        pods_on: dict[str, list[dict[str, Any]]],
        now: datetime,
    ) -> set[str]:
        """The nodes that are unneeded now (planner.go, categorizeNodes): not being deleted,
        at or below their utilization threshold, no pod on them that may not move (its
        budget's disruptions spent by the nodes found removable before it, pdb/basic.go), and
        their pods fitting on the other nodes, none of them a node found removable."""
        free = {  # each schedulable node's room, worked out once for every candidate
            name: _Place.of(node, pods_on[name])
            for name, node in nodes.items()
            if not node["spec"].get("unschedulable")
        }
        budgets = _Budgets.of(self.cluster.store)
        unneeded: set[str] = set()
        for name in sorted(nodes):
            node, pods = nodes[name], pods_on[name]
            if name in self.draining:  # filterOutOngoingDeletions
                continue
            used = utilization(node, pods, now, self.settings)
            if not underutilized(used, self._threshold_for(node)):
                continue
            if any(_blocks_drain(p, budgets, self.flags, now) for p in pods):
                continue
            moving = _to_move(pods)
            if not _fit_elsewhere(moving, name, free):
                continue
            budgets.remove(moving)
            free.pop(name, None)  # no pod goes to a node that goes
            unneeded.add(name)
        return unneeded

    def _soft_taint(self, nodes: dict[str, dict[str, Any]], now: datetime) -> None:
        """The DeletionCandidateOfClusterAutoscaler PreferNoSchedule taint on unneeded nodes,
        taken off the others, at most --max-bulk-soft-taint-count a loop, taken off first
        (actuation/softtaint.go, UpdateSoftDeletionTaints); nodes being deleted left alone."""
        budget = MAX_BULK_SOFT_TAINT_COUNT
        wanted = [(name, name in self.unneeded) for name in sorted(nodes)]
        for name, mark in sorted(wanted, key=lambda w: w[1]):  # needed ones first
            node = nodes[name]
            if name in self.draining or _soft_tainted(node) == mark:
                continue
            if budget <= 0:
                return
            budget -= 1
            taints = [t for t in node["spec"].get("taints") or [] if t["key"] != DELETION_CANDIDATE]
            if mark:
                taints.append(
                    {
                        "key": DELETION_CANDIDATE,
                        "value": str(int(now.timestamp())),
                        "effect": "PreferNoSchedule",
                    }
                )
            node["spec"]["taints"] = taints
            self.cluster.store.put("nodes", node)

    def _start_deletions(
        self,
        nodes: dict[str, dict[str, Any]],
        pods_on: dict[str, list[dict[str, Any]]],
        desired: dict[str, int],
        now: datetime,
        scans: int,
    ) -> None:
        """The unneeded nodes due, empty ones first, within the parallelism budgets
        (budgets/budgets.go, CropNodes: --max-scale-down-parallelism less the deletions in
        progress, of which --max-drain-parallelism may drain), never below a group's minimum."""
        due = sorted(
            (
                n
                for n, since in self.unneeded.items()
                if now - since >= self._unneeded_for(nodes[n])
            ),
            key=lambda n: (bool(_to_move(pods_on[n])), n),  # empty nodes first
        )
        # a step longer than a scan stands for its scans: each has its budget
        parallel = self.settings.max_scale_down_parallelism * scans - len(self.draining)
        drains = self.settings.max_drain_parallelism - sum(
            1 for n in self.draining if n in pods_on and _to_move(pods_on[n])
        )
        for name in due:
            group = self._group_of(nodes[name])
            leaving = sum(1 for g in self.draining.values() if g == group)
            if group not in self.groups or desired[group] - leaving <= self.groups[group].min:
                continue
            needs_drain = bool(_to_move(pods_on[name]))
            if parallel <= 0 or (needs_drain and min(drains, parallel) <= 0):
                continue  # the next scan takes the next ones
            parallel -= 1
            drains -= needs_drain
            self.draining[name] = group
            self.drain_started[name] = now
            del self.unneeded[name]

    def _carry_on_draining(
        self,
        nodes: dict[str, dict[str, Any]],
        pods_on: dict[str, list[dict[str, Any]]],
        desired: dict[str, int],
        now: datetime,
    ) -> None:
        for name, group in list(self.draining.items()):
            if name not in nodes:
                self._stop_draining(name)
            elif self._drained(nodes[name], pods_on[name]):
                instance_id = nodes[name]["spec"]["providerID"].rsplit("/", 1)[-1]
                self.autoscaling.terminate_instance_in_auto_scaling_group(
                    InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
                )
                desired[group] -= 1
                self._stop_draining(name)
            elif gives_up(self.drain_started[name], now):
                self._uncordon(nodes[name])
                self._stop_draining(name)
                self.last_failed_scale_down = now

    def _unneeded_for(self, node: dict[str, Any]) -> timedelta:
        """How long the node must be unneeded: its group's tag, else --scale-down-unneeded-time."""
        spec = self.groups.get(self._group_of(node))
        return unneeded_time(spec.tags) if spec else UNNEEDED

    def _threshold_for(self, node: dict[str, Any]) -> float:
        """Its group's utilization threshold tag, else --scale-down-utilization-threshold."""
        tags = spec.tags if (spec := self.groups.get(self._group_of(node))) else {}
        if has_gpu(node):
            return utilization_threshold(tags, GPU_UTILIZATION_TAG, GPU_UTILIZATION)
        return utilization_threshold(tags)

    def _may_scale_down(self, now: datetime) -> bool:
        """Not within --scale-down-delay-after-add of a scale-up, nor 3 minutes of a failed
        scale-down (static_autoscaler.go, isScaleDownInCooldown)."""
        delay = self.settings.scale_down_delay_after_add
        return not (
            (self.last_scale_up and now - self.last_scale_up < delay)
            or (
                self.last_failed_scale_down
                and now - self.last_failed_scale_down < DELAY_AFTER_FAILURE
            )
        )

    def _stop_draining(self, name: str) -> None:
        del self.draining[name]
        del self.drain_started[name]

    def _uncordon(self, node: dict[str, Any]) -> None:
        node["spec"]["unschedulable"] = False
        self.cluster.store.put("nodes", node)

    def _drained(self, node: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        """Cordons the node and evicts its pods, as a drain does; True once none is left.
        A pod a budget keeps is tried again at the next scan."""
        if not node["spec"].get("unschedulable"):
            node["spec"]["unschedulable"] = True
            self.cluster.store.put("nodes", node)
        for found in pods:
            with contextlib.suppress(ApiError):  # 429: the budget allows none now
                self.cluster.store.evict(found["metadata"]["namespace"], found["metadata"]["name"])
        return not any(
            p["spec"].get("nodeName") == node["metadata"]["name"]
            for p in self.cluster.store.objects["pods"].values()
        )

    # --- Auto Scaling ----------------------------------------------------------------------

    def refresh_bounds(self, autoscaling: Any) -> None:
        """Each group's MinSize and MaxSize as Auto Scaling has them now (a scheduled action
        changed them), as the AWS provider's group cache reads them at its refresh."""
        described = autoscaling.describe_auto_scaling_groups(
            AutoScalingGroupNames=list(self.groups)
        )["AutoScalingGroups"]
        for group in described:
            name = group["AutoScalingGroupName"]
            self.groups[name] = replace(
                self.groups[name], min=group["MinSize"], max=group["MaxSize"]
            )

    def _desired(self) -> dict[str, int]:
        # Read from moto's store: a scan's describe call would cost more than the model.
        return {name: size for name, (size, _) in group_sizes(self.cluster.region).items()}

    def _set(self, group: str, wanted: int, desired: dict[str, int], now: datetime) -> None:
        """The group's desired capacity, in AWS and in the scan's view of it."""
        self.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=wanted)
        desired[group] = wanted
        self.updated[group] = now

    def _group_of(self, node: dict[str, Any]) -> str:
        instance = self.cluster.instances.get(node["spec"]["providerID"].rsplit("/", 1)[-1])
        return instance.group if instance else ""


SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
UNNEEDED_TIME_TAG = TEMPLATE_TAG + "autoscaling-options/scaledownunneededtime"
UTILIZATION_TAG = TEMPLATE_TAG + "autoscaling-options/scaledownutilizationthreshold"
GPU_UTILIZATION_TAG = TEMPLATE_TAG + "autoscaling-options/scaledowngpuutilizationthreshold"
GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def unneeded_time(tags: dict[str, str]) -> timedelta:
    """A group's scale-down unneeded time: its tag (a Go duration, "2m0s"), overriding
    --scale-down-unneeded-time for it (cloudprovider/aws/README.md, "Auto-Discovery
    Setup"; aws_manager.go, GetOptions); the flag's when the tag is absent or unreadable."""
    written = tags.get(UNNEEDED_TIME_TAG, "")
    parts = GO_DURATION.findall(written)
    if not parts or "".join(n + u for n, u in parts) != written:
        return UNNEEDED
    return timedelta(seconds=sum(float(n) * GO_UNITS[u] for n, u in parts))


def utilization_threshold(
    tags: dict[str, str], tag: str = UTILIZATION_TAG, flag: float = UTILIZATION
) -> float:
    """A group's scale-down utilization threshold: its tag (a float), overriding
    --scale-down-utilization-threshold for it (cloudprovider/aws/README.md; aws_manager.go,
    GetAsgOptions, which keeps the flag's on a value it cannot parse); for a GPU node the
    scaledowngpuutilizationthreshold tag and --scale-down-gpu-utilization-threshold."""
    try:
        return float(tags[tag])
    except (KeyError, ValueError):
        return flag


def underutilized(utilization: float, threshold: float) -> bool:
    """Whether a node is eligible for scale-down: at or below the threshold
    (core/scaledown/eligibility/eligibility.go, isNodeAtOrBelowUtilizationThreshold: only
    `Utilization > threshold` keeps it). An empty node always is, even at a threshold of 0:
    the FAQ's "How can I prevent Cluster Autoscaler from scaling down non-empty nodes?"."""
    return utilization <= threshold


def has_gpu(node: dict[str, Any]) -> bool:
    """A GPU node as the AWS provider sees one (utils/gpu/gpu.go, NodeHasGpu): the
    k8s.amazonaws.com/accelerator label, or a GPU vendor's resource allocatable."""
    allocatable = node["status"].get("allocatable") or {}
    labelled = GPU_LABEL in (node["metadata"].get("labels") or {})
    return labelled or any(whole_units(allocatable.get(r, "0")) > 0 for r in GPU_RESOURCES)


def utilization(
    node: dict[str, Any], pods: list[dict[str, Any]], now: datetime, flags: Flags | None = None
) -> float:
    """A node's utilization as simulator/utilization/info.go's Calculate gives it: on a GPU
    node its GPUs' alone, else the larger of CPU and memory; each the requests summed over
    allocatable. With --ignore-daemonsets-utilization (or -mirror-pods-) those pods' requests
    leave both the sum and the allocatable (CalculateUtilizationOfResource); pods
    terminating past their grace period and 30 s are not counted (IsPodLongTerminating).
    A GPU node with no GPU allocatable yet counts as 0 (its GPUs unready)."""
    flags = flags or Flags()
    allocatable = node["status"]["allocatable"]
    cpu, memory = quantities(allocatable)
    if has_gpu(node):
        name = next((r for r in GPU_RESOURCES if r in allocatable), GPU_RESOURCES[0])
        totals = {name: whole_units(allocatable.get(name, "0"))}
    else:
        totals = {"cpu": cpu, "memory": memory}
    asked = dict.fromkeys(totals, 0)
    skipped = dict.fromkeys(totals, 0)
    for found in pods:
        wants = _asks(found)
        if (flags.ignore_daemonsets_utilization and _daemonset(found)) or (
            flags.ignore_mirror_pods_utilization and _mirror(found)
        ):
            for resource in totals:
                skipped[resource] += wants.get(resource, 0)
        elif not _long_terminating(found, now):
            for resource in totals:
                asked[resource] += wants.get(resource, 0)
    shares = [
        asked[r] / (totals[r] - skipped[r]) if totals[r] - skipped[r] > 0 else 0.0 for r in totals
    ]
    return max(shares)


def _daemonset(pod: dict[str, Any]) -> bool:
    owners = pod["metadata"].get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners)


def _mirror(pod: dict[str, Any]) -> bool:
    return "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})


def _long_terminating(pod: dict[str, Any], now: datetime) -> bool:
    deleted = pod["metadata"].get("deletionTimestamp")
    if not deleted:
        return False
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    since = datetime.fromisoformat(deleted.replace("Z", "+00:00"))
    return since + timedelta(seconds=grace) + LONG_TERMINATING_EXTRA < now


def _to_move(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods a node's removal reschedules: not its DaemonSet's nor its mirror pods, nor
    finished ones (simulator/drain.go, GetPodsToMove)."""
    return [
        p
        for p in pods
        if not _daemonset(p)
        and not _mirror(p)
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]


def _soft_tainted(node: dict[str, Any]) -> bool:
    return any(t["key"] == DELETION_CANDIDATE for t in node["spec"].get("taints") or [])


@dataclass
class _Budgets:
    """The PodDisruptionBudgets' disruptions left, as the planner spends them while it
    finds nodes removable (core/scaledown/pdb/basic.go, basicRemainingPdbTracker): read
    from each budget's status (disruptionsAllowed), one taken for each pod of a node
    found removable."""

    budgets: list[tuple[str, dict[str, str], list[int]]]  # namespace, matchLabels, [left]

    @classmethod
    def of(cls, store: Any) -> _Budgets:
        return cls(
            [
                (
                    b["metadata"].get("namespace", "default"),
                    (b["spec"].get("selector") or {}).get("matchLabels") or {},
                    [store.budget_status(b)["disruptionsAllowed"]],
                )
                for b in store.objects["poddisruptionbudgets"].values()
            ]
        )

    def matching(self, pod: dict[str, Any]) -> list[list[int]]:
        namespace, labels = pod["metadata"].get("namespace"), pod["metadata"].get("labels") or {}
        return [
            left
            for ns, selector, left in self.budgets
            if ns == namespace and all(labels.get(k) == v for k, v in selector.items())
        ]

    def short(self, pod: dict[str, Any]) -> bool:
        """simulator/drainability/rules/pdb/rule.go: a budget of the pod's allows none."""
        return any(left[0] < 1 for left in self.matching(pod))

    def remove(self, pods: list[dict[str, Any]]) -> None:
        for found in pods:
            for left in self.matching(found):
                left[0] -= 1


def _blocks_drain(pod: dict[str, Any], budgets: _Budgets, flags: DrainFlags, now: datetime) -> bool:
    """Whether the pod keeps its node, as the drainability rules decide, in their order
    (simulator/drainability/rules/rules.go, Default): mirror, long-terminating, DaemonSet,
    safe-to-evict "true" and finished pods never do; else a pod with no controller, a
    kube-system pod no budget selects until it is --blocking-system-pod-distruption-timeout
    old (rules/system/rule.go), one annotated safe-to-evict "false", one with an emptyDir or
    hostPath volume, or one a budget with no disruption left covers (rules/pdb/rule.go)."""
    metadata, spec = pod["metadata"], pod["spec"]
    annotations = metadata.get("annotations") or {}
    owners = metadata.get("ownerReferences") or []
    if _mirror(pod) or _long_terminating(pod, now) or _daemonset(pod):
        return False
    phase = pod["status"].get("phase")
    will_not_restart = phase == "Succeeded" and spec.get("restartPolicy") in ("Never", "OnFailure")
    if annotations.get(SAFE_TO_EVICT) == "true" or phase == "Failed" or will_not_restart:
        return False
    if not any(o.get("controller") for o in owners):
        return True
    if (
        flags.system_pods
        and metadata.get("namespace") == "kube-system"
        and not budgets.matching(pod)
        and not _older_than(pod, BSP_DISRUPTION_TIMEOUT, now)
    ):
        return True
    if annotations.get(SAFE_TO_EVICT) == "false":
        return True
    volumes = spec.get("volumes") or []
    if flags.local_storage and any("emptyDir" in v or "hostPath" in v for v in volumes):
        return True
    return budgets.short(pod)


def _older_than(pod: dict[str, Any], age: timedelta, now: datetime) -> bool:
    """Created more than `age` before `now` (a pod with no creation time never is)."""
    created = pod["metadata"].get("creationTimestamp")
    if not created:
        return False
    return now > datetime.fromisoformat(created.replace("Z", "+00:00")) + age


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


def launch_failed_since(activities: list[dict[str, Any]], since: datetime) -> bool:
    """Whether a scaling activity listed (newest first) since `since` failed, as the AWS
    provider's isNodeGroupAvailable reads them: it stops at the first one older."""
    for activity in activities:
        if activity["StartTime"] < since:
            return False
        if activity["StatusCode"] == "Failed":
            return True
    return False


def _rank(group: str, ranked: list[list[str]]) -> int:
    """The index of the first tier with a pattern matching the group (last: none)."""
    matching = (
        i for i, patterns in enumerate(ranked) if any(re.fullmatch(p, group) for p in patterns)
    )
    return next(matching, len(ranked))


def _first_fit(
    pods: list[dict[str, Any]], template: dict[str, Any], nodes: int | None
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """`pods` packed first-fit, largest first, on empty nodes like `template` (each pod
    checked against the node's labels, taints and extended resources): at most `nodes` of
    them (None: as many as it takes). How many it took, the pods placed and those left.
    A node that once had no room for a pod has none for a pod alike later (nodes only
    fill), so a pod's search starts where the last pod alike went: the same packing,
    without rescanning hundreds of full nodes for each of thousands of pods."""
    used: list[Room] = []
    placed, left = [], []
    first: dict[str, int] = {}  # a pod's likeness → the first node that may still fit it
    for found in sorted(pods, key=requests, reverse=True):
        cpu, memory = requests(found)
        alike = _likeness(found["spec"])
        start = first.get(alike, 0)
        index = next(
            (i for i in range(start, len(used)) if used[i].fits(cpu, memory, found["spec"])),
            None,
        )
        if index is None and (nodes is None or len(used) < nodes):
            new = Room.of(template)
            if new.fits(cpu, memory, found["spec"]):
                index = len(used)
                used.append(new)
        if index is None:
            first[alike] = len(used)
            left.append(found)
            continue
        first[alike] = index
        used[index].take(cpu, memory, found["spec"])
        placed.append(found)
    return len(used), placed, left


def _likeness(spec: dict[str, Any]) -> str:
    """What `Room.fits` reads of a pod: its requests, nodeSelector and tolerations."""
    return json.dumps(
        [
            [(c.get("resources") or {}).get("requests") for c in spec.get("containers", [])],
            spec.get("nodeSelector"),
            spec.get("tolerations"),
        ],
        sort_keys=True,
    )


def _fill(pods: list[dict[str, Any]], template: dict[str, Any], nodes: int) -> list[dict[str, Any]]:
    """The pods that do not fit on `nodes` empty nodes like `template`."""
    return _first_fit(pods, template, nodes)[2] if nodes else pods


def gives_up(started: datetime, now: datetime) -> bool:
    """Whether a drain that began evicting at `started` has run out of time: Cluster
    Autoscaler retries a refused eviction every 10 s for MaxPodEvictionTime (2 minutes),
    then fails the node's deletion (core/scaledown/actuation/drain.go)."""
    return now - started >= MAX_POD_EVICTION_TIME


@dataclass
class _Place:
    """What a node has left for pods that would move to it, as the scheduler's filters
    that matter here judge it (NodeResourcesFit with pod slots and extended resources,
    NodeAffinity with nodeSelector, TaintToleration): the baseline's own reading, so the
    yardstick does not lean on nodescaler's."""

    free: dict[str, int]  # cpu (millicores), memory (bytes), pods, extended resources
    labels: dict[str, str]
    taints: list[dict[str, str]]  # NoSchedule and NoExecute: the ones that filter
    # whether the node's labels and taints admit a pod, by the pod's id: a plan asks it of
    # every node for every pod it moves; the pod is kept with its answer, so no id is reused
    _admitted: dict[int, tuple[dict[str, Any], bool]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def of(cls, node: dict[str, Any], pods: list[dict[str, Any]]) -> _Place:
        allocatable = node["status"]["allocatable"]
        cpu, memory = quantities(allocatable)
        free = {k: whole_units(v) for k, v in allocatable.items() if k not in ("cpu", "memory")}
        place = cls(
            free | {"cpu": cpu, "memory": memory},
            node["metadata"].get("labels") or {},
            [
                t
                for t in node["spec"].get("taints") or []
                if t.get("effect", "NoSchedule") in ("NoSchedule", "NoExecute")
            ],
        )
        for found in pods:
            place.take(found)
        return place

    def fits(self, pod: dict[str, Any]) -> bool:
        return all(self.free.get(k, 0) >= n for k, n in _asks(pod).items()) and self.admits(pod)

    def admits(self, pod: dict[str, Any]) -> bool:
        """The pod's nodeSelector, required node affinity and tolerations let it here."""
        known = self._admitted.get(id(pod))
        if known is None:
            spec = pod["spec"]
            admitted = (
                all(self.labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())
                and _affinity_allows(spec, self.labels)
                and all(_tolerated(t, spec.get("tolerations") or []) for t in self.taints)
            )
            known = self._admitted[id(pod)] = (pod, admitted)
        return known[1]

    def take(self, pod: dict[str, Any]) -> None:
        for name, amount in _asks(pod).items():
            self.free[name] = self.free.get(name, 0) - amount


def _asks(pod: dict[str, Any]) -> dict[str, int]:
    """What a pod takes of a node: a pod slot, its CPU, memory and other requests."""
    cpu, memory = requests(pod)
    asked = {"pods": 1, "cpu": cpu, "memory": memory}
    for container in pod["spec"].get("containers", []):
        for name, amount in (container.get("resources") or {}).get("requests", {}).items():
            if name not in ("cpu", "memory"):
                asked[name] = asked.get(name, 0) + whole_units(amount)
    return asked


def _tolerated(taint: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    """A toleration matches a taint's effect (or all), its key (or all, with Exists and
    no key) and, with Equal, its value (core/v1 Toleration.ToleratesTaint)."""
    return any(
        t.get("effect", "") in ("", taint.get("effect", "NoSchedule"))
        and t.get("key", "") in ("", taint["key"])
        and (t.get("key") or t.get("operator") == "Exists")
        and (t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""))
        for t in tolerations
    )


def _affinity_allows(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """The pod's required node affinity: one of its terms with every expression met."""
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    if not required:
        return True
    return any(
        all(_meets(e, labels.get(e["key"])) for e in term.get("matchExpressions") or [])
        for term in required
    )


def _meets(expression: dict[str, Any], value: str | None) -> bool:
    """A node selector requirement (In, NotIn, Exists, DoesNotExist) on a label's value."""
    operator: str = expression["operator"]
    values: list[str] = expression.get("values") or []
    if operator in ("In", "NotIn"):
        return (value in values) == (operator == "In")
    if operator in ("Exists", "DoesNotExist"):
        return (value is not None) == (operator == "Exists")
    return False  # Gt, Lt: no pod here asks for them


def _fit_elsewhere(pods: list[dict[str, Any]], name: str, free: dict[str, _Place]) -> bool:
    """Whether `pods` fit, first-fit, on the other schedulable nodes, every candidate
    simulated on the cluster as it is: what its pods would take is kept beside the rooms
    (`taken`, a node's room copied when a pod first goes to it), never in them. A pod's
    requests are read once, not once a node; CPU and memory, then the rest, are compared
    before the node's filters (`_Place.admits`)."""
    if not pods:
        return True
    taken: dict[str, dict[str, int]] = {}
    for found in pods:
        asked = _asks(found)
        cpu, memory = asked["cpu"], asked["memory"]
        for other, place in free.items():
            room = taken.get(other, place.free)
            if room.get("cpu", 0) < cpu or room.get("memory", 0) < memory or other == name:
                continue
            if all(room.get(k, 0) >= n for k, n in asked.items()) and place.admits(found):
                room = taken[other] = dict(room)
                for resource, amount in asked.items():
                    room[resource] = room.get(resource, 0) - amount
                break
        else:
            return False
    return True
