"""The metrics' outcomes combined into one recommendation, as the HPA combines its
metrics: the highest vote wins, and a missing metric never lets the group scale in
beyond the nodes the cluster's view finds empty; and the demand those outcomes show."""

from __future__ import annotations

from collections.abc import Sequence

from nodescaler.domain.scaling.decision import Limit, MetricOutcome, MetricStatus
from nodescaler.domain.scaling.metric_outcome import votes


def combine(outcomes: list[MetricOutcome], current: int) -> tuple[int, list[Limit]]:
    """Highest recommendation wins; a missing metric forbids scale-in; none at all holds.
    Pending pods' vote to shed unneeded nodes counts only when no other metric votes. A
    forecast is a floor under the result: it may raise it, never lower it."""
    live, limits = _combine_live(outcomes, current)
    floor = max(
        (o.recommendation or 0 for o in outcomes if o.status is MetricStatus.FORECAST),
        default=None,
    )
    if floor is not None and floor > live:
        # a forecast above the live result is a scale-up (a missing metric holds the live
        # result at the size, never below it), which a missing metric never holds
        dropped = {Limit.TOLERANCE, Limit.MISSING_METRIC}
        return floor, [*(lim for lim in limits if lim not in dropped), Limit.FORECAST]
    return live, limits


def demand(outcomes: list[MetricOutcome], in_service: int) -> float | None:
    """The nodes the live metrics say the group needs, the forecast aside: its demand,
    recorded for later forecasts. Pending pods say how many their pods need (before it
    rounds up to whole nodes, which a forecast would scale into a node too many); the
    others what they recommend; none of them, the nodes in service. Never the group's
    size as such: nodes a forecast asked for would count as demand the next day, and the
    next. None while a metric is broken: the demand is not known."""
    if any(o.status.failing for o in outcomes):  # a fallback's vote is no demand either
        return None
    live = [o for o in outcomes if not o.status.is_forecast]
    needs = [_need(o) for o in live]
    return max((n for n in needs if n is not None), default=in_service)


def _need(outcome: MetricOutcome) -> float | None:
    if outcome.needed is None:
        return outcome.recommendation
    if outcome.pods_share is not None and outcome.needed == outcome.pods_need:
        return outcome.pods_share
    return outcome.needed


def _combine_live(outcomes: list[MetricOutcome], current: int) -> tuple[int, list[Limit]]:
    usable = [o.recommendation for o in outcomes if votes(o) and o.recommendation is not None] or [
        o.recommendation
        for o in outcomes
        if o.status is MetricStatus.UNNEEDED and o.recommendation is not None
    ]
    broken = any(o.status.broken for o in outcomes)
    if not usable:
        return current, [Limit.MISSING_METRIC] if broken else []
    recommendation = max(usable)
    if broken and recommendation < current:
        # Only nodes empty of pods in the cluster's own view may go: they evict nothing,
        # and a pod the unread metric would bring makes them needed again (pending pods).
        empty = empty_nodes(outcomes)
        if not empty:
            return current, [Limit.MISSING_METRIC]
        return max(recommendation, current - empty), [Limit.EMPTY_ONLY]
    held = recommendation == current and any(
        o.status is MetricStatus.HELD_BY_TOLERANCE for o in outcomes
    )
    return recommendation, [Limit.TOLERANCE] if held else []


def empty_nodes(outcomes: Sequence[MetricOutcome]) -> int:
    """The group's nodes pending pods found empty of pods and unneeded (0: none, or unknown):
    a PendingPods metric's (shedding them), or the group's own pending pods' (abstaining)."""
    said = (MetricStatus.UNNEEDED, MetricStatus.ABSTAINED)
    return max((o.empty or 0 for o in outcomes if o.status in said), default=0)
