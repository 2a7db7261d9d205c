"""A reactive baseline in the manner of Cluster Autoscaler, scaling the same sandbox world, so a
scenario's summary can show what a metrics-driven policy buys.

A model of Cluster Autoscaler 1.37 (`RELEASE`: its rules as the
cluster-autoscaler-release-1.37 branch has them, each cited where it is modelled; its flags in
`Flags`), not Cluster Autoscaler itself:
- it looks at pending pods only (no queues, no reservation targets), every 10 s (`SCAN`,
  --scan-interval): the sandbox calls `act` at each scan, on a world that moves every 10 s too
  (`cadence`); where the world's step is longer, one call stands for the scans within the
  step;
- scale-up: the unschedulable pods (not the expendable: priority below -10) are offered to
  every group below its maximum, not backed off, with room under the cluster's limits
  (`--max-nodes-total`, `--cores-total`, `--memory-total`: the scenario's CLUSTER_MAX_*
  settings) and whose new node fits some of them; each option asks for as many nodes as a
  first-fit packing of its pods needs (after filling the nodes already on their way), capped
  by the group's maximum and the limits. The scenario's expander chain (the same EXPANDERS the
  functions read: priority, weighted-priority by tier, least-waste, most-pods, random as the
  first left) picks one; with `balance` last in the chain (--balance-similar-node-groups) its
  nodes are split over the options of similar groups that take all of its pods (nodescaler's
  own test of similarity), the smallest first, within each one's room. A new node is modelled
  on a live node of the group; a group at zero is read as Cluster Autoscaler reads it, from
  its instance type and its node-template tags (labels, taints, resources): without them it
  cannot take pods that need them; an EKS managed node group's labels and taints from
  DescribeNodegroup are added (the AWS provider's managed node group cache). A group whose
  launch failed is backed off at the Auto Scaling cache's next refresh (at most once a minute,
  when it also reads the groups' bounds), as the AWS provider learns it: it lists the group's
  scaling activities while the group has fewer instances than it asked for, and a Failed one
  since its last SetDesiredCapacity makes the missing instances placeholders that cannot come,
  which are deleted (desired back to the instances it has) and the group backed off
  (cloudprovider/aws/auto_scaling_groups.go, createPlaceholdersForDesiredNonStartedInstances
  and isNodeGroupAvailable). A group whose nodes have not registered 15 minutes after it asked
  (max-node-provision-time) is backed off too and its request taken back. A backoff lasts 5
  minutes, doubles at each failure after one ends, up to 30, is forgotten 3 hours after the
  last failure and ends when a scale-up of the group completes
  (utils/backoff/exponential_backoff.go; clusterstate.updateScaleRequests);
- scale-down, planned in every loop (one that scaled up too): a node whose utilization
  (`utilization`: its pods' requests over its allocatable, the larger of CPU and memory, its
  GPUs' alone on a GPU node) is at or below half (its group's scaledownutilizationthreshold
  tag when it has one), and whose pods would fit on the other nodes (none of them a node found
  removable before it), is unneeded, unless a pod on it may not be moved
  (simulator/drainability/rules: no controller, a kube-system pod no budget selects for its
  first hour, local storage, safe-to-evict "false", a budget with no disruption left, spent
  over the nodes found removable; `DrainFlags`). Unneeded nodes carry the
  DeletionCandidateOfClusterAutoscaler PreferNoSchedule taint, ten put or taken off a loop.
  After 10 minutes unneeded (its group's scaledownunneededtime tag when it has one; and
  --scale-down-delay-after-add after the last scale-up) it is removed: the node cordoned and
  its pods evicted, those a PodDisruptionBudget keeps tried again at each scan for up to 2
  minutes, after which the drain fails, the node is uncordoned and scale-down waits 3 minutes
  (the FAQ: "retrying, if needed, for up to 2 min"; --scale-down-delay-after-failure); once it
  is empty, the instance terminated with the desired capacity decremented. Up to 10 nodes are
  deleted at once (--max-scale-down-parallelism), one of them drained
  (--max-drain-parallelism), empty ones first; never below the group's minimum. Whether a
  node's pods would fit elsewhere is asked of every predicate the sandbox's pods and nodes
  carry (CPU, memory, pod slots, extended resources, nodeSelector, required node affinity,
  taints, a required anti-affinity on the node and host ports), with the baseline's own check,
  not nodescaler's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.adapters.k8s.conversion import node_from_json
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.quantity import millicores, whole_units
from nodescaler.domain.scale_up.balance import IGNORED_LABELS, even_split, similar

from nodescaler_sandbox.baseline_flags import (
    CLOUD_REFRESH,
    DELETION_CANDIDATE,
    EXPENDABLE_BELOW,
    GPU_UTILIZATION,
    MAX_BULK_SOFT_TAINT_COUNT,
    PROVISION_TIMEOUT,
    SCAN,
    TEMPLATE_TAG,
    UNNEEDED,
    DrainFlags,
    Flags,
    GroupSpec,
    Limits,
    managed_node_group,
)
from nodescaler_sandbox.baseline_log import say
from nodescaler_sandbox.baseline_scale_down import (
    GPU_UTILIZATION_TAG,
    Budgets,
    Place,
    blocks_drain,
    gives_up,
    has_gpu,
    in_cooldown,
    in_planner_order,
    moves_elsewhere,
    soft_tainted,
    to_move,
    underutilized,
    unneeded_time,
    utilization,
    utilization_threshold,
)
from nodescaler_sandbox.baseline_scale_up import (
    Backoff,
    Option,
    fill,
    first_fit,
    launch_failed_since,
    rank,
)
from nodescaler_sandbox.cluster import Room, SimulatedCluster, quantities, requests
from nodescaler_sandbox.kube.apiserver import ApiError
from nodescaler_sandbox.provision import group_sizes

# What the runner builds the baseline from, read here with it.
__all__ = [
    "SCAN",
    "DrainFlags",
    "Flags",
    "GroupSpec",
    "Limits",
    "ReactiveBaseline",
    "managed_node_group",
]


@dataclass
class ReactiveBaseline:
    cluster: SimulatedCluster
    autoscaling: Any  # an Auto Scaling client the sandbox watches (refusals, write counts)
    groups: dict[str, GroupSpec]  # in the scenario's order
    expanders: list[Any]  # the EXPANDERS chain (nodescaler.expander_settings.ExpanderSpec)
    limits: Limits = field(default_factory=Limits)
    flags: DrainFlags = field(default_factory=DrainFlags)
    settings: Flags = field(default_factory=Flags)
    unneeded: dict[str, datetime] = field(default_factory=dict)  # node → since
    unremovable: dict[str, datetime] = field(default_factory=dict)  # node → looked at again
    asked: dict[str, datetime] = field(default_factory=dict)  # group → its latest scale-up
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
        from nodescaler.expander_settings import DEFAULT_EXPANDERS, ExpanderSpec
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
            upcoming = max(desired[group] - len(self._started(group, now)), 0)
            pending = fill(pending, self._template(group), upcoming)
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
            self._set(group, desired[group] + nodes, desired, now, "Scale-up")  # pods unschedulable
            # each increase moves the request's time, and its provision timeout, to now
            # (clusterstate.go, registerOrUpdateScaleUpNoLock)
            self.asked[group] = now
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
        nodes, taken, _ = first_fit(fits, template, room)
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
                best = min(rank(o.group, ranked) for o in options)
                options = [o for o in options if rank(o.group, ranked) == best]
            elif spec.name == "weighted-priority":
                ranked = [list(spec.tiers[p]) for p in sorted(spec.tiers, reverse=True)]
                best = min(rank(o.group, ranked) for o in options)
                options = [o for o in options if rank(o.group, ranked) == best]
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

    def _started(self, group: str, now: datetime | None = None) -> list[dict[str, Any]]:
        """The group's registered nodes but those still starting (`Flags.starting`, at
        `now`: upcoming), or with a startup taint at all (None: no template)."""
        return [n for n in self.cluster.group_nodes(group) if not self.settings.starting(n, now)]

    def _template(self, group: str) -> dict[str, Any]:
        """A new node of the group: like a live one, or, at zero, from its instance type
        and node-template tags, as Cluster Autoscaler builds it."""
        live = self._started(group)
        if live:  # less its DaemonSets' pods, here and at zero, as CA's template holds them
            return self.cluster.less_daemons(live[0])
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
        return self.cluster.less_daemons(
            {
                "metadata": {"name": f"template-{group}", "labels": labels},
                "spec": {"taints": taints},
                "status": {
                    "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )

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
                wanted = max(len(instances), self.groups[group].min)
                self._set(group, wanted, desired, now, "Failed to launch, backing off")

    def _time_out_provisioning(self, now: datetime, desired: dict[str, int]) -> None:
        for group, asked_at in list(self.asked.items()):
            registered = len(self.cluster.group_nodes(group))
            if registered >= desired[group]:
                del self.asked[group]
                self.backoff.succeeded(group)
            elif now - asked_at >= PROVISION_TIMEOUT:  # not registered in 15 min: backed off
                del self.asked[group]
                self.backoff.fail(group, now)
                wanted = max(registered, self.groups[group].min)
                self._set(group, wanted, desired, now, "Provisioning timed out, backing off")

    # --- scale-down ----------------------------------------------------------------------

    def _scale_down(self, now: datetime, desired: dict[str, int], scans: int = 1) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.cluster.store.objects["nodes"].values()}
        pods_on: dict[str, list[dict[str, Any]]] = {name: [] for name in nodes}
        for found in self.cluster.store.objects["pods"].values():
            if found["spec"].get("nodeName") in pods_on:
                pods_on[found["spec"]["nodeName"]].append(found)
        unneeded = self._plan(nodes, pods_on, desired, now)
        self.unneeded = {n: self.unneeded.get(n, now) for n in unneeded}
        self._soft_taint(nodes, now)
        last = (self.last_scale_up, self.last_failed_scale_down)
        if not in_cooldown(now, *last, self.settings.scale_down_delay_after_add):
            self._start_deletions(nodes, pods_on, desired, now, scans)
        self._carry_on_draining(nodes, pods_on, desired, now)

    def _plan(
        self,
        nodes: dict[str, dict[str, Any]],
        pods_on: dict[str, list[dict[str, Any]]],
        desired: dict[str, int],
        now: datetime,
    ) -> set[str]:
        """The nodes unneeded now (planner.go, categorizeNodes): of a group above its minimum
        (PreFilteringScaleDownNodeProcessor; the others' nodes still take pods), not being
        deleted nor found unremovable within --unremovable-node-recheck-timeout (IsRecent),
        at or below their utilization threshold, no pod on them that may not move (budgets
        spent by the nodes found removable before, pdb/basic.go), their pods fitting on the
        other nodes, none found removable, beside those moved there, which move on with it
        (simulator/cluster.go: persistSuccessfulSimulations, true in planner.go)."""
        free = {  # each schedulable node's room, worked out once for every candidate
            name: Place.of(node, pods_on[name])
            for name, node in nodes.items()
            if not node["spec"].get("unschedulable")
        }
        budgets = Budgets.of(self.cluster.store)
        unneeded: set[str] = set()
        arrived: dict[str, list[dict[str, Any]]] = {}  # pods a removable node's moves put here
        self.unremovable = {n: t for n, t in self.unremovable.items() if t > now and n in nodes}
        for name in in_planner_order(pods_on, self.unneeded):
            node, pods = nodes[name], pods_on[name]
            spec = self.groups.get(group := self._group_of(node))
            if spec is None or desired.get(group, 0) <= spec.min or name in self.unremovable:
                continue  # pre-filtered out, or IsRecent
            if name in self.draining:  # filterOutOngoingDeletions
                continue
            used = utilization(node, pods, now, self.settings)  # as the cluster is
            if not underutilized(used, self._threshold_for(node)):
                continue
            pods = pods + arrived.get(name, [])  # the snapshot's node, moves kept
            moving = to_move(pods)
            blocked = any(blocks_drain(p, budgets, self.flags, now) for p in pods)
            moves = None if blocked else moves_elsewhere(moving, name, free)
            if moves is None:  # BlockedByPod, NoPlaceToMovePods: not looked at for a while
                self.unremovable[name] = now + self.settings.unremovable_node_recheck_timeout
                continue
            for other, arriving in moves.items():
                free[other].take(*arriving)
                arrived.setdefault(other, []).extend(arriving)
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
            if name in self.draining or soft_tainted(node) == mark:
                continue
            if budget <= 0:
                return
            budget -= 1
            taints = [t for t in node["spec"].get("taints") or [] if t["key"] != DELETION_CANDIDATE]
            if mark:
                at = str(int(now.timestamp()))
                taints.append(
                    {"key": DELETION_CANDIDATE, "value": at, "effect": "PreferNoSchedule"}
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
                if now - since > self._unneeded_for(nodes[n])  # strictly past: nodes.go
            ),
            key=lambda n: (bool(to_move(pods_on[n])), n),  # empty nodes first
        )
        # a step longer than a scan stands for its scans: each has its budget
        parallel = self.settings.max_scale_down_parallelism * scans - len(self.draining)
        drains = self.settings.max_drain_parallelism - sum(
            1 for n in self.draining if n in pods_on and to_move(pods_on[n])
        )
        for name in due:
            group = self._group_of(nodes[name])
            leaving = sum(1 for g in self.draining.values() if g == group)
            if group not in self.groups or desired[group] - leaving <= self.groups[group].min:
                continue
            needs_drain = bool(to_move(pods_on[name]))
            if parallel <= 0 or (needs_drain and min(drains, parallel) <= 0):
                continue  # the next scan takes the next ones
            parallel -= 1
            drains -= needs_drain
            self.draining[name] = group
            self.drain_started[name] = now
            unneeded = int((now - self.unneeded.pop(name)).total_seconds())
            kind = "node, pods to move" if needs_drain else "empty node"
            say(now, f"Scale-down: removing {kind} {name} of {group} (unneeded {unneeded}s)")

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
                say(now, f"Scale-down: node {name} removed, group {group} size {desired[group]}")
            elif gives_up(self.drain_started[name], now):
                say(now, f"Scale-down: failed to drain node {name} in time, given up")
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

    def _set(self, group: str, size: int, desired: dict[str, int], now: datetime, why: str) -> None:
        """The group's desired capacity, in AWS and in the scan's view of it; logged."""
        self.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=size)
        say(now, f"{why}: setting group {group} size to {size} (was {desired[group]})")
        desired[group] = size
        self.updated[group] = now

    def _group_of(self, node: dict[str, Any]) -> str:
        instance = self.cluster.instances.get(node["spec"]["providerID"].rsplit("/", 1)[-1])
        return instance.group if instance else ""
