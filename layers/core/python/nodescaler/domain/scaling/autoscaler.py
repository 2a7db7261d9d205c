"""The autoscaling function of a node group: replicas = f(current, readings, policy, history, now).

It reads as the reconcile loop: bound, recommend per metric, combine (never scaling in
on a missing metric), stabilize the demand, raise it to the lower bounds (a schedule's),
rate-limit and clamp. It never reads the clock and
never acts; it returns a `Decision` and the history to persist. Each metric's outcome is
`metric_outcome`'s; the decision's reason in words, `explain`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from nodescaler.domain.policy import MetricBase, NodeGroupPolicy, SelectPolicy
from nodescaler.domain.policy.descriptors import metric_type
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scaling.behavior import RateResult, limit_rate, stabilize
from nodescaler.domain.scaling.combine import combine, demand, empty_nodes
from nodescaler.domain.scaling.decision import Decision, Limit, MetricOutcome
from nodescaler.domain.scaling.explain import explain
from nodescaler.domain.scaling.fallback import MetricFailures, with_fallback
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.metric_outcome import evaluate_metric
from nodescaler.domain.scaling.own_pods import OWN_PENDING_PODS, as_floor
from nodescaler.domain.scaling.pods_floor import (
    BootTime,
    Kept,
    floors_under_scale_in,
    pods_need,
)
from nodescaler.domain.scaling.proportional import Tolerances
from nodescaler.domain.scaling.readings import Reading
from nodescaler.domain.scaling.scale_in_windows import HOUR, scale_in_room
from nodescaler.domain.scaling.unneeded_time import Spare, held_long_enough, spare_of


@dataclass(frozen=True)
class Evaluation:
    decision: Decision
    history: History  # with this evaluation's recommendation; scale events come from acting
    failures: MetricFailures = field(default_factory=MetricFailures)  # to persist, as history


def effective_bounds(policy: NodeGroupPolicy, size: GroupSize) -> tuple[int, int]:
    """The policy's [min, max] inside the group's own MinSize/MaxSize, which always win."""

    def inside(n: int) -> int:
        return min(max(n, size.min_size), size.max_size)

    return inside(policy.spec.min_replicas), inside(policy.spec.max_replicas)


def _group_bounds(policy: NodeGroupPolicy, size: GroupSize) -> str:
    """Where the group's own bounds come from, when they cut the policy's (for explain)."""
    spec = policy.spec
    cut = spec.max_replicas > size.max_size or spec.min_replicas < size.min_size
    return size.bounds_from if cut else ""


def decide(
    *,
    node_group: str,
    policy: NodeGroupPolicy,
    size: GroupSize,
    readings: Mapping[str, Reading],
    history: History,
    now: datetime,
    backoff: Backoff | None = None,
    ceiling: Ceiling | None = None,
    failures: MetricFailures | None = None,
    own_pending: Reading | None = None,  # its own pending pods' floor (`own_pods`), if read
    boot: BootTime | None = None,  # its own launch time (`pods_floor`)
) -> Evaluation:
    # 1. Bounds: the policy's, inside the group's own.
    bounds = effective_bounds(policy, size)
    # 2.-3. One recommendation per metric (and its own pending pods' floor), combined.
    voted = _vote(policy, size, readings, now, failures=failures, own_pending=own_pending)
    # 4.-8. Back inside the bounds, or stabilized, rate-limited and within a scale-in window.
    steered = _steer(policy, size, bounds=bounds, voted=voted, history=history, now=now, boot=boot)
    # 9. What the group's instances allow: backoff, the cluster's limits, protection.
    limits = list(steered.limits)
    desired = _held_back(
        steered.desired,
        size,
        bounds=bounds,
        backoff=backoff,
        ceiling=ceiling,
        now=now,
        limits=limits,
    )
    group_bounds = _group_bounds(policy, size)
    if group_bounds and size.current < desired == bounds[1]:
        limits.append(Limit.MAX)  # grown to the group's own bound (its readings knew it)
    in_service = size.current if size.ready is None else size.ready
    decision = Decision(
        node_group=node_group,
        policy=policy.name,
        at=now,
        current=size.current,
        desired=desired,
        in_service=in_service,
        min_replicas=bounds[0],
        max_replicas=bounds[1],
        group_bounds=group_bounds,
        recommendation=voted.recommendation,
        metrics=voted.outcomes,
        limited_by=tuple(dict.fromkeys(limits)),
        reason="",
        backoff=backoff if backoff is not None and backoff.active(now) else None,
        protected=size.protected,
        cluster_limit=ceiling.limit if Limit.CLUSTER_LIMIT in limits and ceiling else "",
        scale_in_window=steered.window,
        kept_recently_needed=steered.kept,
        demand=demand([o for o in voted.outcomes if o.name not in voted.bounds], in_service),
    )
    history = steered.history.settled(in_service, size.current)  # an earlier scale-in done?
    leaving = in_service - size.current if history.shrinking else 0
    reason = explain(decision, policy.spec.behavior.down.stabilization_window_seconds, leaving)
    return Evaluation(decision.model_copy(update={"reason": reason}), history, voted.failures)


@dataclass(frozen=True)
class _Voted:
    """The metrics' outcomes, combined into one recommendation."""

    outcomes: tuple[MetricOutcome, ...]
    failures: MetricFailures  # to persist
    recommendation: int  # the demand's, raised to the lower bounds
    limits: tuple[Limit, ...]
    demand: int  # the demand metrics' alone, which the stabilization window remembers
    bound: int | None = None  # the highest lower bound, applied after stabilization
    bounds: Mapping[str, int] = field(default_factory=dict)  # each bounding metric's count
    spare: Spare = field(default_factory=Spare)  # the nodes the cluster's view found unneeded


