"""One evaluation's plan for one node group: everything decided, nothing done.

`plan` takes what the evaluation read (`Facts`) and returns a frozen `Plan`: the decision
with pauses, windows and the cluster's limits applied, the instances that leave, the nodes
to mark as deletion candidates, the scale-in protection to set, the warm pool's size, the
state to record and the events to announce. It reads nothing and writes nothing (as Cluster
Autoscaler's scale-down planner, which `scaledown/actuation` then carries out): the
evaluator's actuator (`service.actuation`) acts on the plan, or, in dry-run, only records it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.forecast import NamedHistory, forecast_readings, lead_time
from nodescaler.domain.ahead.warm_pool import WarmPoolPlan, plan_warm_pool, usable_pool, warm_launch
from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup
from nodescaler.domain.groups.zonal_shift import ZoneHold, hold_for_zones
from nodescaler.domain.outside_text import bounded_problems
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scale_down.leaving import Removable
from nodescaler.domain.scale_up.backoff import (
    BackoffRules,
    Provisioning,
    after_failure,
    provision_check,
)
from nodescaler.domain.scaling.acted import record_scale
from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.decision import Decision, Limit, fit_to_store
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.group_state import GroupState, failure_key
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.pause import Pause, hold
from nodescaler.domain.scaling.plan_recheck import Buying, plan_recheck
from nodescaler.domain.scaling.pods_floor import BootTime
from nodescaler.domain.scaling.readings import MetricReading, Reading

if TYPE_CHECKING:  # its models load with the first event told, not at a cold start
    from nodescaler.domain.groups.scaling_events import ScalingEvent

# The cluster's choice of up to n of the group's instances to take; None: it cannot say now
ChooseLeaving = Callable[[int], Removable | None]


@dataclass(frozen=True)
class Facts:
    """What an evaluation read about a group before planning; planning reads nothing more."""

    group: NodeGroup
    policy: NodeGroupPolicy
    state: GroupState  # as loaded (a lost resize's record already settled)
    now: datetime
    readings: Mapping[str, Reading]  # each metric read from its source (forecasts aside)
    # the group's own pending pods where its policy has no PendingPods metric and the
    # cluster is read (`own_pods`); None: no such vote
    own_pending: Reading | None = None
    histories: Mapping[str, NamedHistory] = field(default_factory=dict)  # forecasts' own metrics
    pauses: tuple[Pause, ...] = ()
    ceiling: Ceiling | None = None  # the cluster's limits on a scale-up, once read
    # A scale-up in flight: its launches that failed (not seen before), and the group's
    # Ready nodes where the cluster can say (None: its instances in service count)
    launch_failures: Sequence[LaunchFailure] = ()
    ready: int | None = None
    ready_since: tuple[datetime | None, ...] = ()  # when each of those turned Ready
    must_stay: frozenset[str] | None = None  # instances the cluster says must stay; None: can't say
    choose_leaving: ChooseLeaving | None = None  # None: no cluster to choose from
    backoff_rules: BackoffRules = field(default_factory=BackoffRules)
    policy_version: int | str = "deployed"  # the stored version used, or the deployed policy
    policy_note: str = ""  # why the deployed policy stands in for a stored one
    sizing_note: str = ""  # how its buffers sized from arrivals were sized (`domain.arrivals`)
    problems: tuple[str, ...] = ()  # what is wrong with its tags or policy, if anything
    cluster_name: str = ""
    zones: ZoneHold | None = None  # what zonal shifts hold of it (or their read's doubt)
    dry_run: bool = False  # its plan is recorded, nothing acted on (its tag, or the deployment's)


@dataclass(frozen=True)
class Protection:
    """Scale-in protection: what to set and release, and ours before and after."""

    ours: frozenset[str]  # protected by nodescaler, as it stands (kept by a dry run)
    ours_after: frozenset[str]  # once `add` and `release` are applied
    protected: frozenset[str]  # all the group's protected instances, once applied
    add: frozenset[str] = frozenset()
    release: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Plan:
    group: NodeGroup
    decision: Decision  # named with its policy version, cut to what its state item holds
    history: History  # with this evaluation's recommendation
    resized_history: History  # ... and its resize, once made: it counts against the rates
    state: GroupState  # to record: backoff, provisioning, failures, demand (before acting)
    backoff_changed: bool  # the state's backoff differs from the one loaded
    protection: Protection
    leaving: tuple[str, ...] = ()  # instances to terminate (else the group's policy chooses)
    candidates: frozenset[str] = frozenset()  # the group's nodes to mark; its others unmarked
    rooms: frozenset[str] | None = None  # its empty nodes kept as buffer room (None: unread)
    warm_pool: int | None = None  # the warm pool's new size, when it changes
    announce: tuple[ScalingEvent, ...] = ()  # told once the state is recorded
    announce_resized: ScalingEvent | None = None  # told once the resize is recorded
    problems: tuple[str, ...] = ()

    @property
    def resizes(self) -> bool:
        return self.decision.desired != self.decision.current

    @property
    def grows(self) -> bool:
        return self.decision.desired > self.decision.current

    @property
    def provisioning(self) -> Provisioning:
        """The scale-up to watch (when it grows): warm when the group's pool covered it."""
        decision = self.decision
        covered = warm_launch(self.group, decision.current, decision.desired)
        return Provisioning(since=decision.at, target=decision.desired, warm=covered)


