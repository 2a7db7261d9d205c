"""A reactive baseline in the manner of Cluster Autoscaler, scaling the same sandbox world,
so a scenario's summary can show what a metrics-driven policy buys.

A model of the FAQ's behaviour (shared/reference), not Cluster Autoscaler itself:
- it looks at pending pods only (no queues, no reservation targets), every 10 s; the
  world changes once a minute, so the scans within a minute see the same world and one
  scan a minute stands for them;
- scale-up: the unschedulable pods go to the first group, by the scenario's priority
  expander when it has one (else in file order), whose nodes fit them and which is not
  backed off; it asks for as many nodes as a first-fit packing of the pods needs, after
  filling the nodes already on their way. A group whose nodes have not registered 15
  minutes after it asked (max-node-provision-time) is backed off for 5 minutes and its
  request taken back;
- scale-down: a node whose pods request under half its CPU and memory, and would fit on
  the other nodes, is unneeded; after 10 minutes unneeded (and 10 minutes after the last
  scale-up) it is removed: the node cordoned and its pods evicted, those a
  PodDisruptionBudget keeps tried again at the next scan; once it is empty, the instance
  terminated with the desired capacity decremented. Empty nodes go together, non-empty
  ones one at a time; never below the group's minimum.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from nodescaler_sandbox.cluster import SimulatedCluster, quantities, requests
from nodescaler_sandbox.kube.apiserver import ApiError
from nodescaler_sandbox.provision import group_sizes

SCAN = timedelta(seconds=10)
UNNEEDED = timedelta(minutes=10)  # --scale-down-unneeded-time
DELAY_AFTER_ADD = timedelta(minutes=10)  # --scale-down-delay-after-add
UTILIZATION = 0.5  # --scale-down-utilization-threshold
PROVISION_TIMEOUT = timedelta(minutes=15)  # --max-node-provision-time
BACKOFF = timedelta(minutes=5)  # the initial node-group backoff


@dataclass
class Asked:
    at: datetime
    registered: int  # nodes the group had when it asked


@dataclass
class ReactiveBaseline:
    cluster: SimulatedCluster
    autoscaling: Any  # an Auto Scaling client the sandbox watches (refusals, write counts)
    groups: list[str]  # in the expander's order
    bounds: dict[str, tuple[int, int]]
    unneeded: dict[str, datetime] = field(default_factory=dict)  # node → since
    asked: dict[str, Asked] = field(default_factory=dict)
    backed_off: dict[str, datetime] = field(default_factory=dict)  # group → until
    draining: dict[str, str] = field(default_factory=dict)  # node → group
    last_scale_up: datetime | None = None

    @staticmethod
    def ordered(groups: list[str], expanders: str | None) -> list[str]:
        """The groups by the priority expander's configuration, when there is one."""
        from nodescaler.config import ExpanderSpec, PriorityExpanderSpec
        from pydantic import TypeAdapter

        for spec in TypeAdapter(list[ExpanderSpec]).validate_json(expanders) if expanders else []:
            if isinstance(spec, PriorityExpanderSpec):
                ranked = [spec.priorities[p] for p in sorted(spec.priorities, reverse=True)]
                return sorted(groups, key=lambda group: _rank(group, ranked))
        return groups

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
        ]
        if not pending:
            return False
        for group in self.groups:  # pods that will fit on nodes on their way wait for them
            upcoming = max(desired[group] - len(self.cluster.group_nodes(group)), 0)
            pending = _fill(pending, self.cluster.shapes[group], upcoming)
        for group in self.groups:
            if self.backed_off.get(group, now) > now:
                continue
            shape, empty = self.cluster.shapes[group], self.cluster.empty_node(group)
            fits = [p for p in pending if empty.fits(*requests(p), p["spec"])]
            if not fits:
                continue
            _, high = self.bounds[group]
            wanted = min(desired[group] + _pack(fits, shape), high)
            if wanted <= desired[group]:
                continue
            registered = len(self.cluster.group_nodes(group))
            self._set(group, wanted)  # pods unschedulable
            self.asked.setdefault(group, Asked(now, registered))
            self.last_scale_up = now
            return True
        return False

    def _time_out_provisioning(self, now: datetime, desired: dict[str, int]) -> None:
        for group, asked in list(self.asked.items()):
            registered = len(self.cluster.group_nodes(group))
            if registered >= desired[group]:
                del self.asked[group]
            elif now - asked.at >= PROVISION_TIMEOUT:
                del self.asked[group]
                self.backed_off[group] = now + BACKOFF
                low, _ = self.bounds[group]
                self._set(group, max(registered, low))  # not registered in 15 min: backed off

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
        unneeded = {
            name
            for name, node in nodes.items()
            if _utilization(node, pods_on[name]) < UTILIZATION
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
            low, _ = self.bounds.get(group, (0, 0))
            if group not in desired or desired[group] - len(self.draining) <= low:
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


def _rank(group: str, ranked: list[list[str]]) -> int:
    matching = (
        i for i, patterns in enumerate(ranked) if any(re.fullmatch(p, group) for p in patterns)
    )
    return next(matching, len(ranked))


def _first_fit(
    pods: list[dict[str, Any]], shape: dict[str, str], nodes: int | None
) -> tuple[int, list[dict[str, Any]]]:
    """`pods` packed first-fit, largest first, on empty nodes of `shape`: at most `nodes`
    of them (None: as many as it takes). How many it took, and the pods left over."""
    room = quantities(shape)
    used: list[list[int]] = []
    left = []
    for found in sorted(pods, key=requests, reverse=True):
        cpu, memory = requests(found)
        target = next((n for n in used if n[0] >= cpu and n[1] >= memory), None)
        if target is None and (nodes is None or len(used) < nodes) and cpu <= room[0]:
            target = [room[0], room[1]]
            used.append(target)
        if target is None or memory > target[1]:
            left.append(found)
            continue
        target[0] -= cpu
        target[1] -= memory
    return len(used), left


def _pack(pods: list[dict[str, Any]], shape: dict[str, str]) -> int:
    """How many empty nodes of `shape` the pods take."""
    return _first_fit(pods, shape, None)[0]


def _fill(pods: list[dict[str, Any]], shape: dict[str, str], nodes: int) -> list[dict[str, Any]]:
    """The pods that do not fit on `nodes` empty nodes of `shape`."""
    return _first_fit(pods, shape, nodes)[1] if nodes else pods


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