def _vote(
    policy: NodeGroupPolicy,
    size: GroupSize,
    readings: Mapping[str, Reading],
    now: datetime,
    *,
    failures: MetricFailures | None,
    own_pending: Reading | None,
) -> _Voted:
    """One recommendation per metric (a metric failing long enough votes its fallback),
    and the group's own pending pods' floor when read, then combined."""
    up, down = policy.spec.behavior.up, policy.spec.behavior.down
    tolerances = Tolerances(up=up.tolerance, down=down.tolerance)
    metrics = policy.spec.metrics
    outcomes = [evaluate_metric(m, readings.get(m.key), size, now, tolerances) for m in metrics]
    failures = (failures or MetricFailures()).after(metrics, outcomes, now)
    outcomes = [
        with_fallback(m, o, failures, size.current) for m, o in zip(metrics, outcomes, strict=True)
    ]
    bounds = _lower_bounds(metrics, outcomes)
    if own_pending is not None:  # one more vote, for more nodes only (never a fallback)
        own = evaluate_metric(OWN_PENDING_PODS, own_pending, size, now, tolerances)
        outcomes.append(as_floor(own))
    live, limits = combine([o for o in outcomes if o.name not in bounds], size.current)
    if any(o.fallback for o in outcomes):
        limits.append(Limit.FALLBACK)
    bound = max(bounds.values(), default=None)
    recommendation = live if bound is None else max(live, bound)
    if recommendation > live:  # a scale-up, which a missing metric never holds
        limits = [lim for lim in limits if lim not in (Limit.TOLERANCE, Limit.MISSING_METRIC)]
    spare = spare_of([*readings.values(), own_pending])
    return _Voted(
        tuple(outcomes), failures, recommendation, tuple(limits), live, bound, bounds, spare
    )


def _lower_bounds(
    metrics: Sequence[MetricBase], outcomes: Sequence[MetricOutcome]
) -> dict[str, int]:
    """The counts of the metrics that bound the group from below (a schedule's), by name:
    exact (a tolerance holds no bound). None in a policy with no demand metric, where
    they are the demand."""
    types = [metric_type(m) for m in metrics]
    if all(t.lower_bound or t.floor_acts is not None for t in types):
        return {}
    return {
        o.name: o.needed if o.needed is not None else o.recommendation
        for t, o in zip(types, outcomes, strict=True)
        if t.lower_bound and o.status.usable and o.recommendation is not None
    }


