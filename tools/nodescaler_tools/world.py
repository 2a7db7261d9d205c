"""The world a scenario runs in, whoever scales it: a cluster whose nodes follow the Auto
Scaling groups' instances, the workloads that put pods and messages on it, and a scheduler.

Nodescaler and the reactive baseline scale the same world; it only reads the groups and
never decides anything. Everything here is the simulation, not the product:
- an instance becomes a Ready node of its group's shape `boot` after launch; when it leaves
  its group its node goes, and the pods on it with it (unless a lifecycle hook holds it:
  then it stays, cordoned or not, until `release`);
- a deployment keeps its replica count (a piecewise-linear curve over the scenario),
  replacing pods that were evicted or lost with their node;
- a queue's workers are pods, one per waiting task up to a cap, as a KEDA ScaledJob
  runs them; each Ready worker finishes a task every `task_minutes`;
- the scheduler binds pending pods, oldest first, to Ready, schedulable nodes with room
  for their CPU and memory requests and a matching nodeSelector; a bound pod turns Ready
  `ready_after` later. The rest are marked Unschedulable, as kube-scheduler does.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from nodescaler.domain.cluster import Taint, Toleration, millicores, whole_units
from nodescaler.domain.scheduling import ENFORCED_EFFECTS

from nodescaler_tools.kube.apiserver import Cluster, is_ready, is_terminating
from nodescaler_tools.provision import (
    create_group,
    fill_queue,
    group_sizes,
    launch_configuration,
    moto_queue,
)

if TYPE_CHECKING:
    from nodescaler_tools.sandbox import Sandbox
    from nodescaler_tools.scenario import Scenario

NAMESPACE = "default"
BOUND_AT = "sandbox.nodescaler.io/bound-at"  # when the scheduler bound the pod
READY_AFTER = "sandbox.nodescaler.io/ready-after-seconds"
READY_AT = "sandbox.nodescaler.io/ready-at"  # when it turned Ready


@dataclass
class Instance:
    """An instance the cluster has seen in an Auto Scaling group."""

    group: str
    launched: datetime
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
    instances: dict[str, Instance] = field(default_factory=dict)
    region: str = "eu-west-1"

    def sync(self, now: datetime, *, holds: Callable[[str], bool]) -> list[str]:
        """Nodes come and go with the instances. Returns the instances that left their
        group since the last sync and that `holds(group)` keeps (a terminate hook)."""
        current = {
            instance_id: group
            for group, (_, instance_ids) in group_sizes(self.region).items()
            for instance_id in instance_ids
        }
        for instance_id, group in current.items():
            self.instances.setdefault(instance_id, Instance(group, now))
        held = []
        for instance_id, instance in list(self.instances.items()):
            if instance_id in current:
                if now - instance.launched >= self.boot and not self.node_of(instance_id):
                    self.store.put("nodes", self._node(instance_id, instance.group))
            elif instance.held:
                continue
            elif holds(instance.group) and self.node_of(instance_id):
                instance.held = True
                held.append(instance_id)
            else:
                self.release(instance_id)
        return held

    def release(self, instance_id: str) -> None:
        """The instance is gone: its node, and the pods still bound to it, go too."""
        self.instances.pop(instance_id, None)
        node = self.node_of(instance_id)
        if node is None:
            return
        with self.store.lock:
            for key, pod in list(self.store.objects["pods"].items()):
                if pod["spec"].get("nodeName") == node:
                    self.store.delete("pods", key)
            self.store.delete("nodes", ("", node))

    @staticmethod
    def node_name(instance_id: str) -> str:
        return f"ip-{instance_id}"

    def node_of(self, instance_id: str) -> str | None:
        name = self.node_name(instance_id)
        return name if ("", name) in self.store.objects["nodes"] else None

    def _node(self, instance_id: str, group: str) -> dict[str, Any]:
        name = self.node_name(instance_id)
        return {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name} | self.labels.get(group, {}),
            },
            "spec": {
                "providerID": f"aws:///{self.region}a/{instance_id}",
                "taints": self.taints.get(group, []),
            },
            "status": {
                "allocatable": self.shapes[group],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def empty_node(self, group: str) -> Room:
        """What a new node of the group would offer a pod."""
        return Room.of(self._node("i-new", group))

    def group_nodes(self, group: str) -> list[dict[str, Any]]:
        return [
            n
            for n in self.store.objects["nodes"].values()
            if (i := self.instances.get(n["spec"]["providerID"].rsplit("/", 1)[-1]))
            and i.group == group
        ]

    def ready_nodes(self, group: str) -> int:
        """Nodes of the group in service: Ready and not leaving."""
        return sum(
            1
            for n in self.group_nodes(group)
            if not self.instances[n["spec"]["providerID"].rsplit("/", 1)[-1]].held
        )

    def schedule(self, now: datetime) -> int:
        """One scheduling pass (see the module's docstring); returns the pods left pending."""
        with self.store.lock:
            nodes = self.store.objects["nodes"]
            rooms = {name: Room.of(node) for (_, name), node in nodes.items()}
            pending = []
            for found in self.store.objects["pods"].values():
                cpu, memory = requests(found)
                bound = found["spec"].get("nodeName")
                if bound in rooms:
                    rooms[bound].take(cpu, memory)
                    self._maybe_ready(found, now)
                elif not bound:
                    pending.append((found, cpu, memory))
            spread = _Spread({n: r for n, r in rooms.items() if r.schedulable})
            left = 0
            for found, cpu, memory in sorted(pending, key=lambda entry: _uid(entry[0])):
                node = spread.place(cpu, memory, found["spec"])
                if node is None:
                    left += 1
                    self._unschedulable(found)
                    continue
                found["spec"]["nodeName"] = node
                found["metadata"].setdefault("annotations", {})[BOUND_AT] = now.isoformat()
                found["status"] = {"phase": "Running", "conditions": []}
                self._maybe_ready(found, now)
                self.store.put("pods", found)
            return left

    def _maybe_ready(self, pod: dict[str, Any], now: datetime) -> None:
        annotations = pod["metadata"].get("annotations", {})
        if READY_AT in annotations or is_ready(pod):  # the annotation: no condition to read
            return
        bound_at = datetime.fromisoformat(annotations[BOUND_AT])
        if now - bound_at >= timedelta(seconds=float(annotations.get(READY_AFTER, 0))):
            pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            annotations[READY_AT] = now.isoformat()
            self.store.put("pods", pod)

    def _unschedulable(self, pod: dict[str, Any]) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        if pod.get("status", {}).get("conditions") != [condition]:
            pod["status"] = {"phase": "Pending", "conditions": [condition]}
            self.store.put("pods", pod)


class _Spread:
    """kube-scheduler's default scoring, LeastAllocated: each pod goes to the node with
    the most CPU left that fits it (a heap, so thousands of pods on hundreds of nodes
    take milliseconds)."""

    def __init__(self, rooms: dict[str, Room]) -> None:
        self.rooms = rooms
        self.heap = [(-room.cpu, -room.memory, name) for name, room in rooms.items()]
        heapq.heapify(self.heap)

    def place(self, cpu: int, memory: int, spec: dict[str, Any]) -> str | None:
        passed = []
        chosen = None
        while self.heap:
            entry = heapq.heappop(self.heap)
            room = self.rooms[entry[2]]
            if -entry[0] < cpu:  # the most room left is too little: none fits
                passed.append(entry)
                break
            if room.fits(cpu, memory, spec):
                room.take(cpu, memory)
                chosen = entry[2]
                passed.append((-room.cpu, -room.memory, entry[2]))
                break
            passed.append(entry)
        for entry in passed:
            heapq.heappush(self.heap, entry)
        return chosen


def quantities(resources: dict[str, str]) -> tuple[int, int]:
    """The CPU (millicores) and memory (bytes) of a resource list: requests, allocatable."""
    return millicores(resources.get("cpu", "0")), whole_units(resources.get("memory", "0"))


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
            and all(self.labels.get(k) == v for k, v in selector.items())
            and all(any(t.tolerates(taint) for t in tolerations) for taint in self.taints)
        )

    def take(self, cpu: int, memory: int) -> None:
        self.cpu -= cpu
        self.memory -= memory


