"""What a run records (`Run`) of the world at each step: a row a group (sizes, the pods and queues
it serves, its last decision), the pods existing as the oracle packs them, and each change
of a group's desired capacity; figures kept while the cluster stays as it was."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import (
    baseline_tuning,
    figures,
    oracle,
)
from nodescaler_sandbox.cluster import Room, extended_requests, requests
from nodescaler_sandbox.figures import PodRecord
from nodescaler_sandbox.kube.store import is_daemon
from nodescaler_sandbox.provision import group_sizes
from nodescaler_sandbox.sandbox import REGION, Sandbox
from nodescaler_sandbox.world import World

if TYPE_CHECKING:
    pass


@dataclass
class Run:
    """One run of a scenario: every step of every group (`minutes`: a row a group a step,
    its `minute` the step's time), and what was asked of AWS."""

    controller: str
    minutes: list[dict[str, Any]] = field(default_factory=list)
    scale_requests: list[dict[str, Any]] = field(default_factory=list)
    # raises set back within their step, which `scale_requests` (from the rows) never shows
    undone_raises: list[dict[str, Any]] = field(default_factory=list)
    # each write of a group's desired capacity: (minute, group, desired, the cause)
    desired_writes: list[tuple[float, str, int, str | None]] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)
    launch_failures: list[tuple[float, str]] = field(default_factory=list)
    budget_short: list[int] = field(default_factory=list)  # minutes a budget was short
    drains: list[dict[str, Any]] = field(default_factory=list)  # the drain function's results
    evictions_asked: int = 0
    evicted: int = 0
    pods: list[PodRecord] = field(default_factory=list)
    killed: int = 0  # pods that went with their instance, never evicted
    nodes_removed: int = 0
    faults_injected: dict[str, int] = field(default_factory=dict)  # kind → calls failed
    tasks_lost: int = 0  # sent while their queue was deleted
    queue_work_lost_minutes: float = 0.0  # of queue workers gone at their task
    fast_path_failed: list[float] = field(default_factory=list)  # seconds its looks failed
    failed_invocations: int = 0  # of the functions, which Lambda would retry
    termination_asked: list[tuple[str, list[str]]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # Kubernetes Events written
    termination_failed: int = 0
    # per group, the busy nodes its terminate answers kept for want of a drain hook
    undrained: dict[str, int] = field(default_factory=dict)
    # each group's node as the cluster's limits count it (its instance type): vCPUs, GiB
    node_sizes: dict[str, tuple[float, float]] = field(default_factory=dict)
    steps: list[oracle.Step] = field(default_factory=list)  # the pods existing, each step
    templates: dict[str, Room] = field(default_factory=dict)  # what a group's new node offers
    settings: dict[str, Any] = field(default_factory=dict)  # CA tuned's flags and placeholders
    replayed: dict[str, Any] = field(default_factory=dict)  # each trace's figures (`traces`)
    workloads: dict[str, str] = field(default_factory=dict)  # trace pod → its workload label


@dataclass
class Unchanged:
    """Figures of the cluster kept while it stays as it was: the store's version (every
    pod or node put or deleted moves it) and the instances a hook holds. A step where
    nothing moved has the last step's figures, without another pass over every pod."""

    world: World
    _state: tuple[int, frozenset[str]] = (-1, frozenset())
    _kept: dict[str, tuple[tuple[int, frozenset[str]], Any]] = field(default_factory=dict)

    def look(self) -> None:
        """The cluster as it is at this step."""
        cluster = self.world.cluster
        held = frozenset(i for i, instance in cluster.instances.items() if instance.held)
        self._state = (cluster.store.resource_version, held)

    def get(self, name: str, figure: Callable[[], Any]) -> Any:
        kept = self._kept.get(name)
        if kept is None or kept[0] != self._state:
            kept = self._kept[name] = (self._state, figure())
        return kept[1]


def observe(
    world: World, decisions: Decisions | None, minute: float, kept: Unchanged
) -> list[dict[str, Any]]:
    """One row a group: sizes, the pods and queues it serves, and its last decision."""
    desired = {name: size for name, (size, _) in group_sizes(REGION).items()}
    pending = kept.get("pending", lambda: world.pending() - _placeholders_pending(world))
    queues = world.queue_depths()
    rows = []
    pools, now = world.box.warm_pools, world.box.clock.now()
    for group in world.scenario.groups:
        cpu, memory = kept.get(f"reservation {group.name}", partial(world.reservation, group.name))
        row: dict[str, Any] = {
            "minute": minute,
            "group": group.name,
            "desired": desired[group.name],
            "in_service": world.cluster.ready_nodes(group.name),
            "held": world.cluster.held(group.name),  # drained before they go, still billed
            # its warm pool: instances waiting, and what the pool costs in running instances
            "warm": pools.waiting(group.name, now),
            "warm_billed": round(pools.billed(group.name, now), 3),
            "pending_pods": pending,
            "queues": queues,
            "cpu_requested_pct": round(cpu, 1),
            "memory_requested_pct": round(memory, 1),
            "used_nodes": kept.get(f"used {group.name}", partial(_used_nodes, world, group.name)),
        }
        if decisions is not None:
            row |= decisions.of(group.name)
        rows.append(row)
    return rows


def _placeholders_pending(world: World) -> int:
    """Overprovisioning placeholders waiting: room asked for, not pods waiting for a node."""
    return sum(
        1
        for p in world.cluster.store.objects["pods"].values()
        if not p["spec"].get("nodeName") and baseline_tuning.is_placeholder(p)
    )


def _used_nodes(world: World, group: str) -> float:
    """The group's nodes in service as their pods' requests fill them: each node's dominant
    share (`figures.dominant_share`), summed."""
    cluster = world.cluster
    nodes = {
        n["metadata"]["name"]: n
        for n in cluster.group_nodes(group)
        if not cluster.instances[n["spec"]["providerID"].rsplit("/", 1)[-1]].held
    }
    asked: dict[str, dict[str, float]] = {name: {} for name in nodes}
    for pod in cluster.store.objects["pods"].values():
        on = asked.get(pod["spec"].get("nodeName"))
        if on is not None and not baseline_tuning.is_placeholder(pod):  # held room is idle
            cpu, memory = requests(pod)
            for resource, amount in (
                ("cpu", cpu),
                ("memory", memory),
                *extended_requests(pod["spec"]).items(),
            ):
                on[resource] = on.get(resource, 0) + amount
    used = 0.0
    for name, node in nodes.items():
        room = Room.of(node)
        offered = {"cpu": room.cpu, "memory": room.memory} | room.extended
        used += figures.dominant_share(asked[name], offered)
    return round(used, 3)


def pods_existing(world: World, shapes: dict[str, oracle.Shape]) -> oracle.Step:
    """The pods in the cluster now, running or waiting, as the oracle packs them (a pod's
    shape read once: `shapes`, by uid)."""
    pods = world.cluster.store.objects["pods"].values()
    return oracle.step_of(
        shapes.get(uid) or shapes.setdefault(uid, oracle.Shape.of(pod))
        for pod in pods
        if (uid := pod["metadata"]["uid"])
        and not baseline_tuning.is_placeholder(pod)
        and not is_daemon(pod)  # a node's own: taken off what its group's nodes offer
    )


@dataclass
class Decisions:
    """Each group's last decision and backoff, read from the state table only when an
    evaluation may have changed them (one ran since the last read), in moto's store
    directly (`Sandbox.state_seen`: the item the API would answer, without a request)."""

    box: Sandbox
    _read: dict[str, tuple[int, dict[str, Any], datetime | None]] = field(default_factory=dict)

    def of(self, group: str) -> dict[str, Any]:
        read = self._read.get(group)
        if read is None or read[0] != self.box.invocations:
            state = self.box.state_seen.load(group)
            decision = state.last_decision
            fields: dict[str, Any] = {"decided_at": decision.at.isoformat() if decision else None}
            if decision is not None:
                fields |= {
                    "current": decision.current,
                    "decided": decision.desired,
                    "metrics": {
                        m.name: {
                            "value": m.value,
                            "target": m.target,
                            "status": str(m.status),
                            "recommendation": m.recommendation,
                        }
                        for m in decision.metrics
                    },
                    "why": decision.reason,
                }
            until = state.backoff.until if state.backoff else None
            fields["cause"] = self.box.causes.get(group)
            read = self._read[group] = (self.box.invocations, fields, until)
        _, fields, until = read
        return {"backed_off": until is not None and self.box.clock.now() < until} | fields


def scale_requests(minutes: list[dict[str, Any]], start: dict[str, int]) -> list[dict[str, Any]]:
    """Each change of a group's desired capacity (from its size at the start)."""
    last = dict(start)
    requests = []
    for row in minutes:
        before = last.get(row["group"])
        if before is not None and row["desired"] != before:
            change = {"from": before, "to": row["desired"]}
            requests.append({"minute": row["minute"], "group": row["group"]} | change)
        last[row["group"]] = row["desired"]
    return requests