@dataclass(frozen=True)
class Rejection:
    """A group left alone (its tags or policy unusable, or not ours to resize), its problems
    kept in its state for `nodescaler status`: `state` is what to write, None when the
    state already says so (written once, not on every tick)."""

    group: str
    problems: tuple[str, ...]
    state: GroupState | None


def rejection(group: str, state: GroupState, problems: tuple[str, ...]) -> Rejection:
    """The plan for a group left alone, from its state as loaded; it acts on nothing."""
    if state.problems == bounded_problems(problems):
        return Rejection(group, problems, None)
    return Rejection(group, problems, state.after(history=state.history, problems=problems))


def plan(facts: Facts) -> Plan:
    """The group's plan from what was read; it acts on nothing."""
    group, policy, now = facts.group, facts.policy, facts.now
    state = after_scale_up_check(facts)
    protection = protect(facts.group, facts.state, facts.must_stay)
    readings = dict(facts.readings) | forecast_readings(
        policy, state.demand, now, facts.histories, warm_pool=usable_pool(group) is not None
    )
    evaluation = _decided(facts, state, readings, len(protection.protected))
    decision, leaving, waiting = which_leave(group, evaluation.decision, facts.choose_leaving)
    arrivals = _arrivals(state.arrivals, facts.readings, now)
    state = replace(
        state,
        protected=protection.ours,
        failures=evaluation.failures,
        # no demand while a metric fails: not known, not recorded
        demand=state.demand
        if decision.demand is None
        else state.demand.record(now, decision.demand),
        arrivals=arrivals,
    )
    recheck = plan_recheck(
        facts.readings,
        policy,
        facts.state.spare_seen,
        arrivals=arrivals,
        boot=timedelta(seconds=boot_time(group, facts.state).seconds),
        now=now,
        buying=Buying.of(
            group,
            policy,
            facts.ceiling,
            decision.desired,
            pauses=facts.pauses,
            dry_run=facts.dry_run,
        ),
        grown_at=now if decision.desired > decision.current else state.grown_at,
    )
    state = replace(state, recheck=recheck.at, spare_seen=recheck.seen)
    decision = _as_chosen(_with_warm_pool(policy, group, decision, readings), facts)
    return Plan(
        group,
        decision,
        evaluation.history,
        record_scale(evaluation.history, policy, decision),
        state,
        backoff_changed=state.backoff != facts.state.backoff,
        protection=protection,
        leaving=leaving,
        candidates=frozenset()
        if group.bounds_doubt
        else _candidates(readings, facts.pauses, facts.zones, decision) | waiting,
        rooms=None if group.bounds_doubt else _rooms(readings),
        warm_pool=_warm_pool_change(group, decision),
        announce=_backoff_started(facts, state),
        announce_resized=_resized(decision, facts.cluster_name),
        problems=facts.problems,
    )


