"""What a run is compared against: a lower bound no controller can beat
(`oracle_node_hours`), and beside it a heuristic packing (`packed_node_hours`).

The bound (`lower_bound`), each step, from the scenario's demand (`demand`: the pods its
workloads ask for, none waiting): every node holds at most its allocatable of each
resource, so the nodes a group needs are at least, over resources, the requests of the
pods only it can take divided by one node's allocatable, rounded up (and at least the
group's minimum, at most its maximum); and all the groups together at least, over
resources, the sum of each pod's request divided by the largest allocatable of the
groups it can use (a pod that can use several groups is counted on the roomiest, so the
figure stays below whatever a placement takes); and at least as many nodes as pods that
may share none (a workload's replicas spread one a node, pods asking one host port). The
largest, summed over the judged steps. The demand counts a new pod once a node could have
booted for it, so a run that puts each pod on a node within a boot of its arrival cannot
come out below it; a run whose pods wait longer holds fewer than the demand and may.

The packing (`Oracle`): every step, the pods then existing in a run (running or waiting)
packed onto new nodes of the scenario's groups, by the sandbox's own placement rule
(`cluster.Room.fits`: CPU, memory, extended resources, nodeSelector, taints), with no boot
delay, first-fit decreasing: pods largest first (their dominant share of the largest node
the groups offer), each into the first open node that fits it, else onto a new node of the
first group whose empty node fits it, the groups taken most allocatable first. A heuristic:
it can use more nodes than the optimum (first-fit decreasing uses at most 11/9 of it, plus
a constant, in one dimension), and runs can come out below it. Groups' maximum sizes and
the cluster's limits are not applied. Pods no group's node fits are left out and counted
(`packed_pods_left_out`, `oracle_pods_left_out`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Protocol

from nodescaler_sandbox.cluster import Room, apart_keys, extended_requests, requests


@dataclass(frozen=True, order=True)
class Shape:
    """What placing a pod depends on: its requests, nodeSelector, tolerations, and what it
    may share no node with (its pod anti-affinity and host ports: `cluster.apart_keys`)."""

    cpu: int  # millicores
    memory: int  # bytes
    placement: str  # its nodeSelector, tolerations and extended requests, as JSON

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> Shape:
        spec = pod["spec"]
        placement = {
            "nodeSelector": spec.get("nodeSelector") or {},
            "tolerations": spec.get("tolerations") or [],
            "extended": extended_requests(dict(spec)),
        }
        if apart_keys(dict(spec)):
            ports = [p for c in spec.get("containers", ()) for p in c.get("ports") or ()]
            placement |= {"affinity": spec.get("affinity") or {}, "ports": ports}
        return cls(*requests(dict(pod)), json.dumps(placement, sort_keys=True))

    @cached_property
    def spec(self) -> dict[str, Any]:
        """A pod spec `Room.fits` reads as it would read the pod's."""
        placement = json.loads(self.placement)
        container = {"resources": {"requests": placement["extended"]}}
        return {
            "nodeSelector": placement["nodeSelector"],
            "tolerations": placement["tolerations"],
            "affinity": placement.get("affinity"),
            "containers": [container | {"ports": placement.get("ports") or []}],
        }


Step = tuple[tuple[Shape, int], ...]  # the pods existing at a step: each shape, how many


def step_of(shapes: Iterable[Shape]) -> Step:
    """The pods of a step, as the oracle counts them."""
    return tuple(sorted(Counter(shapes).items()))


@dataclass(frozen=True)
class Packing:
    nodes: int  # opened, over all groups
    left_out: int  # pods no group's node fits


@dataclass
class Oracle:
    """First-fit decreasing over the groups' empty nodes (`templates`: group → the room
    a new node of it offers); see the module's docstring."""

    templates: Mapping[str, Room]
    _packed: dict[Step, Packing] = field(default_factory=dict)  # steps repeat: pack once

    @cached_property
    def _largest(self) -> tuple[int, int]:
        rooms = self.templates.values()
        return max((r.cpu for r in rooms), default=1) or 1, max(
            (r.memory for r in rooms), default=1
        ) or 1

    @cached_property
    def _cheapest_first(self) -> list[Room]:
        """Most allocatable first (CPU and memory as shares of the largest offered)."""
        cpu, memory = self._largest
        ordered = sorted(
            self.templates.items(),
            key=lambda kv: (-(kv[1].cpu / cpu + kv[1].memory / memory), kv[0]),
        )
        return [room for _, room in ordered]

    def _size(self, shape: Shape) -> float:
        cpu, memory = self._largest
        return max(shape.cpu / cpu, shape.memory / memory)

    def pack(self, step: Step) -> Packing:
        if step not in self._packed:
            self._packed[step] = self._first_fit_decreasing(step)
        return self._packed[step]

    def _first_fit_decreasing(self, step: Step) -> Packing:
        # Open nodes in the order they were opened, identical ones run together as
        # [room left, how many]: first-fit fills the first of them, then the next, so a
        # run of identical nodes takes a shape's pods in whole nodes and one part-filled.
        opened: list[tuple[Room, int]] = []
        left_out = 0
        for shape, pods in sorted(step, key=lambda sc: (-self._size(sc[0]), sc[0])):
            left = _into(opened, shape, pods)
            for template in self._cheapest_first:
                if left == 0:
                    break
                left = _into_new(opened, template, shape, left)
            left_out += left
        return Packing(sum(n for _, n in opened), left_out)


