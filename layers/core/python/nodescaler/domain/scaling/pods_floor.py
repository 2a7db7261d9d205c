"""The floors a group's pods put under a scale-in, where the cluster is read.

Now: no scale-in below the nodes the group's pods need, in the cluster's view (an estimate
of their packing), beyond the nodes that view found it could shed (unneeded, or empty):
their pods would be evicted into no room, wait, and ask again (churn). Where the policy
moves no pod (`consolidation: WhenEmpty`), no scale-in below the nodes pods run on
either: another metric's scale-in would drain them (a worker evicted starts its task
again). Limit `pods-need-nodes`.

Recently: no scale-in below the most nodes they needed within the policy's scale-down
window. When a group's pods leave its nodes (KEDA lets its workers go, a burst ends), the
window the user wrote for the group's demand holds its nodes too, from the last read that
saw them needed, as Cluster Autoscaler holds a node its unneeded time from when its pods
left: a demand back within the window finds its nodes. A keep of one launch time (the
ski-rental rule, before) lost to Cluster Autoscaler tuned on bursts back within the window
(Stable Diffusion requests replayed from Alibaba's trace, KEDA workers on bursts of API
requests: 1.15 to 1.38 times its waits), where the window ties or wins both waits and
idle. Its memory is the nodes the pods needed at each evaluation (`History.needs`, each
read in force until the next), kept one window; a window of 0 sheds at once; a read
older than the window holds nothing while the cluster is unread; it never adds a node.
Limit `recently-needed`.

Rising: no node goes while the demand rises (this evaluation's recommendation above the
last one's). The window may end as a cron's next batch lands: a node let go then, or
drained of the workers just placed on it, is bought back a boot later (quarter-hourly
export batches, `tests/sandbox/test_rising_demand.py`: waits 1.5 times Cluster Autoscaler
tuned's, whose nodes each keep their own unneeded time and took the batch). A window of 0
sheds at once all the same. Limit `rising-demand`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.domain.policy import NodeGroupPolicy, PendingPodsMetric
from nodescaler.domain.policy.pending_pods_source import Consolidation
from nodescaler.domain.scaling.decision import Limit, MetricOutcome, MetricStatus
from nodescaler.domain.scaling.history import History

UNREAD = 0  # what an evaluation that could not read the cluster records as needed


@dataclass(frozen=True)
class BootTime:
    """How long re-acquiring one of the group's nodes takes, and where that comes from."""

    seconds: float
    source: str  # e.g. "p90 of the last 20 cold launches"


@dataclass(frozen=True)
class Kept:
    """A scale-in after the keep: the size, the history with what the pods need now, and
    why nodes were kept ("": none was)."""

    desired: int
    history: History
    why: str = ""


def keep_seconds(policy: NodeGroupPolicy) -> float:
    """How long the group keeps a node once its pods stopped needing it: its scale-down
    window."""
    return float(_window(policy))


def _window(policy: NodeGroupPolicy) -> int:
    return policy.spec.behavior.down.stabilization_window_seconds


def pods_need(outcomes: Sequence[MetricOutcome]) -> int | None:
    """The nodes the group's pods need now in the cluster's view; None when unread."""
    return max((o.pods_need for o in outcomes if o.pods_need is not None), default=None)


def floors_under_scale_in(
    desired: int,
    current: int,
    *,
    policy: NodeGroupPolicy,
    outcomes: Sequence[MetricOutcome],
    history: History,
    now: datetime,
    boot: BootTime | None,
    limits: list[Limit],
    rising: bool = False,
) -> Kept:
    """Both floors, each named in `limits` when it holds the scale-in back: first the nodes
    the group's pods need now (`not_below_pods_need`); then no scale-in below the most nodes
    they needed at any time within the scale-down window, as read before this evaluation
    (each read in force until the next), by a read no older than the window (it counts
    from a read, as it does for a recommendation), never above the current size; `boot`,
    how long re-acquiring one takes, is said with it. Returned with the history holding
    what they need now. Last, while the demand rises (`rising`: this evaluation's
    recommendation above the last one's), no node goes at all (a window of 0 sheds at
    once all the same)."""
    desired = not_below_pods_need(desired, current, outcomes, limits, moves_pods(policy))
    keep, need = keep_seconds(policy), pods_need(outcomes)
    # an evaluation that could not read the cluster ends the read before it (recorded as
    # needing nothing it knows of): read again later, that old read would otherwise count
    # as in force all through the gap, and bring back nodes the gap let go
    recorded = history.with_need(now, UNREAD if need is None else need, keep)
    if desired < current and rising and need is not None and keep > 0:
        limits.append(Limit.RISING_DEMAND)
        return Kept(current, recorded)
    if desired >= current or keep <= 0:
        return Kept(desired, recorded)
    since = now - timedelta(seconds=keep)
    needed = history.needed_since(since, since)  # a read within the window, in force or not
    if needed is None or needed <= max(desired, need or 0):
        return Kept(desired, recorded)
    floor = min(needed, current)
    limits.append(Limit.RECENTLY_NEEDED)
    why = f"keeps {floor - desired} of the nodes its pods needed within its {keep:.0f}s window"
    if boot is not None:
        why += f": re-acquiring one takes {boot.seconds:.0f}s ({boot.source})"
    return Kept(floor, recorded, why)


def moves_pods(policy: NodeGroupPolicy) -> bool:
    """Whether the group's scale-in may move pods to pack them: not where a PendingPods
    metric sheds only empty nodes."""
    return not any(
        isinstance(m, PendingPodsMetric)
        and m.pending_pods.consolidation is Consolidation.WHEN_EMPTY
        for m in policy.spec.metrics
    )


def not_below_pods_need(
    desired: int,
    current: int,
    outcomes: Sequence[MetricOutcome],
    limits: list[Limit],
    packs: bool,
) -> int:
    """No scale-in below the nodes the group's pods need now, beyond the nodes the
    cluster's view found it could shed; nor, where it moves no pod (not `packs`), below
    the nodes that view did not find it could shed."""
    floors = [
        min(o.pods_need, current - _sheddable(o, current))
        if packs
        else current - _sheddable(o, current)
        for o in outcomes
        if o.pods_need is not None
    ]
    floor = min(max(floors, default=0), current)
    if desired >= floor:
        return desired
    limits.append(Limit.PODS_NEED_NODES)
    return floor


def _sheddable(outcome: MetricOutcome, current: int) -> int:
    """The nodes a cluster reading found the group could shed: a PendingPods metric's vote
    to shed its unneeded nodes, else the nodes it found empty of pods."""
    shed = 0
    if outcome.status is MetricStatus.UNNEEDED and outcome.recommendation is not None:
        shed = current - outcome.recommendation
    return max(shed, outcome.empty or 0)
