"""The proportional function for one metric, with the HPA's object/external-metric semantics.

`Value` and `Utilization`: desired = ceil(value / target × ready), where ready is the count
of in-service nodes (the HPA multiplies by ready pods: booting nodes are not yet measured).
`AverageValue`: desired = ceil(value / target), tested for tolerance on value / (target × current).
A usage ratio within [1 - down tolerance, 1 + up tolerance] keeps the current count.

Unlike the HPA, a group at zero replicas still scales: `Value` gives ceil(value / target)
and `AverageValue` ceil(value / target), with no tolerance (there is nothing to hold).
`Utilization` of no nodes means nothing, so with none ready it abstains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nodescaler.domain.policy import MetricBase, TargetType
from nodescaler.domain.policy.descriptors import metric_type

# Float noise such as 60 / 0.1 = 600.0000000000001 must not become 601 replicas; a
# relative slack this small never changes a result that is not noise.
_RELATIVE_SLACK = 1e-12


@dataclass(frozen=True)
class Tolerances:
    up: float
    down: float

    def within(self, usage_ratio: float) -> bool:
        return 1.0 - self.down <= usage_ratio <= 1.0 + self.up


@dataclass(frozen=True)
class Recommendation:
    """`replicas` is None when the metric abstains (pending pods with nothing pending)."""

    replicas: int | None
    usage_ratio: float | None
    held_by_tolerance: bool = False
    unneeded: bool = False  # a shedding vote of pending pods (see MetricStatus.UNNEEDED)
    proposed: int | None = None  # held by the tolerance: what the ratio alone asks for


# A recommendation past any real group size (huge values, overflow to infinity) saturates
# here, as the HPA's int32 does; [min, max] then applies as usual.
MAX_RECOMMENDATION = 2**31 - 1


def _ceil(x: float) -> int:
    if not math.isfinite(x) or x >= MAX_RECOMMENDATION:
        return MAX_RECOMMENDATION
    return math.ceil(x - abs(x) * _RELATIVE_SLACK)


def recommend(
    metric: MetricBase,
    value: float,
    current: int,
    tolerances: Tolerances,
    ready: int | None = None,
    *,
    measured: int | None = None,
    unneeded: int | None = None,
) -> Recommendation:
    """Replicas this one metric asks for, given its (valid, finite, non-negative) value.

    `ready` is the number of in-service nodes (defaults to `current`); `measured`, for a
    utilization of nodes, how many of them it measured (see `_measured_proposal`);
    `unneeded`, for pending pods, how many nodes nothing needs.
    """
    ready = current if ready is None else ready
    target = metric.target.amount
    if metric_type(metric).additive:
        # Additive, not proportional: the value is how many new nodes are needed (pending pods).
        if value <= 0:
            if unneeded:  # nothing to add, and Ready nodes to spare: never more than now
                kept = max(max(current, ready) - unneeded, 0)
                return Recommendation(min(kept, current), None, unneeded=True)
            return Recommendation(replicas=None, usage_ratio=None)
        return Recommendation(replicas=current + _ceil(value / target), usage_ratio=None)

    if metric.target.type is TargetType.AVERAGE_VALUE:
        if current == 0:
            return Recommendation(replicas=_ceil(value / target), usage_ratio=None)
        usage_ratio = value / (target * current)
        proposed = _ceil(value / target)
    else:  # Value, Utilization: a total (or a percentage) against its target
        usage_ratio = value / target
        if metric.target.type is TargetType.UTILIZATION and (current == 0 or ready == 0):
            return Recommendation(replicas=None, usage_ratio=None)
        if current == 0 or ready == 0:  # nothing measured yet: size for the value alone
            return Recommendation(replicas=_ceil(usage_ratio), usage_ratio=usage_ratio)
        proposed = _ceil(usage_ratio * ready)
        if measured is not None and measured != ready:
            proposed = _measured_proposal(usage_ratio, ready, measured, current)

    if tolerances.within(usage_ratio):
        return Recommendation(
            current, usage_ratio, held_by_tolerance=proposed != current, proposed=proposed
        )
    return Recommendation(proposed, usage_ratio)


def _measured_proposal(usage_ratio: float, ready: int, measured: int, current: int) -> int:
    """A utilization measured over fewer nodes than are in service, as the HPA treats
    pods not yet ready: on the way up the unmeasured (booting) nodes add no usage, so
    they are not multiplied by the ratio again; on the way down they count as at target,
    so they never make room that is not there. Neither ever reverses the direction the
    ratio points to."""
    unmeasured = max(ready - measured, 0)
    if usage_ratio > 1:
        return max(_ceil(usage_ratio * measured), current)
    return min(_ceil(usage_ratio * measured + unmeasured), current)