def _decided(
    facts: Facts, state: GroupState, readings: Mapping[str, Reading], protected: int
) -> Evaluation:
    """`decide`, then held where a pause in force, or a zonal shift, holds it."""
    group = facts.group
    size = GroupSize(
        group.desired,
        group.min_size,
        group.max_size,
        ready=group.in_service,
        launched=group.launched,
        protected=protected,
        bounds_from=group.bounds_from,
    )
    evaluation = decide(
        node_group=group.name,
        policy=facts.policy,
        size=size,
        readings=readings,
        history=state.history,
        now=facts.now,
        backoff=state.backoff,
        ceiling=facts.ceiling,
        failures=state.failures,
        own_pending=facts.own_pending,
        boot=boot_time(group, state),
    )
    held = hold_for_zones(hold(evaluation.decision, facts.pauses), facts.zones)
    return replace(evaluation, decision=_hold_on_bounds_doubt(held, group))


def boot_time(group: NodeGroup, state: GroupState) -> BootTime:
    """How long getting one of the group's nodes back takes: its own launch time, as the
    forecasts look ahead by (warm launches' where its warm pool covers a scale-up); the
    keep and a buffer learnt from arrivals both size by it."""
    boot, source = lead_time(state.demand, None, warm=usable_pool(group) is not None)
    return BootTime(boot.total_seconds(), source)


def _hold_on_bounds_doubt(decision: Decision, group: NodeGroup) -> Decision:
    """No scale-in of a group whose bounds could not be read (an EKS managed node group
    EKS did not describe): the bounds it would go to are not known to be EKS's."""
    if not group.bounds_doubt or decision.change >= 0:
        return decision
    return decision.held(group.bounds_doubt, Limit.BOUNDS_UNREAD)


def after_scale_up_check(facts: Facts) -> GroupState:
    """The state once a scale-up in flight is checked: backed off on a failed launch (the
    fallback for a missed launch-failure event) or on instances not Ready in time; the
    scale-up then ends. One that arrived measures the forecasts' lead time."""
    state, group, now = facts.state, facts.group, facts.now
    provisioning, overdue = provision_check(
        state.provisioning,
        desired=group.desired,
        in_service=group.in_service if facts.ready is None else facts.ready,
        now=now,
        rules=facts.backoff_rules,
    )
    reasons = [f.reason for f in facts.launch_failures] + ([overdue] if overdue else [])
    if not reasons:
        asked = state.provisioning
        if asked is not None and provisioning is None and group.desired >= asked.target:
            # the time from a scale request to Ready nodes: the forecasts' lead time
            arrived = asked.arrived(facts.ready_since, now)
            state = replace(
                state, demand=state.demand.measured_lead(arrived - asked.since, warm=asked.warm)
            )
        return replace(state, provisioning=provisioning)
    backoff = after_failure(state.backoff, now, reasons[0], facts.backoff_rules)
    return replace(state, backoff=backoff, provisioning=None).remembering(
        *(failure_key(f.activity_id) for f in facts.launch_failures)
    )


def protect(group: NodeGroup, state: GroupState, must_stay: frozenset[str] | None) -> Protection:
    """Protect the instances whose nodes the cluster says must stay, and release those
    we protected that no longer need it. Protection set by anyone else is left alone,
    and an unreadable cluster changes nothing."""
    ours = state.protected & group.protected_ids
    if must_stay is None:
        return Protection(ours, ours, group.protected_ids)
    wanted = must_stay & group.instance_ids
    add, release = wanted - group.protected_ids, ours - wanted
    after = wanted - (group.protected_ids - ours)  # not claiming others' protection
    return Protection(ours, after, (group.protected_ids | add) - release, add, release)


def which_leave(
    group: NodeGroup, decision: Decision, choose: ChooseLeaving | None
) -> tuple[Decision, tuple[str, ...], frozenset[str]]:
    """An EKS managed node group takes no custom termination policy: on its scale-in
    nodescaler chooses the instances (never Ready, empty, then one whose pods can move)
    and terminates them itself, as Cluster Autoscaler does; the decision then asks for no
    more than can go (a node with pods among them too: EKS drains a managed group's nodes
    before it terminates them), and names the nodes to mark that go once their Jobs end.
    Other groups: their termination policy chooses, a node with pods only where the drain
    hook is."""
    if not group.is_eks_managed or decision.desired >= decision.current or choose is None:
        return decision, (), frozenset()
    found = choose(decision.current - decision.desired)
    if found is None:  # the cluster can't say now: nothing leaves on a guess
        found = Removable((), "the cluster cannot be read: no instance chosen")
    desired = decision.current - len(found.instance_ids)
    reason = f"{decision.reason} | {found.reason}"
    chosen = decision.model_copy(update={"desired": desired, "reason": reason})
    return chosen, found.instance_ids, frozenset(found.waiting)


