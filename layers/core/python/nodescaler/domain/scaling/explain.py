"""A decision in one line a human can act on: what happens, which metric drove it, what
held it back."""

from __future__ import annotations

from nodescaler.domain.scaling.decision import Decision, Limit, MetricStatus
from nodescaler.domain.scaling.metric_outcome import votes

_LIMIT_PHRASES = {
    Limit.TOLERANCE: "every metric is within tolerance of its target",
    Limit.MISSING_METRIC: "a metric is missing, stale or invalid, so no scale-in",
    Limit.STABILIZATION: "held by the stabilization window",
    Limit.SCALE_UP_RATE: "limited by the scale-up rate",
    Limit.SCALE_DOWN_RATE: "limited by the scale-down rate",
    Limit.SCALING_DISABLED: "scaling in this direction is disabled",
    Limit.FORECAST: "the forecast asks for more than the live metrics",
    Limit.ZONAL_SHIFT: "held while its zones are shifted away, or can't be told",
    Limit.BOUNDS_UNREAD: "its EKS node group's scaling config is unread, so no scale-in",
    Limit.EMPTY_ONLY: "a metric is missing, stale or invalid, so only nodes empty of pods go",
    Limit.PODS_NEED_NODES: "no scale-in below the nodes its pods need: they would wait for room",
    Limit.RISING_DEMAND: "no node goes while its demand rises: it would be needed again",
    Limit.CHURNED: "and by the count in force as it began, as nodes let go lately were "
    "bought back within it",
}


def _limit_phrase(limit: Limit, decision: Decision, down_window_seconds: int) -> str:
    source = f" ({decision.group_bounds})" if decision.group_bounds else ""
    if limit is Limit.MIN:
        return f"at the minimum {decision.min_replicas}{source}"
    if limit is Limit.MAX:
        return f"at the maximum {decision.max_replicas}{source}"
    if limit is Limit.BACKOFF and decision.backoff is not None:
        until, reason = decision.backoff.until, decision.backoff.reason
        return f"backed off until {until:%H:%M:%S}Z after a failed scale-up: {reason}"
    if limit is Limit.PROTECTED:
        return f"{decision.protected} instances are protected from scale-in"
    if limit is Limit.CLUSTER_LIMIT:
        return f"capped by the cluster's {decision.cluster_limit}"
    if limit is Limit.SCALE_IN_WINDOW:
        return decision.scale_in_window
    if limit is Limit.RECENTLY_NEEDED:
        return decision.kept_recently_needed
    if limit is Limit.FALLBACK:
        return "; ".join(
            f"{o.name} in fallback {o.fallback}"
            + (f" → {o.recommendation}" if o.recommendation is not None else "")
            + f" since {o.failing_since:%Y-%m-%d %H:%M:%S}Z"
            for o in decision.metrics
            if o.fallback
        )
    return _window_phrase(limit, decision, down_window_seconds) or _LIMIT_PHRASES[limit]


def _window_phrase(limit: Limit, decision: Decision, down_window_seconds: int) -> str:
    """What the scale-down window held, or let go past it; else nothing."""
    if limit is Limit.UNNEEDED_TIME:
        return f"but nodes empty and unneeded for {down_window_seconds}s go"
    if limit is Limit.STABILIZATION and decision.recommendation < decision.current:
        # the window's highest, not a timer on this one (which a reader took it for); and
        # a scale-in it cut short says it went only so far (read as no scale-in at all)
        went = (
            decision.desired < decision.current and Limit.UNNEEDED_TIME not in decision.limited_by
        )
        held = "only as far as" if went else "held by"
        return (
            f"{held} the scale-down window: no lower than its highest recommendation of the "
            f"last {down_window_seconds}s"
        )
    return ""


def explain(decision: Decision, down_window_seconds: int, leaving: int = 0) -> str:
    """One line a human can act on: what happens, which metric drove it, what held it back;
    `leaving`: the instances in service over the desired count that nodescaler's own
    scale-in is still taking (an excess of another cause, a refresh, is not its to tell)."""
    current, desired = decision.current, decision.desired
    if desired > current:
        parts = [f"scale up {current} → {desired}"]
    elif desired < current and Limit.BACKOFF in decision.limited_by:
        parts = [f"abort the scale-up {current} → {desired}"]  # no instance is removed
    elif desired < current:
        parts = [f"scale down {current} → {desired}"]
    else:
        parts = [f"hold at {current}"]
    voters = [o for o in decision.metrics if votes(o) and o.recommendation is not None]
    if Limit.FORECAST in decision.limited_by:  # the forecast drove it
        voters = [o for o in decision.metrics if o.status is MetricStatus.FORECAST]
    voters = voters or [o for o in decision.metrics if o.status is MetricStatus.UNNEEDED]
    driver = max(voters, key=lambda o: o.recommendation or 0, default=None)
    if driver is not None:
        parts.append(f"{driver.name}: {driver.detail} → {driver.recommendation}")
    if broken := [o for o in decision.metrics if o.status.broken]:
        parts.append("; ".join(f"{o.name} {o.status}: {o.detail}" for o in broken))
    phrases = [_limit_phrase(limit, decision, down_window_seconds) for limit in decision.limited_by]
    if desired != decision.recommendation and not phrases:
        phrases.append(f"recommendation {decision.recommendation}")
    if phrases:
        parts.append(", ".join(phrases))
    if leaving > 0 and desired <= current:
        # a scale-in its termination policy keeps waiting (a budget, a pod that stays, a
        # Job) reads "hold" for hours; this says where the rest of the answer is
        parts.append(
            f"{leaving} in service over the desired {current} leave as the termination policy "
            "frees them (the terminate function logs what keeps each)"
        )
    return " | ".join(parts)
