"""The figures a run is judged by, from what happened to each pod and each group.

Pure: the ledger of pods (`PodRecord`), the scale requests, the minutes' rows and the
budgets' looks in, numbers out, so each figure can be checked on a hand-made timeline
whose right answer is known. Times are minutes from the start of the run.

- A pod *waited* when the scheduler once found no node for it. Its wait runs from its
  creation to its binding (or to its going, or to the end of the run, if it never bound).
- A pod's *Ready time* runs from its creation to its turning Ready; like the wait, it is
  figured for the pods that waited, overall and by the group each bound to.
- A group's *demand-to-scale-request* time runs from a pod the group could take turning
  unschedulable to a scale-up of a group that can take that pod (or to the pod finding room
  without one). Another group's scale-up answers nothing: a pod that needs a GPU is not
  helped by more CPU nodes.
- A *reaction* runs from demand appearing to the scale request that answers it, in
  seconds: from a pod turning unschedulable to a scale-up of a group that can take it (a
  pod that found room first asked nothing new and is not counted), and from a queue's
  messages ÷ its target per node first exceeding the group's desired size (beyond the
  HPA's 10 % tolerance) to the group's next scale-up (or the queue falling back first).
  Given a `Charge` (`latency`), it runs from the pod's arrival second to the second the
  answering request takes effect, each side charged its own latencies; without one, from
  step to step.
- *Unschedulable pod-minutes* sum the pods waiting for a node, a step at a time (each
  step's count held for the step).
- A disruption budget is *short* in a minute it has too few healthy pods after it was
  first met; pods evicted count apart from pods killed with their instance, unevicted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

NEVER_SCHEDULED = "(never scheduled)"  # the group of a pod that never bound


@dataclass
class PodRecord:
    """One pod's life in a run."""

    name: str
    created: float
    unschedulable: float | None = None  # first found no node
    bound: float | None = None
    ready: float | None = None
    gone: float | None = None
    group: str | None = None  # of the node it was bound to
    node: str | None = None  # the node it was bound to
    node_launched: float | None = None  # the instance of the node it bound to, launched at
    takers: frozenset[str] = field(default_factory=frozenset)  # groups whose new node fits it
    gpu: bool = False  # asks for a GPU (Cluster Autoscaler waits longer for it: `latency`)
    # each taker's share of its new node the pod takes (`dominant_share`): what its wait saves
    shares: dict[str, float] = field(default_factory=dict)

    def waited(self) -> bool:
        return self.unschedulable is not None

    def wait(self, end: float) -> float:
        """From creation to binding (or going, or the end of the run)."""
        ended = next((t for t in (self.bound, self.gone) if t is not None), end)
        return max(ended - self.created, 0.0)


@dataclass(frozen=True)
class ScaleUp:
    minute: float
    group: str
    path: str = ""  # what brought it (`latency`: fast path, tick, scan)


# A SetDesiredCapacity a run made: (minute, group, desired, the cause of its evaluation)
DesiredWrite = tuple[float, str, int, str | None]