def _backoff_started(facts: Facts, state: GroupState) -> tuple[ScalingEvent, ...]:
    """A backoff this evaluation started, to tell once its state is recorded."""
    if facts.state.backoff == state.backoff:
        return ()
    from nodescaler.domain.groups.scaling_events import backed_off, new_backoff

    started = new_backoff(facts.state.backoff, state.backoff)
    if started is None:
        return ()
    return (backed_off(facts.group.name, started, facts.cluster_name, "evaluation"),)


def _resized(decision: Decision, cluster_name: str) -> ScalingEvent | None:
    if decision.desired == decision.current:
        return None
    from nodescaler.domain.groups.scaling_events import resized

    return resized(decision, cluster_name)


def _candidates(
    readings: Mapping[str, Reading],
    pauses: Sequence[Pause],
    zones: ZoneHold | None,
    decision: Decision,
) -> frozenset[str]:
    """The nodes the pending-pods reading found unneeded, and of those it left to empty as
    many as could then go (above the group's minimum, beyond the unneeded), marked to
    steer new pods off them; none while scale-in is paused or held by a zonal shift."""
    if any(p.direction.holds(-1) for p in pauses) or (zones is not None and zones.scale_in):
        return frozenset()
    said = [r for r in readings.values() if isinstance(r, MetricReading)]
    unneeded = {node for r in said for node in r.candidates}
    emptying = [node for r in said for node in r.emptying if node not in unneeded]
    room = decision.current - decision.min_replicas - len(unneeded)
    return frozenset([*unneeded, *emptying[: max(room, 0)]])


def _rooms(readings: Mapping[str, Reading]) -> frozenset[str] | None:
    """The empty nodes a pending-pods reading keeps whole for the group's buffer; None
    when no reading looked (the group grows, or its cluster could not be read)."""
    looked = [r.rooms for r in readings.values() if isinstance(r, MetricReading)]
    if all(rooms is None for rooms in looked):
        return None
    return frozenset(node for rooms in looked for node in rooms or ())


def _with_warm_pool(
    policy: NodeGroupPolicy, group: NodeGroup, decision: Decision, readings: Mapping[str, Reading]
) -> Decision:
    """The warm pool a `warmPool` forecast asks for, in the decision."""
    warm = plan_warm_pool(policy, decision, readings, group.warm_pool)
    if not warm.note:
        return decision
    return decision.model_copy(
        update={
            "warm_pool": warm.size,
            "warm_pool_note": warm.note,
            "reason": f"{decision.reason} | {warm.note}",
        }
    )


def _warm_pool_change(group: NodeGroup, decision: Decision) -> int | None:
    """The warm pool's size to set, when the decision changes it."""
    if decision.warm_pool is None:
        return None
    if not WarmPoolPlan(decision.warm_pool, decision.warm_pool_note).changes(group.warm_pool):
        return None
    return decision.warm_pool


def _arrivals(arrivals: Arrivals, readings: Mapping[str, Reading], now: datetime) -> Arrivals:
    """The arrivals with the group's pods as its pending-pods reading counted them (as
    they were, when the cluster could not be read)."""
    counts = [r.group_pods for r in readings.values() if isinstance(r, MetricReading)]
    known = [c for c in counts if c is not None]
    return arrivals.observed(now, known[0]) if known else arrivals


def _as_chosen(decision: Decision, facts: Facts) -> Decision:
    """The decision naming the policy version it used, why the deployed one stood in and
    how its buffers were sized, cut to a size its state item always holds."""
    notes = [n for n in (facts.sizing_note, facts.policy_note) if n]
    reason = " | ".join([decision.reason, *notes])
    named = decision.model_copy(update={"policy_version": facts.policy_version, "reason": reason})
    return fit_to_store(named)
