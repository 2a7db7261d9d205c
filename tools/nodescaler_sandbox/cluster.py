"""The simulated cluster: nodes that follow the Auto Scaling groups' instances, and the
scheduler that binds pods to them.

An instance becomes a Ready node of its group's shape `boot` after launch (from the second
the scale request that started it took effect, `request`, not from the step that saw it;
the node's Ready condition says when, in its `lastTransitionTime`); when it leaves
its group its node goes, and the pods on it with it (unless a lifecycle hook holds it:
then it stays, cordoned or not, until `release`). The scheduler binds pending pods,
oldest first, to Ready, schedulable nodes with room for their CPU and memory requests, a
matching nodeSelector, tolerated taints and none of the pods a required anti-affinity on
the node or a host port keeps it from (`apart_keys`) (kube-scheduler's LeastAllocated spread, a
node with a PreferNoSchedule taint only when no other fits); a bound pod turns Ready
`ready_after` later. Pending pods are taken highest priority first (PrioritySort), then
oldest. A pod no node fits preempts, as kube-scheduler's DefaultPreemption does: on the
node where deleting the fewest pods of lower priority (lowest first) makes it fit, those
pods are deleted and it is bound; never a pod of its priority or higher, and none when
no node would then fit it (how the FAQ's overprovisioning placeholders, priority -1,
give way to real pods). The rest are marked Unschedulable, as kube-scheduler does.
Nodes equally allocated are taken by name, or with another `seed`, in an order drawn from
it and the names (kube-scheduler picks among equal scores at random). Names come from
moto's instance ids, themselves random, so a tie is not replayed node for node.
Everything here is the simulation, not the product.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from nodescaler.domain.cluster.predicates import ENFORCED_EFFECTS
from nodescaler.domain.cluster.quantity import millicores, whole_units
from nodescaler.domain.cluster.snapshot import Taint, Toleration, is_extended

from nodescaler_sandbox.kube.apiserver import Cluster, is_ready, is_terminating
from nodescaler_sandbox.kube.store import is_daemon
from nodescaler_sandbox.provision import group_sizes

NAMESPACE = "default"
HOSTNAME = "kubernetes.io/hostname"
BOUND_AT = "sandbox.nodescaler.io/bound-at"  # when the scheduler bound the pod
READY_AFTER = "sandbox.nodescaler.io/ready-after-seconds"
READY_AT = "sandbox.nodescaler.io/ready-at"  # when it turned Ready
UNSCHEDULABLE_SINCE = "sandbox.nodescaler.io/unschedulable-since"  # first found no node


def uid_order(found: dict[str, Any]) -> int:
    """Pods in the order they were created (the API server numbers their uids)."""
    return int(found["metadata"].get("uid", "0").rsplit("-", 1)[-1])


@dataclass
class Instance:
    """An instance the cluster has seen in an Auto Scaling group."""

    group: str
    launched: datetime
    boot: timedelta  # from launch to a Ready node: cold, or warm from the group's warm pool
    held: bool = False  # left its group, kept by a lifecycle hook until released


@dataclass
class SimulatedCluster:
    """The cluster in the loopback API server's store: nodes following the groups'
    instances, and the scheduler (see the module's docstring)."""

    store: Cluster
    boot: timedelta
    shapes: dict[str, dict[str, str]] = field(default_factory=dict)  # group → allocatable
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # group → node labels
    taints: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # group → taints
    # group → the taints its nodes register with, and how long after Ready each is lifted
    startup_taints: dict[str, list[tuple[dict[str, str], timedelta]]] = field(default_factory=dict)
    zones: dict[str, str] = field(default_factory=dict)  # group → its zone, where not the a
    instances: dict[str, Instance] = field(default_factory=dict)
    region: str = "eu-west-1"
    killed: list[str] = field(default_factory=list)  # pods that went with their instance
    # a new instance's boot when it comes from a warm pool (None: a cold boot)
    warm_boot: Callable[[str, datetime], timedelta | None] = lambda group, now: None
    nodes_removed: int = 0  # nodes that went with their instance
    seed: int = 0  # placement ties: 0 by name, another in an order drawn from it
    # told when each new instance's node will be Ready (the sandbox's clock stops then)
    booting: Callable[[datetime], None] = lambda ready: None
    # group → the second its scale request since the last sync took effect (`request`)
    requested: dict[str, datetime] = field(default_factory=dict)
    # the scenario's DaemonSets, as the API has them: a pod of each on every node it takes
    daemon_sets: list[dict[str, Any]] = field(default_factory=list)

    def request(self, group: str, at: datetime) -> None:
        """A scale request of the group takes effect at `at`: the instances the next sync
        finds new in it launched then (the earliest, of several requests between syncs)."""
        self.requested[group] = min(at, self.requested.get(group, at))

    def sync(self, now: datetime, *, holds: Callable[[str], bool]) -> list[str]:
        """Nodes come and go with the instances. Returns the instances that left their
        group since the last sync and that `holds(group)` keeps (a terminate hook)."""
        current = {
            instance_id: group
            for group, (_, instance_ids) in group_sizes(self.region).items()
            for instance_id in instance_ids
        }
        for instance_id, group in current.items():
            if instance_id not in self.instances:
                launched = self.requested.get(group, now)  # else Auto Scaling's own, now
                boot = self.warm_boot(group, launched)
                instance = Instance(group, launched, self.boot if boot is None else boot)
                self.instances[instance_id] = instance
                self.booting(instance.launched + instance.boot)
        self.requested.clear()
        held = []
        for instance_id, instance in list(self.instances.items()):
            if instance_id in current:
                ready = instance.launched + instance.boot
                if now >= ready and not self.node_of(instance_id):
                    self.store.put("nodes", self._node(instance_id, instance.group, ready))
                    self._start_daemons(instance_id, instance.group, ready)
                    for _, after in self.startup_taints.get(instance.group, ()):
                        self.booting(ready + after)  # its agent lifts it at its second
                self._lift_startup_taints(instance_id, instance.group, ready, now)
            elif instance.held:
                continue
            elif holds(instance.group) and self.node_of(instance_id):
                instance.held = True
                held.append(instance_id)
            else:
                self.release(instance_id)
        return held

    def _lift_startup_taints(
        self, instance_id: str, group: str, ready: datetime, now: datetime
    ) -> None:
        """Its agents have run: the startup taints due by now leave the node."""
        due = [t for t, after in self.startup_taints.get(group, ()) if now >= ready + after]
        name = self.node_of(instance_id)
        if not due or name is None:
            return
        node = self.store.objects["nodes"][("", name)]
        taints = node["spec"].get("taints") or []
        if any(t in taints for t in due):
            node["spec"]["taints"] = [t for t in taints if t not in due]
            self.store.put("nodes", node)

    def daemons_on(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The DaemonSets that put a pod on `node`: their nodeSelector matches its labels
        and they tolerate its NoSchedule and NoExecute taints (the DaemonSet controller's
        rule; a startup taint aside: the node's agents, its DaemonSets, lift it)."""
        if not self.daemon_sets:  # most scenarios: no Room to build, on the baseline's loop
            return []
        room = Room.of(node)
        return [d for d in self.daemon_sets if room.fits(0, 0, d["spec"]["template"]["spec"])]

    def _start_daemons(self, instance_id: str, group: str, ready: datetime) -> None:
        """A pod of each DaemonSet the node takes, running on it as it registers."""
        name, at = self.node_name(instance_id), ready.isoformat()
        for daemon in self.daemons_on(self._node(instance_id, group, ready, starting=False)):
            metadata = daemon["metadata"]
            owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": metadata["name"]}
            template = json.loads(json.dumps(daemon["spec"]["template"]))
            self.store.put(
                "pods",
                {
                    "metadata": template["metadata"]
                    | {
                        "name": f"{metadata['name']}-{name}",
                        "namespace": metadata["namespace"],
                        "ownerReferences": [owner | {"uid": metadata["uid"], "controller": True}],
                        "creationTimestamp": f"{ready:%Y-%m-%dT%H:%M:%SZ}",
                        "annotations": {BOUND_AT: at, READY_AT: at},
                    },
                    "spec": template["spec"] | {"nodeName": name},
                    "status": {
                        "phase": "Running",
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
            )

    def release(self, instance_id: str) -> None:
        """The instance is gone: its node, and the pods still bound to it, go too."""
        self.instances.pop(instance_id, None)
        node = self.node_of(instance_id)
        if node is None:
            return
        self.nodes_removed += 1
        with self.store.lock:
            for key, pod in list(self.store.objects["pods"].items()):
                if pod["spec"].get("nodeName") == node:
                    if not is_terminating(pod) and not is_daemon(pod):  # killed, not evicted
                        self.killed.append(pod["metadata"]["name"])
                    self.store.delete("pods", key)
            self.store.delete("nodes", ("", node))

    @staticmethod
    def node_name(instance_id: str) -> str:
        return f"ip-{instance_id}"

    def node_of(self, instance_id: str) -> str | None:
        name = self.node_name(instance_id)
        return name if ("", name) in self.store.objects["nodes"] else None

    def _node(
        self, instance_id: str, group: str, ready: datetime | None = None, *, starting: bool = True
    ) -> dict[str, Any]:
        name = self.node_name(instance_id)
        condition = {"type": "Ready", "status": "True"}
        metadata: dict[str, Any] = {
            "name": name,
            "labels": {"kubernetes.io/hostname": name} | self.labels.get(group, {}),
        }
        if ready is not None:  # as the kubelet reports it: when the node turned Ready
            condition["lastTransitionTime"] = (
                f"{ready:%Y-%m-%dT%H:%M:%SZ}"  # RFC 3339, to the second
            )
            metadata["creationTimestamp"] = condition["lastTransitionTime"]  # registered then
        return {
            "metadata": metadata,
            "spec": {
                "providerID": f"aws:///{self.zones.get(group, self.region + 'a')}/{instance_id}",
                "taints": self.taints.get(group, [])
                + [t for t, _ in self.startup_taints.get(group, ()) if starting],
            },
            "status": {
                "allocatable": self.shapes[group],
                "conditions": [condition],
            },
        }

    def empty_node(self, group: str) -> Room:
        """What a new node of the group would offer a pod, once started: less what its
        DaemonSets' pods take."""
        return Room.of(self.less_daemons(self._node("i-new", group, starting=False)))

    def less_daemons(self, node: dict[str, Any]) -> dict[str, Any]:
        """A node like `node`, its allocatable less what the DaemonSets' pods on such a
        node ask: what it offers other pods, as Cluster Autoscaler's template node holds
        them (`daemonset.GetDaemonSetPodsForNode`)."""
        daemons = self.daemons_on(node)
        if not daemons:
            return node
        cpu, memory = quantities(node["status"]["allocatable"])
        for daemon in daemons:
            taken = requests({"spec": daemon["spec"]["template"]["spec"]})
            cpu, memory = cpu - taken[0], memory - taken[1]
        left = {"cpu": f"{max(cpu, 0)}m", "memory": str(max(memory, 0))}
        return node | {
            "status": node["status"] | {"allocatable": node["status"]["allocatable"] | left}
        }

    def group_nodes(self, group: str) -> list[dict[str, Any]]:
        return [
            n
            for n in self.store.objects["nodes"].values()
            if (i := self.instances.get(n["spec"]["providerID"].rsplit("/", 1)[-1]))
            and i.group == group
        ]

    def instance_of_node(self, name: str) -> Instance | None:
        node = self.store.objects["nodes"].get(("", name))
        return (
            None
            if node is None
            else self.instances.get(node["spec"]["providerID"].rsplit("/", 1)[-1])
        )

    def ready_nodes(self, group: str) -> int:
        """Nodes of the group in service: Ready and not leaving."""
        return sum(
            1
            for n in self.group_nodes(group)
            if not self.instances[n["spec"]["providerID"].rsplit("/", 1)[-1]].held
        )

    def held(self, group: str) -> int:
        """Instances of the group a lifecycle hook holds in Terminating:Wait: out of
        service, still running and billed by EC2."""
        return sum(1 for i in self.instances.values() if i.group == group and i.held)

    def schedule(self, now: datetime) -> int:
        """One scheduling pass (see the module's docstring); returns the pods left pending."""
        with self.store.lock:
            nodes = self.store.objects["nodes"]
            rooms = {name: Room.of(node) for (_, name), node in nodes.items()}
            pending = []
            on_node: dict[str, list[dict[str, Any]]] = {name: [] for name in rooms}
            for found in self.store.objects["pods"].values():
                cpu, memory = requests(found)
                bound = found["spec"].get("nodeName")
                if bound in rooms:
                    rooms[bound].take(cpu, memory, found["spec"])
                    on_node[bound].append(found)
                    self._maybe_ready(found, now)
                elif not bound:
                    pending.append((found, cpu, memory))
            # TaintToleration outweighs LeastAllocated: a node with a PreferNoSchedule taint
            # (one a scale-in means to take) only when no other fits (pods here tolerate none)
            schedulable = {n: r for n, r in rooms.items() if r.schedulable}
            preferred = _Spread({n: r for n, r in schedulable.items() if not r.avoided}, self.seed)
            avoided = _Spread({n: r for n, r in schedulable.items() if r.avoided}, self.seed)
            left = 0
            # the lowest priority bound: a pod at or below it has no one to preempt
            lowest = min((priority(p) for on in on_node.values() for p in on), default=0)
            for found, cpu, memory in sorted(pending, key=_queue_order):
                node = preferred.place(cpu, memory, found["spec"]) or avoided.place(
                    cpu, memory, found["spec"]
                )
                if node is None and priority(found) > lowest:
                    node = self._preempt(found, schedulable, on_node, (preferred, avoided))
                if node is None:
                    left += 1
                    self._unschedulable(found, now)
                    continue
                on_node[node].append(found)
                lowest = min(lowest, priority(found))
                found["spec"]["nodeName"] = node
                found["metadata"].setdefault("annotations", {})[BOUND_AT] = now.isoformat()
                found["status"] = {"phase": "Running", "conditions": []}
                self._maybe_ready(found, now)
                self.store.put("pods", found)
            return left

    def _preempt(
        self,
        pod: dict[str, Any],
        rooms: dict[str, Room],
        on_node: dict[str, list[dict[str, Any]]],
        spreads: tuple[_Spread, ...],
    ) -> str | None:
        """The node where deleting the fewest pods of lower priority than `pod` (lowest
        priority, then newest, first) makes room for it: those pods deleted (their
        controllers make new, pending ones), its room taken for `pod`. None: no node would
        fit it even so, and nothing is deleted."""
        cpu, memory = requests(pod)
        best: tuple[int, str, list[dict[str, Any]]] | None = None
        for name, room in rooms.items():
            victims = _victims(pod, room, on_node[name])
            if victims is not None and (best is None or (len(victims), name) < best[:2]):
                best = (len(victims), name, victims)
        if best is None:
            return None
        _, name, victims = best
        for victim in victims:
            rooms[name].give(*requests(victim), victim["spec"])
            on_node[name].remove(victim)
            self.store.delete("pods", (victim["metadata"]["namespace"], victim["metadata"]["name"]))
        rooms[name].take(cpu, memory, pod["spec"])
        for spread in spreads:
            spread.refresh(name)
        return name

    def _maybe_ready(self, pod: dict[str, Any], now: datetime) -> None:
        annotations = pod["metadata"].get("annotations", {})
        if READY_AT in annotations or is_ready(pod):  # the annotation: no condition to read
            return
        bound_at = datetime.fromisoformat(annotations[BOUND_AT])
        if now - bound_at >= timedelta(seconds=float(annotations.get(READY_AFTER, 0))):
            pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            annotations[READY_AT] = now.isoformat()
            self.store.put("pods", pod)

    def _unschedulable(self, pod: dict[str, Any], now: datetime) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        if pod.get("status", {}).get("conditions") != [condition]:
            pod["status"] = {"phase": "Pending", "conditions": [condition]}
            pod["metadata"].setdefault("annotations", {}).setdefault(
                UNSCHEDULABLE_SINCE, now.isoformat()
            )
            self.store.put("pods", pod)


def priority(pod: dict[str, Any]) -> int:
    return int(pod["spec"].get("priority") or 0)


def _queue_order(entry: tuple[dict[str, Any], int, int]) -> tuple[int, int]:
    """kube-scheduler's PrioritySort: higher priority first, then the oldest."""
    return -priority(entry[0]), uid_order(entry[0])


def _victims(
    pod: dict[str, Any], room: Room, bound: list[dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """The fewest of `bound` (pods of lower priority than `pod`, lowest priority and then
    newest first; no DaemonSet's, made again on their node at once) whose going lets `pod`
    fit in `room`; None when even all of them would not (or the node takes no pods)."""
    cpu, memory = requests(pod)
    if not room.schedulable:
        return None
    lower = sorted(
        (p for p in bound if priority(p) < priority(pod) and not is_daemon(p)),
        key=lambda p: (priority(p), -uid_order(p)),
    )
    freed = Room(room.cpu, room.memory, room.labels, room.taints, True, dict(room.extended))
    victims: list[dict[str, Any]] = []
    for victim in [None, *lower]:
        if victim is not None:
            freed.give(*requests(victim), victim["spec"])
            victims.append(victim)
        if freed.fits(cpu, memory, pod["spec"]):
            return victims if victims else None  # fitting without a victim: not preemption
    return None


class _Spread:
    """kube-scheduler's default scoring, LeastAllocated: each pod goes to the node with
    the most CPU left that fits it (a heap, so thousands of pods on hundreds of nodes
    take milliseconds); equal nodes in the order `tie_order` gives them for `seed`."""

    def __init__(self, rooms: dict[str, Room], seed: int = 0) -> None:
        self.rooms = rooms
        self.seed = seed
        self.heap = [self._entry(name) for name in rooms]
        heapq.heapify(self.heap)

    def _entry(self, name: str) -> tuple[int, int, str, str]:
        room = self.rooms[name]
        return -room.cpu, -room.memory, tie_order(name, self.seed), name

    def place(self, cpu: int, memory: int, spec: dict[str, Any]) -> str | None:
        passed = []
        chosen = None
        while self.heap:
            entry = heapq.heappop(self.heap)
            room = self.rooms[entry[3]]
            if -entry[0] < cpu:  # the most room left is too little: none fits
                passed.append(entry)
                break
            if room.fits(cpu, memory, spec):
                room.take(cpu, memory, spec)
                chosen = entry[3]
                passed.append(self._entry(chosen))
                break
            passed.append(entry)
        for entry in passed:
            heapq.heappush(self.heap, entry)
        return chosen

    def refresh(self, name: str) -> None:
        """A node whose room changed outside `place` (a preemption): its entry made anew."""
        if name in self.rooms:
            self.heap = [e for e in self.heap if e[3] != name] + [self._entry(name)]
            heapq.heapify(self.heap)


def tie_order(name: str, seed: int) -> str:
    """Where a node comes among nodes equally allocated: its name for seed 0 (as the
    sandbox always had it), else a hash of the seed and its name, the same in every run."""
    return name if not seed else hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def quantities(resources: dict[str, str]) -> tuple[int, int]:
    """The CPU (millicores) and memory (bytes) of a resource list: requests, allocatable."""
    return millicores(resources.get("cpu", "0")), whole_units(resources.get("memory", "0"))


def extended_requests(spec: dict[str, Any]) -> dict[str, int]:
    """A pod's extended resources (nvidia.com/gpu: 1), summed over its containers."""
    asked: dict[str, int] = {}
    for container in spec.get("containers", []):
        for name, amount in container.get("resources", {}).get("requests", {}).items():
            if is_extended(name):
                asked[name] = asked.get(name, 0) + whole_units(amount)
    return asked


def requests(pod: dict[str, Any]) -> tuple[int, int]:
    """A pod's CPU (millicores) and memory (bytes) requests."""
    cpu = memory = 0
    for container in pod["spec"].get("containers", []):
        asked = quantities(container.get("resources", {}).get("requests", {}))
        cpu, memory = cpu + asked[0], memory + asked[1]
    return cpu, memory


@dataclass
class Room:
    """What is left on a node for the scheduler."""

    cpu: int
    memory: int
    labels: dict[str, str]
    taints: list[Taint]  # the ones the scheduler enforces
    schedulable: bool
    extended: dict[str, int] = field(default_factory=dict)  # nvidia.com/gpu: 1
    avoided: bool = False  # a PreferNoSchedule taint: scored below every other node
    apart: Counter[str] = field(default_factory=Counter)  # `apart_keys` of the pods on it

    @classmethod
    def of(cls, node: dict[str, Any]) -> Room:
        allocatable = node["status"]["allocatable"]
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"]
        )
        return cls(
            *quantities(allocatable),
            node["metadata"].get("labels", {}),
            [
                Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
                for t in node["spec"].get("taints") or []
                if t.get("effect", "NoSchedule") in ENFORCED_EFFECTS
            ],
            ready and not node["spec"].get("unschedulable"),
            {k: whole_units(v) for k, v in allocatable.items() if is_extended(k)},
            any(t.get("effect") == "PreferNoSchedule" for t in node["spec"].get("taints") or []),
        )

    def fits(self, cpu: int, memory: int, spec: dict[str, Any]) -> bool:
        """Room for the requests, the pod's nodeSelector matched, every NoSchedule or
        NoExecute taint tolerated."""
        selector = spec.get("nodeSelector") or {}
        tolerations = [
            Toleration(
                t.get("key", ""),
                t.get("operator", "Equal"),
                t.get("value", ""),
                t.get("effect", ""),
            )
            for t in spec.get("tolerations") or []
        ]
        return (
            self.cpu >= cpu
            and self.memory >= memory
            and all(self.extended.get(k, 0) >= n for k, n in extended_requests(spec).items())
            and all(self.labels.get(k) == v for k, v in selector.items())
            and all(any(t.tolerates(taint) for t in tolerations) for taint in self.taints)
            and not (self.apart and any(self.apart[key] > 0 for key in apart_keys(spec)))
        )

    def take(self, cpu: int, memory: int, spec: dict[str, Any]) -> None:
        self.cpu -= cpu
        self.memory -= memory
        for name, amount in extended_requests(spec).items():
            self.extended[name] = self.extended.get(name, 0) - amount
        if keys := apart_keys(spec):
            self.apart.update(keys)

    def give(self, cpu: int, memory: int, spec: dict[str, Any]) -> None:
        """A pod's requests back: it left the node."""
        self.cpu += cpu
        self.memory += memory
        for name, amount in extended_requests(spec).items():
            self.extended[name] = self.extended.get(name, 0) + amount
        if keys := apart_keys(spec):
            self.apart.subtract(keys)


def apart_keys(spec: dict[str, Any]) -> list[str]:
    """What a pod may share no node with, as the scheduler's InterPodAffinity and NodePorts
    filters judge it here: each required pod anti-affinity term on the node (the sandbox's
    are a workload's to its own pods, `workloads.pod`), and each host port it asks."""
    keys = []
    if affinity := spec.get("affinity"):
        anti = affinity.get("podAntiAffinity") or {}
        for term in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            if term["topologyKey"] == HOSTNAME:
                keys.append(json.dumps(term["labelSelector"], sort_keys=True))
    for container in spec.get("containers", ()):
        if ports := container.get("ports"):
            keys += [f"port {p['hostPort']}" for p in ports if p.get("hostPort")]
    return keys