# --- workloads -----------------------------------------------------------------------


def pod(
    name: str,
    app: str,
    cpu: str,
    memory: str,
    *,
    ready_after_seconds: float = 0,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = [t | {"operator": "Equal"} for t in tolerations]
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": app},
            "annotations": {READY_AFTER: str(ready_after_seconds)},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def replicas_at(curve: Iterable[tuple[float, int]], minute: float) -> int:
    """The curve's value at `minute`: linear between its points, flat beyond them."""
    points = sorted(curve)
    if minute <= points[0][0]:
        return points[0][1]
    for (m0, r0), (m1, r1) in pairwise(points):
        if minute <= m1:
            return round(r0 + (r1 - r0) * (minute - m0) / (m1 - m0))
    return points[-1][1]


@dataclass
class Deployment:
    """Keeps `replicas_at(curve, minute)` pods of one shape: creates the missing, removes
    the newest extra (pending ones first), as a ReplicaSet scales down."""

    name: str
    cpu: str
    memory: str
    curve: list[tuple[float, int]]
    ready_after_seconds: float = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    created: int = 0

    def reconcile(self, store: Cluster, minute: float) -> None:
        self.resize(store, replicas_at(self.curve, minute))

    def resize(self, store: Cluster, wanted: int) -> None:
        with store.lock:
            mine = [
                (key, p)
                for key, p in store.objects["pods"].items()
                if p["metadata"].get("labels", {}).get("app") == self.name and not is_terminating(p)
            ]
            for _ in range(wanted - len(mine)):
                store.put("pods", self._pod())
            extra = len(mine) - wanted
            if extra > 0:
                newest_pending_first = sorted(
                    mine, key=lambda kp: (bool(kp[1]["spec"].get("nodeName")), -_uid(kp[1]))
                )
                for key, _ in newest_pending_first[:extra]:
                    store.delete("pods", key)

    def _pod(self) -> dict[str, Any]:
        self.created += 1
        return pod(
            f"{self.name}-{self.created}",
            self.name,
            self.cpu,
            self.memory,
            ready_after_seconds=self.ready_after_seconds,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
        )

    def pods(self, store: Cluster) -> list[dict[str, Any]]:
        return [
            p
            for p in store.objects["pods"].values()
            if p["metadata"].get("labels", {}).get("app") == self.name
        ]


def _uid(found: dict[str, Any]) -> int:
    return int(found["metadata"].get("uid", "0").rsplit("-", 1)[-1])


@dataclass
class QueueWork:
    """Tasks arriving in an SQS queue, each taken by a worker pod of its own (as a KEDA
    ScaledJob runs them): a task is done `task_minutes` after its worker turned Ready, and
    its message deleted; a worker lost with its node leaves its task to a new one."""

    queue: str
    arrivals: dict[float, int]  # minute → tasks sent
    task_minutes: float
    workers: Deployment
    max_workers: int

    @property
    def task_time(self) -> timedelta:
        return timedelta(minutes=self.task_minutes)

    def finish(self, store: Cluster, now: datetime) -> int:
        """Removes the workers whose task is done; how many."""
        done = 0
        with store.lock:
            for found in self.workers.pods(store):
                ready_at = found["metadata"].get("annotations", {}).get(READY_AT)
                if ready_at and now - datetime.fromisoformat(ready_at) >= self.task_time:
                    store.delete(
                        "pods", (found["metadata"]["namespace"], found["metadata"]["name"])
                    )
                    done += 1
        return done


class World:
    """A scenario's workloads on the sandbox's cluster, stepped minute by minute."""

    def __init__(self, scenario: Scenario, box: Sandbox, *, hooks: bool) -> None:
        self.scenario = scenario
        self.box = box
        self.cluster = box.cluster
        self.minute = 0.0
        self.deployments = [
            Deployment(
                d.name,
                d.cpu,
                d.memory,
                sorted(d.replicas.items()),
                d.ready_after_seconds,
                dict(d.node_selector),
                [t.model_dump() for t in d.tolerations],
            )
            for d in scenario.deployments
        ]
        self.queues = [
            QueueWork(
                q.name,
                dict(q.tasks),
                q.task_minutes,
                Deployment(
                    f"{q.name}-worker",
                    q.worker.cpu,
                    q.worker.memory,
                    [(0, 0)],
                    q.worker.ready_after_seconds,
                    dict(q.worker.node_selector),
                    [t.model_dump() for t in q.worker.tolerations],
                ),
                q.max_workers,
            )
            for q in scenario.queues
        ]
        self.budget_shortfalls = 0  # world minutes a disruption budget had too few healthy pods
        self._budgets_met: set[str] = set()
        self._create(hooks)
        self.cluster.store.scale_of = self._scale_of

    def _scale_of(self, budget: dict[str, Any]) -> int | None:
        """The replicas of the deployment a budget selects, as the disruption controller
        reads them from its scale."""
        selected = budget["spec"].get("selector", {}).get("matchLabels", {}).get("app")
        return next(
            (replicas_at(d.curve, self.minute) for d in self.deployments if d.name == selected),
            None,
        )

    def _create(self, hooks: bool) -> None:
        autoscaling, ec2 = self.box.client("autoscaling"), self.box.client("ec2")
        for group in self.scenario.groups:
            launch_configuration(autoscaling, f"{group.name}-lc", group.instance_type)
            create_group(
                autoscaling,
                group.name,
                region=self.cluster.region,
                tags={"nodescaler/enabled": "true", "nodescaler/policy": group.policy},
                min_size=group.min,
                max_size=group.max,
                launch_configuration=f"{group.name}-lc",
            )
            self.cluster.shapes[group.name] = (
                group.node.model_dump() if group.node else _shape(ec2, group.instance_type)
            )
            self.cluster.labels[group.name] = dict(group.labels)
            self.cluster.taints[group.name] = [t.model_dump() for t in group.taints]
            if group.no_capacity:
                self.box.no_capacity.add(group.name)
            if group.drain and hooks:
                self.box.hook(group.name)
        sqs = self.box.client("sqs")
        for queue in self.queues:
            sqs.create_queue(QueueName=queue.queue)
        for spec in self.scenario.deployments:
            if spec.disruption_budget:
                budget = spec.disruption_budget.model_dump(by_alias=True, exclude_none=True)
                self.cluster.store.put(
                    "poddisruptionbudgets",
                    {
                        "metadata": {"name": spec.name, "namespace": NAMESPACE},
                        "spec": budget | {"selector": {"matchLabels": {"app": spec.name}}},
                    },
                )
        cloudwatch = self.box.client("cloudwatch")
        for alarm in self.scenario.alarms:
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

    def step(self, minute: int) -> None:
        """The workloads' minute: tasks arrive and are worked, deployments follow their
        curves, nodes follow the instances, the scheduler binds."""
        self.minute = minute
        for queue in self.queues:
            if arrived := sum(n for at, n in queue.arrivals.items() if minute - 1 < at <= minute):
                fill_queue(self.box.client("sqs"), queue.queue, arrived, region=self.cluster.region)
            done = queue.finish(self.cluster.store, self.box.clock.now())
            _consume(queue.queue, done, self.cluster.region)
        self.react()

    def react(self) -> None:
        """What the cluster's controllers do at once: replace lost pods, follow the
        instances, bind pending pods, count budgets short of healthy pods."""
        for deployment in self.deployments:
            deployment.reconcile(self.cluster.store, self.minute)
        for queue in self.queues:
            waiting = _messages(queue.queue, self.cluster.region)
            queue.workers.resize(self.cluster.store, min(waiting, queue.max_workers))
        self.box.sync(self.react)
        self.cluster.schedule(self.box.clock.now())
        self._check_budgets()

    def _check_budgets(self) -> None:
        for (_, name), budget in self.cluster.store.objects["poddisruptionbudgets"].items():
            status = self.cluster.store.budget_status(budget)
            met = status["currentHealthy"] >= status["desiredHealthy"]
            if met:
                self._budgets_met.add(name)
            elif name in self._budgets_met:  # short after it was first met: a disruption
                self.budget_shortfalls += 1

    def queue_depths(self) -> dict[str, int]:
        return {q.queue: _messages(q.queue, self.cluster.region) for q in self.queues}

    def pending(self) -> int:
        return sum(
            1 for p in self.cluster.store.objects["pods"].values() if not p["spec"].get("nodeName")
        )

    def reservation(self, group: str) -> tuple[float, float]:
        """The share of the group's Ready nodes' CPU and memory that pods request, in %."""
        nodes = {n["metadata"]["name"]: n for n in self.cluster.group_nodes(group)}
        if not nodes:
            return 0.0, 0.0
        used = [
            requests(p)
            for p in self.cluster.store.objects["pods"].values()
            if p["spec"].get("nodeName") in nodes
        ]
        rooms = [Room.of(n) for n in nodes.values()]
        return (
            100 * sum(c for c, _ in used) / sum(r.cpu for r in rooms),
            100 * sum(m for _, m in used) / sum(r.memory for r in rooms),
        )


def _shape(ec2: Any, instance_type: str) -> dict[str, str]:
    """A node's allocatable from its instance type, as EC2 describes it."""
    described = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    return {
        "cpu": str(described["VCpuInfo"]["DefaultVCpus"]),
        "memory": f"{described['MemoryInfo']['SizeInMiB']}Mi",
        "pods": "110",
    }


def _store(queue: str, region: str) -> Any:
    """moto's queue, read and worked directly: the workers are the simulated workload, not
    the product, and through moto's server each receive rescans the whole queue."""
    return moto_queue(queue, region=region)


def _messages(queue: str, region: str) -> int:
    return len(_store(queue, region)._messages)


def _consume(queue: str, tasks: int, region: str) -> None:
    store = _store(queue, region)
    del store._messages[: min(tasks, len(store._messages))]
