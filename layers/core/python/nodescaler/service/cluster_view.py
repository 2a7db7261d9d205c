"""The evaluator's view of the Kubernetes cluster, from one snapshot: the Kubernetes metrics
(capacity reservation and pending pods, and a group's own pending pods where its policy has
no PendingPods metric), a group's nodes (Ready, to keep, to let go), and its soft taints.

One snapshot of nodes and pods serves every group evaluated within `max_age` (a batch of
evaluations, in a warm container), so a tick over many groups lists the cluster once per
batch, not once per group. Failures become `MetricUnavailable` naming the cause, which
holds that group's scale-in and nothing else. The listing itself is a port
(`SnapshotSource`), which `nodescaler.adapters.k8s.core_api` implements.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from nodescaler.domain.ahead.capacity_buffers import describe_all as describe_buffers
from nodescaler.domain.ahead.capacity_buffers import with_buffers
from nodescaler.domain.ahead.group_buffers import BufferFit, buffer_pods, fit_buffer
from nodescaler.domain.cluster.predicates import nodes_and_share, pending, room_of, why_not
from nodescaler.domain.cluster.reservation import read_reservation
from nodescaler.domain.cluster.snapshot import Pod, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup, belongs
from nodescaler.domain.policy import (
    CapacityBuffer,
    CapacityReservationMetric,
    Consolidation,
    MetricBase,
    PendingPodsMetric,
)
from nodescaler.domain.scale_down.leaving import Removable, awaiting_removal, removable
from nodescaler.domain.scale_down.marks import mark_changes
from nodescaler.domain.scale_down.pod_rules import CA_DEFAULTS, DrainRules, keeps_node
from nodescaler.domain.scale_down.spoken_for import SpokenFor
from nodescaler.domain.scale_down.unneeded import (
    SIMULATED_PER_CALL,
    Unneeded,
    held_for_buffers,
    unneeded_nodes,
)
from nodescaler.domain.scaling.own_pods import OWN_PENDING_PODS
from nodescaler.domain.scaling.plan import ChooseLeaving
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.errors import KubernetesUnavailableError
from nodescaler.ports import NodeMarks, SnapshotSource
from nodescaler.service.pending_pods import PendingPodsPlanner, Planned, group_pods
from nodescaler.service.unplaced_pod_events import UnplacedPodEvents

WAITING_SHOWN = 20  # pods that fit no group, named in a decision


def _real(pods: list[Pod], snapshot: Snapshot) -> list[Pod]:
    """The pods that exist: not a CapacityBuffer's virtual ones."""
    return snapshot.real(pods) if snapshot.buffers else pods