@dataclass(frozen=True)
class _Steered:
    desired: int
    history: History  # with this recommendation, when one was learned
    limits: tuple[Limit, ...]
    window: str = ""  # the open scale-in window that held the decision back, in words
    kept: str = ""  # the nodes kept for their pods' recent need, in words


def _steer(
    policy: NodeGroupPolicy,
    size: GroupSize,
    *,
    bounds: tuple[int, int],
    voted: _Voted,
    history: History,
    now: datetime,
    boot: BootTime | None = None,
) -> _Steered:
    up, down = policy.spec.behavior.up, policy.spec.behavior.down
    current, (lowest, highest) = size.current, bounds
    window = down.stabilization_window_seconds
    history = history.with_unneeded(now, voted.spare.nodes, trusted_seconds=window)
    # 4. A group outside its bounds goes straight back inside them (as the HPA does).
    if not lowest <= current <= highest:
        limit = Limit.MAX if current > highest else Limit.MIN
        return _Steered(min(max(current, lowest), highest), history, (limit,))
    # 5. Held for a missing metric: nothing is learned, nothing is recorded (as the HPA).
    if Limit.MISSING_METRIC in voted.limits:
        return _Steered(current, history, voted.limits)
    # 6. Stabilize against recent recommendations, and remember this one. A group seen for
    # the first time starts from its current size, so a fresh deployment (or a lost state
    # item) waits a full scale-down window before removing anything.
    # A lower bound (a schedule's count) applies after it: the window remembers demand only.
    recommendation, limits = voted.demand, list(voted.limits)
    before = history.recommended_before(now)
    rising = before is not None and recommendation > before
    if not history.recommendations:
        history = history.with_recommendation(now, current, keep_seconds=0)
    stabilized, churn_held = _stabilized(policy, voted, history, now, current)
    if stabilized != recommendation and (voted.bound is None or stabilized > voted.bound):
        limits.append(Limit.STABILIZATION)
        if churn_held:
            limits.append(Limit.CHURNED)
    keep = max(up.stabilization_window_seconds, down.stabilization_window_seconds)
    history = history.with_recommendation(now, recommendation, keep)
    if voted.bound is not None:
        stabilized = max(stabilized, voted.bound)
    # 7. Rate policies, selectPolicy and [min, max]; then the empty nodes.
    desired, within = _rated(
        policy, voted, history, now, stabilized, size=(current, bounds), limits=limits
    )
    # 8. Floors from the group's pods (`pods_floor`), then an open scale-in window's cap.
    kept = floors_under_scale_in(
        desired,
        current,
        policy=policy,
        outcomes=voted.outcomes,
        history=history,
        now=now,
        boot=boot,
        limits=limits,
        rising=rising,
    )
    steered = _window_cap(policy, current, kept, now, limits)
    if steered.desired >= within:  # a floor or a window held them all the same
        return replace(steered, limits=tuple(x for x in limits if x is not Limit.UNNEEDED_TIME))
    return steered


def _stabilized(
    policy: NodeGroupPolicy, voted: _Voted, history: History, now: datetime, current: int
) -> tuple[int, bool]:
    """The demand within the recent recommendations (`behavior.stabilize`), and whether
    churn held it higher. Where the cluster is read and the group bought nodes back within
    a window of letting them go in the last hour, the window holds the recommendation in
    force as it began too: it covers time, and at a minute's cadence the HPA's strict
    cutoff lets a node go 60 to 120 s after its demand fell, before Cluster Autoscaler's
    unneeded time (a web tier's jitter bought them back a minute later). Elsewhere the
    HPA's rule stands: it sheds sooner."""
    up, down = policy.spec.behavior.up, policy.spec.behavior.down
    window, churned = down.stabilization_window_seconds, history.bought_back_at
    strict = stabilize(voted.demand, current, history=history, now=now, up=up, down=down)
    if window <= 0 or churned is None or now - churned > HOUR or pods_need(voted.outcomes) is None:
        return strict, False
    at_start = history.in_force_at(now - timedelta(seconds=window), window)
    held = stabilize(
        voted.demand,
        current,
        history=history,
        now=now,
        up=up,
        down=down,
        in_force_at_start=at_start,
    )
    return held, held > strict


