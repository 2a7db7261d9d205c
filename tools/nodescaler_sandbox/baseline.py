"""A reactive baseline in the manner of Cluster Autoscaler, scaling the same sandbox world,
so a scenario's summary can show what a metrics-driven policy buys.

A model of the FAQ's behaviour (shared/reference), not Cluster Autoscaler itself:
- it looks at pending pods only (no queues, no reservation targets), every 10 s; the
  world changes once a minute, so the scans within a minute see the same world and one
  scan a minute stands for them;
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
  take pods that need them. A group whose nodes have not registered 15 minutes after it
  asked (max-node-provision-time) is backed off for 5 minutes and its request taken back;
- scale-down: a node whose pods request under half its CPU and memory, and would fit on
  the other nodes, is unneeded, unless a pod on it may not be moved (utils/drain/drain.go,
  GetPodsForDeletionOnNodeDrain: no controller, a kube-system pod no budget selects, local
  storage, safe-to-evict "false"; `DrainFlags`); after 10 minutes unneeded (and 10
  minutes after the last scale-up) it is removed: the node cordoned and its pods evicted,
  those a PodDisruptionBudget keeps tried again at the next scan; once it is empty, the instance
  terminated with the desired capacity decremented. Empty nodes go together, non-empty
  ones one at a time; never below the group's minimum.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from nodescaler.adapters.k8s.objects import node_from_json
from nodescaler.domain.balance import IGNORED_LABELS, even_split, similar
from nodescaler.domain.quantity import millicores, whole_units
from nodescaler.domain.scheduling import NodeTemplate

from nodescaler_sandbox.cluster import Room, SimulatedCluster, quantities, requests
from nodescaler_sandbox.kube.apiserver import ApiError
from nodescaler_sandbox.provision import group_sizes

SCAN = timedelta(seconds=10)
UNNEEDED = timedelta(minutes=10)  # --scale-down-unneeded-time
DELAY_AFTER_ADD = timedelta(minutes=10)  # --scale-down-delay-after-add
UTILIZATION = 0.5  # --scale-down-utilization-threshold
PROVISION_TIMEOUT = timedelta(minutes=15)  # --max-node-provision-time
BACKOFF = timedelta(minutes=5)  # the initial node-group backoff


EXPENDABLE_BELOW = -10  # --expendable-pods-priority-cutoff
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"


@dataclass
class Asked:
    at: datetime
    registered: int  # nodes the group had when it asked


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
    unneeded: dict[str, datetime] = field(default_factory=dict)  # node → since
    asked: dict[str, Asked] = field(default_factory=dict)
    backed_off: dict[str, datetime] = field(default_factory=dict)  # group → until
    draining: dict[str, str] = field(default_factory=dict)  # node → group
    last_scale_up: datetime | None = None

    @staticmethod
    def expander_chain(expanders: str | None) -> list[Any]:
        """The functions' EXPANDERS setting, or their default chain."""
        from nodescaler.config import DEFAULT_EXPANDERS, ExpanderSpec
        from pydantic import TypeAdapter

        if not expanders:
            return list(DEFAULT_EXPANDERS)
        return TypeAdapter(list[ExpanderSpec]).validate_json(expanders)

    def act(self, now: datetime) -> None:
        desired = self._desired()
        self._time_out_provisioning(now, desired)
        if not self._scale_up(now, desired):
            self._scale_down(now, desired)

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
            if self.backed_off.get(group, now) <= now
            and (option := self._option(group, pending, desired))
        ]
        if not options:
            return False
        chosen = self._expand(options)
        for group, nodes in self._balance(chosen, options, desired).items():
            if nodes <= 0:
                continue
            registered = len(self.cluster.group_nodes(group))
            self._set(group, desired[group] + nodes)  # pods unschedulable
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
        return {
            "metadata": {"name": f"template-{group}", "labels": labels},
            "spec": {"taints": taints},
            "status": {
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def _time_out_provisioning(self, now: datetime, desired: dict[str, int]) -> None:
        for group, asked in list(self.asked.items()):
            registered = len(self.cluster.group_nodes(group))
            if registered >= desired[group]:
                del self.asked[group]
            elif now - asked.at >= PROVISION_TIMEOUT:
                del self.asked[group]
                self.backed_off[group] = now + BACKOFF
                self._set(
                    group, max(registered, self.groups[group].min)
                )  # not registered in 15 min: backed off

    # --- scale-down ----------------------------------------------------------------------

    def _scale_down(self, now: datetime, desired: dict[str, int]) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.cluster.store.objects["nodes"].values()}
        pods_on: dict[str, list[dict[str, Any]]] = {name: [] for name in nodes}
        for found in self.cluster.store.objects["pods"].values():
            if found["spec"].get("nodeName") in pods_on:
                pods_on[found["spec"]["nodeName"]].append(found)
        free = {  # each schedulable node's room, worked out once for every candidate
            name: _free(node, pods_on[name])
            for name, node in nodes.items()
            if not node["spec"].get("unschedulable")
        }
        budgets = list(self.cluster.store.objects["poddisruptionbudgets"].values())
        unneeded = {
            name
            for name, node in nodes.items()
            if _utilization(node, pods_on[name]) < UTILIZATION
            and not any(_blocks_drain(p, budgets, self.flags) for p in pods_on[name])
            and _fit_elsewhere(pods_on[name], name, free)
        }
        self.unneeded = {n: self.unneeded.get(n, now) for n in unneeded}
        if self.last_scale_up and now - self.last_scale_up < DELAY_AFTER_ADD:
            return
        due = sorted(
            (n for n, since in self.unneeded.items() if now - since >= UNNEEDED),
            key=lambda n: (bool(pods_on[n]), n),  # empty nodes first
        )
        for name in due:
            group = self._group_of(nodes[name])
            if (
                group not in self.groups
                or desired[group] - len(self.draining) <= self.groups[group].min
            ):
                continue
            if pods_on[name] and self.draining:
                continue  # one non-empty node at a time
            self.draining[name] = group
            del self.unneeded[name]
        for name, group in list(self.draining.items()):
            if name not in nodes:
                del self.draining[name]
            elif self._drained(nodes[name], pods_on[name]):
                instance_id = nodes[name]["spec"]["providerID"].rsplit("/", 1)[-1]
                self.autoscaling.terminate_instance_in_auto_scaling_group(
                    InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
                )
                desired[group] -= 1
                del self.draining[name]

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

    def _desired(self) -> dict[str, int]:
        # Read from moto's store: a scan's describe call would cost more than the model.
        return {name: size for name, (size, _) in group_sizes(self.cluster.region).items()}

    def _set(self, group: str, wanted: int) -> None:
        self.autoscaling.set_desired_capacity(AutoScalingGroupName=group, DesiredCapacity=wanted)

    def _group_of(self, node: dict[str, Any]) -> str:
        instance = self.cluster.instances.get(node["spec"]["providerID"].rsplit("/", 1)[-1])
        return instance.group if instance else ""


SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def _blocks_drain(pod: dict[str, Any], budgets: list[dict[str, Any]], flags: DrainFlags) -> bool:
    """Whether the pod keeps its node, as GetPodsForDeletionOnNodeDrain decides: mirror,
    DaemonSet, finished and safe-to-evict "true" pods never do; else a pod with no
    controller, a kube-system pod no kube-system budget selects, one with an emptyDir or
    hostPath volume, or one annotated safe-to-evict "false"."""
    metadata, spec = pod["metadata"], pod["spec"]
    annotations = metadata.get("annotations") or {}
    owners = metadata.get("ownerReferences") or []
    if "kubernetes.io/config.mirror" in annotations:
        return False
    if any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners):
        return False
    phase = pod["status"].get("phase")
    will_not_restart = phase == "Succeeded" and spec.get("restartPolicy") in ("Never", "OnFailure")
    if annotations.get(SAFE_TO_EVICT) == "true" or phase == "Failed" or will_not_restart:
        return False
    if not any(o.get("controller") for o in owners):
        return True
    namespace, labels = metadata.get("namespace"), metadata.get("labels") or {}
    if flags.system_pods and namespace == "kube-system":
        selected = [
            b
            for b in budgets
            if b["metadata"].get("namespace") == "kube-system"
            and all(
                labels.get(k) == v
                for k, v in ((b["spec"].get("selector") or {}).get("matchLabels") or {}).items()
            )
        ]
        if not selected:
            return True
    volumes = spec.get("volumes") or []
    if flags.local_storage and any("emptyDir" in v or "hostPath" in v for v in volumes):
        return True
    return annotations.get(SAFE_TO_EVICT) == "false"


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
    them (None: as many as it takes). How many it took, the pods placed and those left."""
    used: list[Room] = []
    placed, left = [], []
    for found in sorted(pods, key=requests, reverse=True):
        cpu, memory = requests(found)
        target = next((n for n in used if n.fits(cpu, memory, found["spec"])), None)
        if target is None and (nodes is None or len(used) < nodes):
            new = Room.of(template)
            if new.fits(cpu, memory, found["spec"]):
                target = new
                used.append(new)
        if target is None:
            left.append(found)
            continue
        target.take(cpu, memory, found["spec"])
        placed.append(found)
    return len(used), placed, left


def _fill(pods: list[dict[str, Any]], template: dict[str, Any], nodes: int) -> list[dict[str, Any]]:
    """The pods that do not fit on `nodes` empty nodes like `template`."""
    return _first_fit(pods, template, nodes)[2] if nodes else pods


def _utilization(node: dict[str, Any], pods: list[dict[str, Any]]) -> float:
    cpu, memory = quantities(node["status"]["allocatable"])
    used = [requests(p) for p in pods]
    return max(
        sum(c for c, _ in used) / cpu if cpu else 1.0,
        sum(m for _, m in used) / memory if memory else 1.0,
    )


def _free(node: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, int]:
    cpu, memory = quantities(node["status"]["allocatable"])
    for found in pods:
        used = requests(found)
        cpu, memory = cpu - used[0], memory - used[1]
    return cpu, memory


def _fit_elsewhere(pods: list[dict[str, Any]], name: str, free: dict[str, tuple[int, int]]) -> bool:
    """Whether `pods` fit, first-fit, in the room the other schedulable nodes have."""
    if not pods:
        return True
    rooms = [[cpu, memory] for other, (cpu, memory) in free.items() if other != name]
    for found in pods:
        cpu, memory = requests(found)
        room = next((r for r in rooms if r[0] >= cpu and r[1] >= memory), None)
        if room is None:
            return False
        room[0] -= cpu
        room[1] -= memory
    return True