# Named for what it serves: the Kubernetes metric types' producer, and the evaluator's
# `ClusterView` of nodes. It keeps only what it listed (the snapshot, and the pending-pods
# plan all groups share); what a read finds for a group, it returns (the candidates too).
class KubernetesClusterView:
    def __init__(
        self,
        cluster: SnapshotSource,  # a KubernetesCluster
        *,
        pending: PendingPodsPlanner | None = None,
        waiting: UnplacedPodEvents | None = None,
        marks: NodeMarks | None = None,
        max_age: timedelta = timedelta(seconds=15),
        rules: DrainRules = CA_DEFAULTS,
    ) -> None:
        self._cluster = cluster
        self._rules = rules  # which pods keep their node
        self._marks = marks
        self._pending = pending
        self._waiting = waiting
        self._max_age = max_age
        self._snapshot: tuple[datetime, Snapshot | KubernetesUnavailableError] | None = None
        self._plans: dict[int, Planned] = {}  # by priority cutoff, for the current snapshot
        # by group, the room its scale-in's moves take on the others' nodes, this snapshot
        self._moves = SpokenFor()

    def snapshot(self, now: datetime) -> Snapshot:
        """The cluster as listed within `max_age`. A listing that failed is remembered as
        long: an evaluation reads the cluster several times (each metric, scale-in
        protection), and should wait for a server that does not answer only once."""
        if self._snapshot is None or now - self._snapshot[0] > self._max_age:
            self._plans, self._moves = {}, SpokenFor()
            try:
                # a pod deleted long enough ago is neither a request nor a pod to move
                read = self._cluster.snapshot().at(now)
                self._snapshot = (now, with_buffers(read))  # the cluster's CapacityBuffers
            except KubernetesUnavailableError as error:
                self._snapshot = (now, error)
        listed = self._snapshot[1]
        if isinstance(listed, KubernetesUnavailableError):
            raise KubernetesUnavailableError(str(listed))
        return listed

    def listed_since(self, at: datetime) -> None:
        """A listing older than `at` is dropped: a request made then (a fast-path look that
        saw a new pod) is answered from a listing that holds what it saw."""
        if self._snapshot is not None and self._snapshot[0] < at:
            self._snapshot = None

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError as error:
            return MetricUnavailable(reason=str(error))
        if isinstance(metric, CapacityReservationMetric):
            waiting = self._waiting_for(group, snapshot, now)
            below = None if self._pending is None else self._pending.cutoff(group)
            return read_reservation(metric, group, snapshot, now, waiting, expendable=below)
        if isinstance(metric, PendingPodsMetric) and self._pending is not None:
            return self._pending_pods(metric, group, snapshot, now)
        return MetricUnavailable(reason=f"no {metric.type_name} producer is configured")

    def _waiting_for(self, group: NodeGroup, snapshot: Snapshot, now: datetime) -> list[Pod]:
        """The pending pods the plan gives the group's room (its nodes on their way, or
        planned): its reservation counts them as requested, or a ramp that fills each node
        as it comes reads full nodes alone and asks one node at a time."""
        if self._pending is None or not self._pending.participants([group]):
            return []
        try:
            planned = self._planned(group, snapshot, self._pending.cutoff(group), now)
        except Exception:  # the pending-pods reading names it: read as before this plan
            return []
        return [] if group.name in planned.problems else planned.coming(group.name)[1]

    def protected(self, group: NodeGroup, now: datetime) -> frozenset[str] | None:
        """The group's instances whose nodes must stay (None: the cluster can't say now)."""
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError:
            return None
        by_node, budgets = snapshot.pods_by_node, snapshot.budgets
        return frozenset(
            node.instance_id
            for node in snapshot.nodes
            if belongs(node, group)
            and keeps_node(node, by_node.get(node.name, ()), self._rules, budgets, now=now)
        )

    def removable(self, group: NodeGroup, count: int, now: datetime) -> Removable | None:
        """Up to `count` of the group's instances a scale-in may take
        (`service.termination_policy`)."""
        return self.leaving(group, now)(count)

    def leaving(self, group: NodeGroup, now: datetime) -> ChooseLeaving:
        """The group's scale-in choice over the snapshot as read now: which instances may
        leave, given how many (None: the cluster can't say now)."""
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError:
            return lambda _count: None
        # what Auto Scaling would offer: never an instance protected from scale-in
        offered = sorted(group.instance_ids - group.protected_ids)
        return lambda count: removable(group, offered, count, snapshot, self._rules, now=now)

    def mark_candidates(
        self,
        group: NodeGroup,
        candidates: frozenset[str],
        now: datetime,
        excess: int = 0,
        rooms: frozenset[str] | None = None,
    ) -> None:
        """Soft-taint `candidates` (a pending-pods reading's unneeded), the nodes the group
        lets go next while `excess` more are in service than it desires, and meanwhile
        its buffer's `rooms` and the cluster's CapacityBuffers' (`mark_changes`). Best
        effort: a refusal changes nothing else."""
        if self._marks is None:
            return
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError:
            return
        own = [n for n in snapshot.nodes if belongs(n, group)]
        leaving = candidates | awaiting_removal(group, snapshot, excess, rooms or frozenset())
        held = frozenset(held_for_buffers(own, snapshot))
        for node, taint, marked in mark_changes(own, leaving, rooms, held):
            try:
                self._marks.mark(node, taint, marked)
            except Exception:  # a hint, never a reason to fail the evaluation (or the rest)
                continue

    def shed(self, group: str, count: int) -> None:
        self._moves.commit(group, count)  # what it sheds, later groups cannot count on

    def ready_nodes(self, group: NodeGroup, now: datetime) -> tuple[datetime | None, ...] | None:
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError:
            return None
        return tuple(n.ready_since for n in snapshot.nodes if n.usable and belongs(n, group))

    def _pending_pods(
        self, metric: PendingPodsMetric, group: NodeGroup, snapshot: Snapshot, now: datetime
    ) -> Reading:
        assert self._pending is not None
        cutoff = metric.pending_pods.expendable_priority_cutoff
        share = self._share(group, snapshot, cutoff, now)
        if isinstance(share, MetricUnavailable):
            return share
        planned, nodes = share
        detail = planned.describe(group.name, nodes)
        if snapshot.buffers:
            said = describe_buffers(snapshot.buffers, planned.plan.pods)  # where their pods go
            doubt = any(b.problem for b in snapshot.buffers)
            if doubt and not nodes:  # named, and no scale-in on a buffer it can't read
                return MetricUnavailable(reason=f"node group {group.name}: {said}")
            detail += f"; {said}"
        buffers = metric.pending_pods.buffer
        virtual = buffer_pods(buffers)
        fit = None
        if buffers:
            fit = self._buffer(buffers, group, snapshot, planned, cutoff)
            if fit.problem and not nodes:  # named, and no scale-in on a buffer it can't check
                return MetricUnavailable(reason=f"node group {group.name}: {fit.describe()}")
            if fit.problem:  # the pending pods still get their nodes
                return MetricReading(value=nodes, at=now, detail=f"{detail}; {fit.describe()}")
            nodes += fit.nodes
            detail += f"; {fit.describe()}"
        spare = emptying = None
        if not nodes:  # with WhenEmpty only empty nodes go: no moves, so no plan for them
            when_empty = metric.pending_pods.consolidation is Consolidation.WHEN_EMPTY
            moves = None if when_empty else planned
            spare = self._unneeded(group, snapshot, cutoff, now, buffer=virtual, planned=moves)
            if when_empty and spare is not None:  # those whose pods fit elsewhere, unmoved
                emptying = self._unneeded(
                    group, snapshot, cutoff, now, buffer=virtual, planned=planned, moving=False
                )
        if spare is not None and spare.nodes:
            detail += f"; {spare.describe()}"
        needed, needed_share = self._needed(group, snapshot, planned, virtual)
        return MetricReading(
            value=nodes,
            at=now,
            detail=detail,
            unneeded_nodes=len(spare.nodes) if spare is not None else None,
            empty_nodes=spare.empty if spare is not None else None,
            candidates=spare.nodes if spare is not None else (),
            emptying=emptying.nodes[emptying.empty :] if emptying is not None else (),
            rooms=spare.rooms if spare is not None else None,
            needed_nodes=needed,
            needed_share=needed_share,
            buffer_spare=None if fit is None else fit.spare,
            pending_pods=len(planned.coming(group.name)[1]),
            group_pods=len(_real(group_pods(group, snapshot, planned), snapshot)),
            waiting={
                pod.key: planned.plan.waiting.get(pod.key, {}).get(group.name, "")
                for pod in planned.plan.unplaced[:WAITING_SHOWN]
            },
        )

    def own_pending_pods(self, group: NodeGroup, now: datetime) -> Reading:
        """The nodes the pending-pods plan gives a group whose policy has no PendingPods
        metric, for the pods its nodes would take (`domain.scaling.own_pods`), and with
        none for it, its nodes empty of pods: never a vote to shed them, only what lets them
        leave past the default scale-down rate once its own metrics shed. Unavailable when
        the cluster can't say."""
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError as error:
            return MetricUnavailable(reason=str(error))
        if self._pending is None:
            return MetricUnavailable(reason="no pending-pods planner is configured")
        cutoff = OWN_PENDING_PODS.pending_pods.expendable_priority_cutoff
        share = self._share(group, snapshot, cutoff, now)
        if isinstance(share, MetricUnavailable):
            return share
        planned, nodes = share
        spare = None if nodes else self._unneeded(group, snapshot, cutoff, now)
        # its template read already (`_unneeded`): a floor under a scale-in, never a vote
        needed = self._needed(group, snapshot, planned, ()) if spare else None
        return MetricReading(
            value=nodes,
            at=now,
            detail=planned.describe(group.name, nodes),
            pending_pods=len(planned.coming(group.name)[1]),
            empty_nodes=spare.empty if spare is not None else None,
            candidates=spare.nodes if spare is not None else (),  # all empty: timed, not marked
            needed_nodes=needed[0] if needed else None,
            needed_share=needed[1] if needed else None,
        )

    def _share(
        self, group: NodeGroup, snapshot: Snapshot, cutoff: int, now: datetime
    ) -> tuple[Planned, int] | MetricUnavailable:
        """The first step of both pending-pods readings: the plan as the group reads it,
        and the nodes it gives the group; unavailable when the plan names the group's
        problem (no template of its nodes, say)."""
        planned = self._planned(group, snapshot, cutoff, now)
        if group.name in planned.problems:
            return MetricUnavailable(
                reason=f"node group {group.name}: {planned.problems[group.name]}"
            )
        return planned, planned.plan.nodes.get(group.name, 0)

    def _planned(self, group: NodeGroup, snapshot: Snapshot, cutoff: int, now: datetime) -> Planned:
        """The pending-pods plan of every group, from the snapshot, as this group reads it."""
        assert self._pending is not None
        planned = self._plans.get(cutoff)
        # A group backed off since (or no longer), or resized since (by this container's
        # last evaluation, or another's), gets a fresh plan from the same snapshot: a plan
        # made before a scale-up would ask for the same nodes again.
        if (
            planned is None
            or planned.desired.get(group.name, group.desired) != group.desired
            or planned.backed_off != self._pending.backed_off(planned.participants, now)
        ):
            planned = self._plans[cutoff] = self._pending.plan(snapshot, cutoff, now)
            # Every group computes the same plan: the first participant tells the pods.
            if self._waiting is not None and group.name == min(planned.participants, default=""):
                real = _real(planned.plan.unplaced, snapshot)  # no Event on a buffer's pod
                self._waiting.report(planned.plan, real, now)
        return planned

    def _buffer(
        self,
        buffers: Sequence[CapacityBuffer],
        group: NodeGroup,
        snapshot: Snapshot,
        planned: Planned,
        cutoff: int,
    ) -> BufferFit:
        """The group's capacity buffer against the free room of its Ready nodes and of the
        nodes on their way or planned for pending pods. Room a pod below the `cutoff` holds
        is free: a pod of the group's takes it by preemption, and a buffer that counted it
        taken would buy a node for expendable pods, which then fill that one too."""
        assert self._pending is not None
        template = self._pending.template(group, snapshot)  # its problems end the reading first
        by_node = snapshot.pods_by_node
        rooms = {
            n.name: room_of(n, [p for p in by_node.get(n.name, ()) if p.priority >= cutoff])
            for n in snapshot.nodes
            if n.usable and n.schedulable and belongs(n, group)
        }
        coming, coming_pods = planned.coming(group.name)
        return fit_buffer(buffers, rooms, template, coming, coming_pods)

    def _needed(
        self,
        group: NodeGroup,
        snapshot: Snapshot,
        planned: Planned,
        buffer: Sequence[Pod],
    ) -> tuple[int, float]:
        """The nodes the group's pods need, and that need before it rounds up
        (`nodes_and_share`): the pods running on its Ready nodes, those pending for it (on
        nodes on their way, or planned) and its buffer, as one estimate of packing. Never
        its nodes as such: a forecast that raised the group would learn its own nodes as
        demand, and ask for them again the next day."""
        assert self._pending is not None
        pods = [*group_pods(group, snapshot, planned), *buffer]
        return nodes_and_share(pods, self._pending.template(group, snapshot))

    def _unneeded(
        self,
        group: NodeGroup,
        snapshot: Snapshot,
        cutoff: int,
        now: datetime,
        *,
        buffer: Sequence[Pod] = (),
        planned: Planned | None = None,  # with the room other groups' buffers take
        moving: bool = True,  # its pods' moves spoken for: what a later group cannot take
    ) -> Unneeded | None:
        """The group's nodes nothing needs, when no pending pod could use one of its nodes
        (then none is spare: the pods may be waiting for room here); without `planned`,
        only its empty nodes (`WhenEmpty`, or no PendingPods metric)."""
        assert self._pending is not None
        try:
            template = self._pending.template(group, snapshot)
        except Exception:  # no template of its nodes (the plan names why): shed nothing
            return None
        if any(why_not(p, template) is None for p in pending(snapshot.pods, cutoff)):
            return None
        own = [n for n in snapshot.nodes if belongs(n, group)]
        limit = 0 if planned is None else SIMULATED_PER_CALL  # no node with pods is simulated
        buffers = planned.reserved if planned is not None else {}
        reserved = self._moves.reserved_for(group.name, {n.name for n in own}, buffers)
        spare = unneeded_nodes(
            own, snapshot, now=now, buffer=buffer, reserved=reserved, limit=limit, rules=self._rules
        )
        if moving:
            self._moves.record(group.name, spare.nodes, spare.moved, spare.buffer_at)
        return spare
