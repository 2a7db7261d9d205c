"""The history after a decision was acted on: its change counted against the rate policies
and scale-in windows, and whether the group let nodes go or its demand bought them back
(churn, which `autoscaler._stabilized` reads)."""

from __future__ import annotations

from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.descriptors import metric_type
from nodescaler.domain.scaling.behavior import longest_period
from nodescaler.domain.scaling.decision import Decision, Limit
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.metric_outcome import votes
from nodescaler.domain.scaling.scale_in_windows import HOUR


def record_scale(history: History, policy: NodeGroupPolicy, decision: Decision) -> History:
    """The history after acting on `decision`: its change now counts against the rate
    policies (and, for an hour, against its scale-in windows), and a scale-up within a
    scale-down window of a scale-in marks the group churned (`autoscaler._stabilized`)."""
    keep = longest_period(policy.spec.behavior.up, policy.spec.behavior.down)
    if policy.spec.scale_in_windows:
        keep = max(keep, int(HOUR.total_seconds()))
    recorded = history.with_scale_event(decision.at, decision.current, decision.desired, keep)
    window = policy.spec.behavior.down.stabilization_window_seconds
    if decision.desired < decision.current and _let_go(decision):
        return recorded.with_scale_in(decision.at)
    if decision.desired > decision.current and _demanded(policy, decision):
        return recorded.with_bought_back(decision.at, window)
    return recorded


def _let_go(decision: Decision) -> bool:
    """A scale-in the group chose: not an aborted scale-up (backoff), nor one back inside a
    maximum lowered."""
    return not {Limit.BACKOFF, Limit.MAX} & set(decision.limited_by)


def _demanded(policy: NodeGroupPolicy, decision: Decision) -> bool:
    """A scale-up its demand asked for: a metric of demand voted above the size (not a
    schedule's bound, a raised minimum or a forecast, which are no churn)."""
    bounds = {m.key for m in policy.spec.metrics if metric_type(m).lower_bound}
    return any(
        votes(o) and o.name not in bounds and (o.recommendation or 0) > decision.current
        for o in decision.metrics
    )
