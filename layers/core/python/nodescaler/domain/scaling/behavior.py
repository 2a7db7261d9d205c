"""`behavior`, exactly as the upstream HPA applies it: stabilization, then rate policies and bounds.

Stabilization bounds the current count between the lowest recommendation inside the
scale-up window and the highest inside the scale-down window (the new one included);
where the caller asks, the one in force as the scale-down window began counts too
(`in_force_at_start`: the window covers time, not only the evaluations made in it).
Rate policies then cap the change against the scale events inside each policy's period;
`selectPolicy` picks the policy allowing the most (Max) or least (Min) change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.domain.policy import Rules, ScalingPolicyType, SelectPolicy
from nodescaler.domain.scaling.history import History


def stabilize(
    recommendation: int,
    current: int,
    *,
    history: History,
    now: datetime,
    up: Rules,
    down: Rules,
    in_force_at_start: int | None = None,
) -> int:
    up_cutoff = now - timedelta(seconds=up.stabilization_window_seconds)
    down_cutoff = now - timedelta(seconds=down.stabilization_window_seconds)
    up_floor = recommendation
    down_ceiling = max(recommendation, in_force_at_start or 0)
    for past in history.recommendations:
        if past.at > up_cutoff:
            up_floor = min(up_floor, past.replicas)
        if past.at > down_cutoff:
            down_ceiling = max(down_ceiling, past.replicas)
    return min(max(current, up_floor), down_ceiling)


def _period_start(policy_period: int, current: int, history: History, now: datetime) -> int:
    added = history.replicas_changed_within(policy_period, now, up=True)
    removed = history.replicas_changed_within(policy_period, now, up=False)
    return current - added + removed


def _proposals(
    current: int, history: History, now: datetime, rules: Rules, *, up: bool
) -> list[int]:
    """Each policy's bound on the count, from the count at the start of its period."""
    proposals = []
    for policy in rules.policies:
        start = _period_start(policy.period_seconds, current, history, now)
        if policy.type is ScalingPolicyType.REPLICAS:
            proposals.append(start + policy.value if up else start - policy.value)
        elif up:  # rounded up, or a small group could never grow by a percentage
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
        else:  # truncated, as upstream
            proposals.append(int(start * (1 - policy.value / 100)))
    return proposals


def scale_up_limit(current: int, history: History, now: datetime, rules: Rules) -> int:
    """The most replicas the scale-up policies allow right now."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    proposals = _proposals(current, history, now, rules, up=True)
    limit = min(proposals) if rules.select_policy is SelectPolicy.MIN else max(proposals)
    return max(limit, current)


def scale_down_limit(current: int, history: History, now: datetime, rules: Rules) -> int:
    """The fewest replicas the scale-down policies allow right now."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    proposals = _proposals(current, history, now, rules, up=False)
    limit = max(proposals) if rules.select_policy is SelectPolicy.MIN else min(proposals)
    return min(limit, current)


@dataclass(frozen=True)
class RateResult:
    desired: int
    limited_by: str | None  # "scale-up-rate", "scale-down-rate", "max", "min", "scaling-disabled"


def limit_rate(
    desired: int,
    current: int,
    *,
    lowest: int,
    highest: int,
    history: History,
    now: datetime,
    up: Rules,
    down: Rules,
) -> RateResult:
    if desired > current:
        limit = scale_up_limit(current, history, now, up)
        if desired <= min(highest, limit):
            return RateResult(desired, None)
        if limit < highest:
            why = (
                "scaling-disabled" if up.select_policy is SelectPolicy.DISABLED else "scale-up-rate"
            )
            return RateResult(limit, why)
        return RateResult(highest, "max")
    if desired < current:
        limit = scale_down_limit(current, history, now, down)
        if desired >= max(lowest, limit):
            return RateResult(desired, None)
        if limit > lowest:
            why = (
                "scaling-disabled"
                if down.select_policy is SelectPolicy.DISABLED
                else "scale-down-rate"
            )
            return RateResult(limit, why)
        return RateResult(lowest, "min")
    return RateResult(desired, None)


def longest_period(*rules: Rules) -> int:
    return max(policy.period_seconds for r in rules for policy in r.policies)