def _rated(
    policy: NodeGroupPolicy,
    voted: _Voted,
    history: History,
    now: datetime,
    stabilized: int,
    *,
    size: tuple[int, tuple[int, int]],
    limits: list[Limit],
) -> tuple[int, int]:
    """The stabilized count within the rate policies and [min, max], and how far the
    group's empty nodes take it past them (`_empty_past_default_rate`): those unneeded a
    whole window (`unneeded_time`) go unless the demand now wants them. And the count
    without those."""
    up, down = policy.spec.behavior.up, policy.spec.behavior.down
    current, (lowest, highest) = size
    rated = limit_rate(
        stabilized,
        current,
        lowest=lowest,
        highest=highest,
        history=history,
        now=now,
        up=up,
        down=down,
    )
    empty_gone = max(stabilized, current - empty_nodes(voted.outcomes), lowest)
    window = down.stabilization_window_seconds
    held = held_long_enough(voted.spare, history, now, window_seconds=window, current=current)
    desired = _empty_past_default_rate(policy, rated, empty_gone)
    past_window = _empty_past_default_rate(
        policy, rated, min(empty_gone, max(voted.recommendation, held, lowest))
    )
    if rated.limited_by and past_window == rated.desired:
        limits.append(Limit(rated.limited_by))
    if past_window < desired:
        limits.append(Limit.UNNEEDED_TIME)
    return past_window, desired


def _window_cap(
    policy: NodeGroupPolicy, current: int, kept: Kept, now: datetime, limits: list[Limit]
) -> _Steered:
    """An open scale-in window caps how many nodes go this hour (it only holds nodes back)."""
    window = scale_in_room(policy.spec.scale_in_windows, current, kept.history, now)
    if window is not None and current - kept.desired > window.room:
        limits.append(Limit.SCALE_IN_WINDOW)
        held = current - window.room
        return _Steered(held, kept.history, tuple(limits), window.describe(), kept.why)
    return _Steered(kept.desired, kept.history, tuple(limits), kept=kept.why)


def _empty_past_default_rate(policy: NodeGroupPolicy, rated: RateResult, empty_gone: int) -> int:
    """Nodes empty of pods leave all at once, as Cluster Autoscaler deletes empty nodes in
    bulk: the default scale-down rate paces drains (evictions), and an empty node has none
    to pace. `empty_gone`: the group without them, within the stabilized recommendation (or,
    for those unneeded a whole window, the demand now) and the minimum. A rate the user
    wrote binds them too, as does a scale-in they disabled, and a scale-in window (after)."""
    written = policy.spec.behavior.scale_down
    if written and (written.policies or written.select_policy is SelectPolicy.DISABLED):
        return rated.desired  # a rate, or no scale-in, the user wrote
    return min(rated.desired, empty_gone)


def _held_back(
    desired: int,
    size: GroupSize,
    *,
    bounds: tuple[int, int],
    backoff: Backoff | None,
    ceiling: Ceiling | None,
    now: datetime,
    limits: list[Limit],
) -> int:
    """The last word: what the group's instances allow, whatever the metrics want."""
    # Backed off after a failed scale-up: no new instances, and those that could not be
    # launched are no longer asked for (the group would keep retrying them). Not a scale-in:
    # no instance that exists is removed.
    current, (lowest, highest) = size.current, bounds
    if backoff is not None and backoff.active(now):
        launched = current if size.launched is None else size.launched
        most = max(lowest, min(current, launched))
        if desired > most:
            desired = most
            limits.append(Limit.BACKOFF)
    # The cluster's limits cap a scale-up; they never shrink a group, nor hold it below its
    # minimum (which Auto Scaling would refuse anyway).
    if ceiling is not None and desired > (most := max(current, ceiling.nodes, lowest)):
        desired = most
        limits.append(Limit.CLUSTER_LIMIT)
    # Instances protected from scale-in stay; a smaller group would wait for them forever.
    # (Never above the maximum, though: a group over it goes back inside, as always.)
    floor = min(current, size.protected, highest)
    if desired < floor:
        desired = floor
        limits.append(Limit.PROTECTED)
    return desired