def _fill(room: Room, shape: Shape, most: int) -> tuple[Room, int]:
    """A copy of `room` with as many of the shape's pods (up to `most`) as fit it."""
    room = replace(room, extended=dict(room.extended), apart=Counter(room.apart))
    placed = 0
    while placed < most and room.fits(shape.cpu, shape.memory, shape.spec):
        room.take(shape.cpu, shape.memory, shape.spec)
        placed += 1
    return room, placed


def _into(opened: list[tuple[Room, int]], shape: Shape, count: int) -> int:
    """The shape's pods into the open nodes, first fit; returns those left over."""
    index = 0
    while count and index < len(opened):
        room, nodes = opened[index]
        full, each = _fill(room, shape, count)
        if each == 0:
            index += 1
            continue
        whole = min(nodes, count // each)
        split: list[tuple[Room, int]] = [(full, whole)] if whole else []
        count -= whole * each
        if whole < nodes and count:  # the next node takes what is left, fewer than `each`
            split.append((_fill(room, shape, count)[0], 1))
            count = 0
            whole += 1
        if whole < nodes:
            split.append((room, nodes - whole))
        opened[index : index + 1] = split
        index += len(split)
    return count


def _into_new(opened: list[tuple[Room, int]], template: Room, shape: Shape, count: int) -> int:
    """The shape's pods onto new nodes of a group; returns those it cannot take."""
    full, each = _fill(template, shape, count)
    if each == 0:
        return count
    if count // each:
        opened.append((full, count // each))
    if count % each:
        opened.append((_fill(template, shape, count % each)[0], 1))
    return 0


def packed_node_hours(
    steps: Sequence[Step], templates: Mapping[str, Room], step_seconds: float = 60
) -> dict[str, float | int]:
    """The nodes first-fit decreasing packs each step's pods onto, each held for the step
    (`step_seconds`: the scenario's; a minute by default), summed as node-hours (a
    heuristic: see the module's docstring), and the most pods left out at one step
    because no group's node fits them."""
    oracle = Oracle(templates)
    packed = [oracle.pack(step) for step in steps]
    return {
        "packed_node_hours": round(sum(p.nodes for p in packed) * step_seconds / 3600, 2),
        "packed_pods_left_out": max((p.left_out for p in packed), default=0),
    }


@dataclass(frozen=True)
class Bounds:
    """A group's minimum and maximum size (the cluster's node limit: `nodes`), and until
    when (seconds from the start) a group can have no node beyond its minimum, the nodes
    it starts with: before its first new node can boot, or for ever when it cannot launch."""

    groups: Mapping[str, tuple[int, int]]
    nodes: int | None = None
    frozen_until: Mapping[str, float] = field(default_factory=dict)

    def at(self, second: float) -> Bounds:
        """The bounds at `second`: a group still frozen held at its minimum."""
        frozen = {g for g, until in self.frozen_until.items() if second < until}
        if not frozen:
            return self
        groups = {g: (low, low if g in frozen else high) for g, (low, high) in self.groups.items()}
        return Bounds(groups, self.nodes)


EPSILON = 1e-9  # a share that is whole up to rounding is not rounded up


class Waited(Protocol):
    """A run's pod as `figures.PodRecord` keeps it (times in minutes)."""

    name: str
    created: float
    unschedulable: float | None
    bound: float | None
    gone: float | None
    shares: dict[str, float]


def waits_allowance(
    pods: Iterable[Waited],
    bounds: Bounds,
    settled: Callable[[str], bool],
    steps: range,
    step_seconds: int,
) -> float:
    """The node-hours a run's pods waiting beyond a boot could have saved it against the
    bound, at most: the bound counts a deployment's pod (`settled(name)`) from a boot of
    the groups it fits after it arrived (another pod from its arrival), and a step's
    figure drops by no more than, over the groups, the pods' shares then counted and not
    on a node, rounded up. A run at or above `bound - waits_allowance` is consistent with
    the bound whatever its waits; one below it is a fault of the bound or the world.
    `steps`: the judged steps' seconds."""
    per_step: dict[int, dict[str, float]] = {}
    for pod in pods:
        if pod.unschedulable is None or not pod.shares:
            continue
        launch = {
            g: s for g, s in pod.shares.items() if math.isfinite(bounds.frozen_until.get(g, 0.0))
        }
        boot = min((bounds.frozen_until.get(g, 0.0) for g in launch), default=0.0)
        start = pod.created * 60 + (boot if settled(pod.name) else 0.0)
        end = min((t * 60 for t in (pod.bound, pod.gone) if t is not None), default=math.inf)
        # each step (its second, as the bound and the run's rows count it) the pod may be
        # counted in by the bound and is not on a node in the run
        first = max(steps.start, math.ceil(round(start / step_seconds, 9)) * step_seconds)
        for second in range(first, steps.stop, step_seconds):
            if second >= end:
                break
            step = per_step.setdefault(second, {})
            for group, share in launch.items():
                step[group] = step.get(group, 0.0) + share
    nodes = sum(math.ceil(s - EPSILON) for step in per_step.values() for s in step.values())
    return nodes * step_seconds / 3600


def _offered(room: Room) -> dict[str, float]:
    offered: dict[str, float] = {"cpu": room.cpu, "memory": room.memory}
    return offered | {name: float(n) for name, n in room.extended.items()}


def _asked(shape: Shape) -> dict[str, float]:
    extended: dict[str, int] = json.loads(shape.placement)["extended"]
    asked: dict[str, float] = {"cpu": shape.cpu, "memory": shape.memory}
    return asked | {name: float(n) for name, n in extended.items()}


def lower_bound(step: Step, templates: Mapping[str, Room], bounds: Bounds) -> Packing:
    """The fewest nodes any placement of the step's pods takes (see the module's
    docstring), and the pods no group's node fits."""
    offered = {g: _offered(room) for g, room in templates.items()}
    alone: dict[str, dict[str, float]] = {g: {} for g in templates}  # pods only g takes
    pooled: dict[str, float] = {}  # each pod's requests over its roomiest group's
    left_out = 0
    apart: Counter[str] = Counter()  # pods that may share no node: one node each at least
    for shape, count in step:
        usable = [
            g for g, room in templates.items() if room.fits(shape.cpu, shape.memory, shape.spec)
        ]
        if not usable:
            left_out += count
            continue
        apart.update({key: count for key in apart_keys(shape.spec)})
        for resource, amount in _asked(shape).items():
            if not amount:
                continue
            if len(usable) == 1:
                mine = alone[usable[0]]
                mine[resource] = mine.get(resource, 0) + count * amount
            roomiest = max(offered[g].get(resource, 0) for g in usable)
            pooled[resource] = pooled.get(resource, 0) + count * amount / roomiest
    each = 0
    for group, asked in alone.items():
        low, high = bounds.groups.get(group, (0, 10**9))
        need = max((asked[r] / offered[group][r] for r in asked), default=0)
        each += max(low, min(high, math.ceil(need - EPSILON)))
    most = sum(high for _, high in bounds.groups.values()) if bounds.groups else 10**9
    together = min(most, math.ceil(max(pooled.values(), default=0) - EPSILON))
    nodes = max(each, together, min(most, max(apart.values(), default=0)))
    return Packing(nodes if bounds.nodes is None else min(nodes, bounds.nodes), left_out)


def oracle_node_hours(
    steps: Iterable[Step],
    templates: Mapping[str, Room],
    bounds: Bounds,
    step_seconds: float = 60,
    first: int = 0,
) -> dict[str, float | int]:
    """`lower_bound` over `steps` (the first of them the scenario's step `first`), each
    held for the step, as node-hours (a bound no controller holding the pods can beat),
    and the most pods left out at one step."""
    seen: dict[tuple[Step, tuple[tuple[str, tuple[int, int]], ...]], Packing] = {}
    nodes = left_out = 0
    for index, step in enumerate(steps, start=first):
        now = bounds.at(index * step_seconds)
        key = (step, tuple(sorted(now.groups.items())))
        if key not in seen:
            seen[key] = lower_bound(step, templates, now)
        nodes += seen[key].nodes
        left_out = max(left_out, seen[key].left_out)
    return {
        "oracle_node_hours": round(nodes * step_seconds / 3600, 2),
        "oracle_pods_left_out": left_out,
    }