def undone_raises(
    rows: Sequence[Mapping[str, Any]], writes: Iterable[DesiredWrite], *, step_seconds: int
) -> list[dict[str, Any]]:
    """The raises of a group's desired capacity that its rows (one a group a step) never
    show, set back within their step: a launch that failed at once, the group then backed
    off and another asked, all in one step. Each was a scale request all the same, as the
    one a side whose failure it reads later shows in its rows; each is given at its step,
    with its evaluation's cause."""
    by_group: dict[str, list[tuple[float, int]]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append((row["minute"], row["desired"]))
    raised: dict[tuple[float, str], dict[str, Any]] = {}
    for minute, group, desired, cause in writes:
        step = math.ceil(round(minute * 60 / step_seconds, 6)) * step_seconds / 60
        seen = [(m, d) for m, d in by_group.get(group, ()) if m <= step + 1e-3]
        if len(seen) < 2 or abs(seen[-1][0] - step) > 1e-3 or (round(step, 3), group) in raised:
            continue
        before, after = seen[-2][1], seen[-1][1]
        if desired > before and after <= before:  # the rows show no raise in that step
            change = {"from": before, "to": desired, "cause": cause}
            raised[(round(step, 3), group)] = {"minute": round(step, 3), "group": group} | change
    return list(raised.values())


def as_row(pod: PodRecord) -> dict[str, Any]:
    """A pod's record for pods.json: its times in minutes, the group it bound to."""
    return {
        "pod": pod.name,
        "created": pod.created,
        "unschedulable": pod.unschedulable,
        "bound": pod.bound,
        "ready": pod.ready,
        "gone": pod.gone,
        "group": pod.group,
        "node": pod.node,
        "node_launched": pod.node_launched,
        "could_take_it": sorted(pod.takers),
    }


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with `share` of them at or below."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"pods": 0, "p50": None, "p99": None, "max": None}
    return {
        "pods": len(values),
        "p50": round(percentile(values, 0.5), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


def pod_waits(pods: Iterable[PodRecord], end: float) -> dict[str, dict[str, Any]]:
    """p50, p99 and max of the waits of pods that had to wait for a node: overall and by
    the group each bound to."""
    return _overall_and_by_group((p, p.wait(end)) for p in pods if p.waited())


def pod_ready(pods: Iterable[PodRecord]) -> dict[str, dict[str, Any]]:
    """p50, p99 and max of the time from creation to Ready of pods that had to wait for a
    node and turned Ready: overall and by the group each bound to."""
    return _overall_and_by_group(
        (p, p.ready - p.created) for p in pods if p.waited() and p.ready is not None
    )


def _overall_and_by_group(figures: Iterable[tuple[PodRecord, float]]) -> dict[str, dict[str, Any]]:
    by_group: dict[str, list[float]] = {}
    overall = []
    for pod, figure in figures:
        overall.append(figure)
        by_group.setdefault(pod.group or NEVER_SCHEDULED, []).append(figure)
    return {"overall": spread(overall)} | {g: spread(v) for g, v in sorted(by_group.items())}


def node_hours(rows: Iterable[Mapping[str, Any]], step_minutes: float = 1) -> float:
    """Nodes in service, step by step (a row is a group's step, `step_minutes` long), the
    instances a lifecycle hook holds while they drain (running in Terminating:Wait,
    billed), and what warm pools cost (their instances initialising, and those waiting at
    their state's share), in hours."""
    minutes = step_minutes * sum(
        float(r["in_service"]) + float(r.get("held", 0)) + float(r.get("warm_billed", 0))
        for r in rows
    )
    return round(minutes / 60, 2)


def dominant_share(requested: Mapping[str, float], allocatable: Mapping[str, float]) -> float:
    """How much of a node its pods' requests take, in node equivalents: the largest share
    of any resource the node offers (CPU, memory, GPUs), at most 1."""
    shares = [requested.get(r, 0) / a for r, a in allocatable.items() if a > 0]
    return min(max(shares, default=0.0), 1.0)


def idle_node_hours(rows: Iterable[Mapping[str, Any]], step_minutes: float = 1) -> float:
    """Capacity billed that no pod requested, in node-hours: `node_hours` (so what it bills,
    booting or warm instances, is idle in full or at its share) less, for each node in
    service each minute, its pods' dominant share (`used_nodes`: a node half requested is
    half idle). Dominant, not CPU alone: a node whose memory is taken holds no more pods.
    A row is a group's step, `step_minutes` long."""
    rows = list(rows)
    used = step_minutes * sum(float(r.get("used_nodes", 0)) for r in rows) / 60
    return round(max(node_hours(rows, step_minutes) - used, 0.0), 2)


def unschedulable_pod_minutes(rows: Iterable[Mapping[str, Any]], step_minutes: float = 1) -> float:
    """The pods waiting for a node, each step's count held for the step (`step_minutes`),
    summed. Every group's row of a step carries the same cluster-wide count, so a step
    counts once however many groups."""
    pending: dict[float, int] = {}
    for row in rows:
        pending.setdefault(row["minute"], row["pending_pods"])
    return round(sum(pending.values()) * step_minutes, 1)


def budget_short_minutes(looks: Iterable[tuple[float, str, int, int]]) -> list[int]:
    """The minutes in which a disruption budget had too few healthy pods, and fewer than it
    had had since it was last met: a disruption. Before it is first met its pods are still
    starting; and one short only because it asks for more (its deployment scaled up, the
    new pods starting) has lost no pod: nothing disrupted them. `looks`: (minute, budget,
    healthy pods, pods it asks to be healthy), in the order they were taken."""
    most: dict[str, int] = {}  # the healthy pods most since the budget was last met
    short: set[int] = set()
    for minute, budget, healthy, desired in looks:
        if healthy >= desired:
            most[budget] = healthy
        elif budget in most:
            if healthy < most[budget]:
                short.add(int(minute))
            most[budget] = max(most[budget], healthy)
    return sorted(short)


def disruption(
    *,
    evictions_asked: int,
    evicted: int,
    nodes_removed: int,
    killed: int,
    budget_short: Sequence[int],
) -> dict[str, Any]:
    """What scale-in cost the workloads: evictions done and refused by a budget, per node
    removed; pods killed with their instance, never evicted; minutes a budget was short."""
    return {
        "evictions": evicted,
        "evictions_refused_by_budget": evictions_asked - evicted,
        "nodes_removed": nodes_removed,
        "evictions_per_removed_node": round(evicted / nodes_removed, 2) if nodes_removed else None,
        "pods_killed_with_their_instance": killed,
        "disruption_budget_short_minutes": len(budget_short),
    }


def demand_to_scale_request(
    pods: Iterable[PodRecord], scale_ups: Sequence[ScaleUp], groups: Sequence[str], end: float
) -> dict[str, float]:
    """Per group, the longest time from a pod it could take turning unschedulable to a
    scale-up of a group that can take that pod (or the pod bound or gone first). A pod
    bound to a node launched before it needed one was answered before it asked (a worker
    KEDA made after the queue's nodes were asked for)."""
    longest = dict.fromkeys(groups, 0.0)
    for pod in pods:
        if pod.unschedulable is None or not pod.takers:
            continue
        since = pod.unschedulable
        if pod.node_launched is not None and pod.node_launched < since:
            continue
        answers = _answered(scale_ups, pod.takers, since)
        answers += [t for t in (pod.bound, pod.gone) if t is not None and t >= since]
        waited = min(answers, default=end) - since
        for group in pod.takers & longest.keys():
            longest[group] = max(longest[group], round(waited, 1))
    return longest


def metric_to_scale_request(
    rows: Iterable[Mapping[str, Any]],
    scale_ups: Sequence[ScaleUp],
    groups: Sequence[str],
    end: float,
) -> dict[str, float]:
    """Per group, the longest time from a metric of its last decision first asking for more
    nodes than the group had (crossing its target, beyond tolerance) to a scale-up of the
    group (a forecast is not demand: only live metrics count)."""
    longest = dict.fromkeys(groups, 0.0)
    since: dict[str, float] = {}
    for row in rows:
        group, minute = row["group"], row["minute"]
        if group not in longest:
            continue
        asks = any(
            m.get("recommendation") is not None
            and m["recommendation"] > row["desired"]
            and m["status"] == "ok"
            for m in (row.get("metrics") or {}).values()
        )
        if asks and group not in since:
            since[group] = minute
        elif not asks and group in since:
            start = since.pop(group)
            answered = [s.minute for s in scale_ups if s.group == group and s.minute >= start]
            longest[group] = max(longest[group], round(min(answered, default=minute) - start, 1))
    for group, start in since.items():  # still asking at the end
        answered = [s.minute for s in scale_ups if s.group == group and s.minute >= start]
        longest[group] = max(longest[group], round(min(answered, default=end) - start, 1))
    return longest


def longest(*figures: Mapping[str, float]) -> dict[str, float]:
    """Per group, the longest of several such figures."""
    return {group: max(f.get(group, 0.0) for f in figures) for group in figures[0]}


def fit_no_group(pods: Iterable[PodRecord]) -> list[str]:
    """The pods that waited and that no group's new node would fit."""
    return sorted(p.name for p in pods if p.waited() and not p.takers)


Reaction = tuple[frozenset[str], float]  # the groups it concerns, minutes to the answer
TOLERANCE = 0.1  # the HPA's default: a queue this little past its target asks for nothing


def _answered(scale_ups: Sequence[ScaleUp], groups: frozenset[str], since: float) -> list[float]:
    return [s.minute for s in _answers(scale_ups, groups, since)]


def _answers(scale_ups: Sequence[ScaleUp], groups: frozenset[str], since: float) -> list[ScaleUp]:
    since = round(since, 3)  # as the runner rounds a step's minute (10:20 is 10.333)
    return [s for s in scale_ups if s.minute >= since and s.group in groups]


class Charge(Protocol):
    """A side's latencies (`latency.Charged`): the seconds from demand arriving in the
    step of `since` (a minute) to `answer` taking effect."""

    def reaction(
        self, since: float, name: str, answer: ScaleUp, *, gpu: bool, pod: bool = False
    ) -> float: ...

    def arrival(self, seen: int, name: str) -> int:
        """The second demand named `name`, first seen at the step of `seen`, arrived."""
        ...


def pod_reactions(
    pods: Iterable[PodRecord],
    scale_ups: Sequence[ScaleUp],
    end: float,
    *,
    charge: Charge | None = None,
) -> list[Reaction]:
    """Each pod that turned unschedulable and that a group could take: the time to a
    scale-up of such a group before it bound or went (from its arrival second to the
    second the first of them takes effect, given a `charge`). A pod that found room without one
    (a node already on its way or there from the start, another pod gone) asked nothing
    new: it is not counted, whatever scale-up came before it bound (one for other pods, or
    a buffer)."""
    reactions = []
    for pod in pods:
        if pod.unschedulable is None or not pod.takers:
            continue
        since = pod.unschedulable
        room = min((t for t in (pod.bound, pod.gone) if t is not None and t >= since), default=end)
        answers = [s for s in _answers(scale_ups, pod.takers, since) if s.minute <= room]
        if not answers:
            continue
        if charge is None:
            arrived, waited = since, min(s.minute for s in answers) - since
        else:  # the first to take effect, of requests in one step by different paths
            arrived = charge.arrival(round(since * 60), pod.name) / 60
            waited = (
                min(charge.reaction(since, pod.name, s, gpu=pod.gpu, pod=True) for s in answers)
                / 60
            )
        # a node launched before the pod arrived, or there from the start when no request of
        # the first step answered it, was not launched for the pod (one request launches
        # for all the pods it answers, at the first one's second: no later pod's is its own)
        launched, first = pod.node_launched, min(s.minute for s in answers)
        if launched is None or not (launched < arrived or launched <= 0 < first):
            reactions.append((pod.takers, waited))
    return reactions


def queue_reactions(
    rows: Iterable[Mapping[str, Any]],
    scale_ups: Sequence[ScaleUp],
    targets: Mapping[str, Sequence[tuple[str, float]]],
    start: Mapping[str, int],
    end: float,
    *,
    charge: Charge | None = None,
    most: Mapping[str, int] | None = None,
) -> list[Reaction]:
    """Each time a group's queue (`targets`: group → (queue, messages per node)) first asks
    for more nodes than the group had at the step before (`start`: its size at the
    start): the time to the group's next scale-up (to its taking effect, given a
    `charge`), or to the queue no longer asking (or the `end`). A group at its maximum
    (`most`) is asked nothing: no request could answer, on either side."""
    reactions: list[Reaction] = []
    before, since = dict(start), dict[str, float]()
    most = most or {}
    for row in rows:
        group, minute = row["group"], row["minute"]
        if group not in targets:
            continue
        desired, before[group] = before.get(group, row["desired"]), row["desired"]
        asks = desired < most.get(group, math.inf) and any(
            (row["queues"].get(queue) or 0) / per_node > desired * (1 + TOLERANCE)
            for queue, per_node in targets[group]
        )
        if asks and group not in since:
            since[group] = minute
        if group not in since:
            continue
        answers = [
            s for s in _answers(scale_ups, frozenset({group}), since[group]) if s.minute <= minute
        ]
        if answers and charge is not None:
            first = min(answers, key=lambda s: s.minute)
            seconds = charge.reaction(since.pop(group), group, first, gpu=False)
            reactions.append((frozenset({group}), seconds / 60))
        elif answers or not asks or minute >= end:
            answered = min((s.minute for s in answers), default=minute)
            reactions.append((frozenset({group}), answered - since.pop(group)))
    return reactions


def reaction_seconds(pods: Sequence[Reaction], queues: Sequence[Reaction]) -> dict[str, Any]:
    """p50, p99 and max of the reactions in seconds: overall, to pending pods, to queues,
    and per group (a pod counts for each group that could take it)."""
    by_group: dict[str, list[float]] = {}
    for groups, minutes in [*pods, *queues]:
        for group in sorted(groups):
            by_group.setdefault(group, []).append(minutes)
    named = {
        "overall": [m for _, m in [*pods, *queues]],
        "pending_pods": [m for _, m in pods],
        "queue": [m for _, m in queues],
    }
    return {name: _seconds(values) for name, values in (named | by_group).items()}


def _seconds(minutes: Sequence[float]) -> dict[str, Any]:
    if not minutes:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    seconds = [round(m * 60) for m in minutes]
    return {
        "count": len(seconds),
        "p50": percentile(seconds, 0.5),
        "p99": percentile(seconds, 0.99),
        "max": max(seconds),
    }
