"""Capacity buffers: room kept free in a group for pods not yet created.

A policy's buffer ("room for 20 × 1 cpu/2Gi") becomes that many virtual pods, placed by
the same predicates and first-fit packing as pending pods: first into the free room of
the group's Ready nodes, then into what the nodes on their way and the nodes planned for
pending pods leave over, and the rest onto new nodes. On the way down, a node may go only
if the buffer still fits on the group's nodes that stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodescaler.domain.ahead.recheck import COUNTED_UP_TO
from nodescaler.domain.cluster.predicates import NodeTemplate, pack, place, why_not
from nodescaler.domain.cluster.snapshot import (
    Placement,
    Pod,
    Resources,
    Toleration,
    extended_resources,
)
from nodescaler.domain.policy import CapacityBuffer

NAMESPACE = "nodescaler-buffer"  # the virtual pods' namespace: no real pod is ever in it


def buffer_pods(buffers: Sequence[CapacityBuffer]) -> list[Pod]:
    """The virtual pods a policy's buffers stand for."""
    return [
        buffer_pod(buffer, f"buffer-{index}-{n}")
        for index, buffer in enumerate(buffers)
        for n in range(buffer.least)
    ]


def buffer_pod(buffer: CapacityBuffer, name: str) -> Pod:
    """One of the buffer's virtual pods: its requests, node selector and tolerations."""
    requests = {k: v for k, v in buffer.requests.items() if k in ("cpu", "memory")}
    placement = Placement(
        node_selector=dict(buffer.node_selector),
        tolerations=tuple(
            Toleration(t.key, t.operator, t.value, t.effect) for t in buffer.tolerations
        ),
        extended_resources=extended_resources(buffer.requests),
    )
    return Pod(NAMESPACE, name, None, Resources.parse(requests, pods=1), placement=placement)


@dataclass(frozen=True)
class BufferFit:
    """How the buffer fits the group: pods with room now, new nodes for the rest."""

    text: str  # "room for 20 × 1 cpu/2Gi" (each buffer's, joined)
    pods: int
    fit_now: int
    nodes: int
    problem: str | None = None  # a buffer pod no node of the group can ever hold
    # with all of it fitting, the pods of its largest shape that fit beyond it, counted
    # up to `COUNTED_UP_TO` (`domain.ahead.recheck`); None: it doesn't fit
    spare: int | None = None

    def describe(self) -> str:
        if self.problem:
            return f"buffer: {self.text}: {self.problem}"
        more = f", +{self.nodes} nodes for the rest" if self.nodes else ""
        return f"buffer: {self.text}: {self.fit_now} of {self.pods} fit now{more}"


def describe(buffers: Sequence[CapacityBuffer]) -> str:
    return ", ".join(b.describe() for b in buffers)


def fit_buffer(
    buffers: Sequence[CapacityBuffer],
    rooms: Mapping[str, NodeTemplate],
    template: NodeTemplate,
    coming: int = 0,
    coming_pods: Sequence[Pod] = (),
) -> BufferFit:
    """Fit the buffer into `rooms` (the free room of the group's Ready nodes) and the
    `coming` new nodes of `template` (on their way, or planned) less the pending pods
    `coming_pods` they take; the rest onto new nodes of the template."""
    pods = buffer_pods(buffers)
    text = describe(buffers)
    for pod in pods:
        if (why := why_not(pod, template)) is not None:
            return BufferFit(text, len(pods), 0, 0, f"a buffer pod {why}")
    free = dict(rooms)
    if coming:
        new = {f"~coming-{n}": template for n in range(coming)}
        taken, _ = place(coming_pods, new)
        free |= new | taken
    taken, stranded = place(pods, free)
    if stranded:
        nodes = pack(stranded, template)[0]
        return BufferFit(text, len(pods), len(pods) - len(stranded), nodes)
    if not pods:
        return BufferFit(text, 0, 0, 0)
    largest = max(pods, key=lambda p: (p.requests.cpu_millis, p.requests.memory_bytes))
    beyond = place([largest] * COUNTED_UP_TO, free | taken)[1]
    return BufferFit(text, len(pods), len(pods), 0, spare=COUNTED_UP_TO - len(beyond))


def buffer_holds(pods: Sequence[Pod], rooms: Mapping[str, NodeTemplate]) -> bool:
    """Do the buffer's virtual pods all fit these rooms?"""
    return not place(pods, dict(rooms))[1]
