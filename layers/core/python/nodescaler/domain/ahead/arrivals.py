"""How fast a group's pods arrive, learnt from one evaluation to the next, and the buffers
it sizes: a `fromArrivals` buffer holds the pods a boot time of arrivals brings.

Each evaluation counts the group's pods (those on its Ready nodes and those pending for
it, DaemonSets and a buffer's own virtual pods aside); what came since the last count,
when more came than left, is its arrivals, over the time since. The rate kept is the
highest seen lately: a new count's rate when higher, else the rate kept before, forgotten
with a 15-minute time constant. So a burst sizes the buffer at the next evaluation (room
errs towards room, as a forecast does), and a quiet cluster lets it fall towards zero,
and the buffer to its `minPods`, within the hour. The pods it sizes are rate × (the
group's boot time + the time between looks), to the nearest pod, within the buffer's
bounds. The boot time is the forecast's lead time (`domain.forecast.lead_time`: the p90
of its launches as measured). The time between looks is there because the room is seen
only when the group is evaluated (the fast path watches pending pods, and asks for an
evaluation when a buffer's room runs short only where the rate says it would be missed:
`domain.ahead.recheck`): room that runs short just after one evaluation is asked for at
the next, so the buffer also holds what arrives until then, the longest gap between counts lately (a
tick's interval, though the fast path brings some evaluations forward). Karpenter users
ask for this as a spare-capacity buffer (aws/karpenter-provider-aws#3240); Cluster
Autoscaler's users size overprovisioning placeholders by hand.

Until a rate is learnt, room errs towards room: a group never counted keeps the most its
buffers allow (`maxPods`, a reservation's written target), and from its first count that
room is forgotten as a learnt rate is, with the same time constant. A new group, or one
whose state was lost, is not caught without room by the first pods it sees; the quiet it
learns lets the room fall. A count after an hour without one learns afresh the same way.

A reservation's `headroom: fromArrivals` is the same room for a `Utilization` target: the
room the target keeps is used × (100 / target − 1); the room the expected arrivals need
(the same pods as a buffer's), at the group's average pod, is used × expected / pods.
The smaller of the two is kept, so the target becomes 100 / (1 + expected / pods), never
below the written one: a quiet cluster packs towards 100 %, a busy one keeps the
target's room.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.domain.policy import (
    ArrivalsSizing,
    CapacityBuffer,
    MetricBase,
    NodeGroupPolicy,
    PendingPodsMetric,
)

FORGET = timedelta(minutes=15)  # the running mean's time constant
STALE = timedelta(hours=1)  # a count older than this is not compared with: start afresh
# the most room's weight below which the rate alone sizes the room: under half a pod of
# the largest maxPods (10,000), so the room fades out rather than drops
FORGOTTEN = 0.00005


@dataclass(frozen=True)
class Arrivals:
    """The group's pods at its last count, their arrival rate so far (pods a minute), the
    first count (None before it, or as stored by a build that did not keep it) and the
    longest time between two counts lately."""

    pods: int | None = None
    at: datetime | None = None
    per_minute: float = 0.0
    since: datetime | None = None
    longest_gap: timedelta = timedelta(0)

    def observed(self, now: datetime, pods: int) -> Arrivals:
        """With a new count of the group's pods at `now`."""
        if self.at is not None and now <= self.at:
            return self  # the same instant, or a clock gone back: nothing to learn from
        if self.pods is None or self.at is None:
            return Arrivals(pods, now, self.per_minute, since=now)
        gap = now - self.at
        kept = math.exp(-gap / FORGET)  # the weight of what was learnt before
        if gap > STALE:  # nothing counted for long: what came meanwhile is not a rate, and
            # what was learnt is as good as unknown: learnt again, erring towards room
            return Arrivals(pods, now, round(self.per_minute * kept, 4), since=now)
        rate = max(pods - self.pods, 0) / (gap / timedelta(minutes=1))
        # the longest gap lately: a gap an hour old counts for e^-1 of itself
        longest = max(gap, self.longest_gap * math.exp(-gap / STALE))
        return Arrivals(
            pods,
            now,
            round(max(rate, kept * self.per_minute), 4),
            self.since,
            timedelta(seconds=round(min(longest, FORGET).total_seconds(), 1)),
        )

    def arriving_in(self, span: timedelta) -> float:
        """The pods expected to arrive in `span` (a boot time, and the time between looks)."""
        return self.per_minute * span / timedelta(minutes=1)

    def between_looks(self, now: datetime) -> timedelta:
        """How long the room may go unlooked at: the longest time between two counts lately
        (a tick's interval, where the fast path brings some evaluations forward), or the
        time since the last when longer; at most `FORGET`, none before the first count."""
        if self.at is None:
            return timedelta(0)
        # longest_gap is never negative, so a clock gone back counts for nothing
        return min(max(now - self.at, self.longest_gap), FORGET)

    def unlearnt(self, now: datetime) -> float:
        """The weight still given to the most room allowed, while the rate is learnt: 1
        before the first count, forgotten from it as a learnt rate is; 0 for a rate
        stored without its first count (learnt by an older build)."""
        if self.at is None:
            return 1.0
        if self.since is None:
            return 0.0
        weight = math.exp(-max(now - self.since, timedelta(0)) / FORGET)
        return weight if weight >= FORGOTTEN else 0.0  # past 150 minutes: learnt

    def dump(self) -> str:
        at = None if self.at is None else self.at.isoformat()
        since = None if self.since is None else self.since.isoformat()
        return json.dumps(
            {
                "pods": self.pods,
                "at": at,
                "per_minute": self.per_minute,
                "since": since,
                "longest_gap_s": self.longest_gap.total_seconds(),
            }
        )

    @classmethod
    def load(cls, text: str) -> Arrivals:
        """From `dump`'s text; `ValueError` (or KeyError, TypeError) when it is not one."""
        stored = json.loads(text)
        pods, at, rate = stored["pods"], stored["at"], float(stored["per_minute"])
        if pods is not None and (not isinstance(pods, int) or pods < 0):
            raise ValueError(f"arrivals: {pods!r} pods")
        if not 0 <= rate < 1e6:
            raise ValueError(f"arrivals: {rate!r} pods a minute")
        longest = float(stored.get("longest_gap_s", 0))
        if not 0 <= longest <= FORGET.total_seconds():
            raise ValueError(f"arrivals: {longest!r} s between counts")
        since = _instant(stored.get("since"))
        return cls(pods, _instant(at), rate, since, timedelta(seconds=longest))


def _instant(text: str | None) -> datetime | None:
    when = None if text is None else datetime.fromisoformat(text)
    if when is not None and when.tzinfo is None:
        raise ValueError(f"arrivals: {text!r} has no time zone")
    return when


def sized_by_arrivals(
    policy: NodeGroupPolicy, arrivals: Arrivals, boot: timedelta, source: str, now: datetime
) -> tuple[NodeGroupPolicy, str]:
    """The policy with its buffers and its reservations' headroom sized from arrivals at
    `now`, and how, for the decision ("" when nothing is sized by arrivals)."""
    policy, buffers = sized_buffers(policy, arrivals, boot, source, now)
    policy, reservations = sized_reservations(policy, arrivals, boot, source, now)
    return policy, " | ".join(note for note in (buffers, reservations) if note)


def sized_reservations(
    policy: NodeGroupPolicy, arrivals: Arrivals, boot: timedelta, source: str, now: datetime
) -> tuple[NodeGroupPolicy, str]:
    """The policy with each reservation whose headroom is `fromArrivals` given the target
    that keeps room for a boot time of arrivals, within its written target's room; how,
    for the decision ("" when none is). Until the group's pods are counted (or with none
    to size a pod from), the written target; while its rate is learnt, at least the
    written room's unlearnt weight."""
    if not any(m.headroom_from_arrivals for m in policy.spec.metrics):
        return policy, ""
    expected, rate = _expected(arrivals, boot, source, now)
    unlearnt = arrivals.unlearnt(now)
    metrics = [
        _with_headroom(m, arrivals.pods, expected, unlearnt) if m.headroom_from_arrivals else m
        for m in policy.spec.metrics
    ]
    spec = policy.spec.model_copy(update={"metrics": metrics})
    said = ", ".join(
        f"{m.key} {m.target.amount:g}% ({w.target.amount:g}% written)"
        for m, w in zip(metrics, policy.spec.metrics, strict=True)
        if m.headroom_from_arrivals
    )
    note = (
        f"headroom from arrivals: {rate} pods of "
        f"{arrivals.pods if arrivals.pods is not None else 'uncounted'}{_learning(unlearnt)}: "
        f"{said}"
    )
    return policy.model_copy(update={"spec": spec}), note


def _with_headroom(
    metric: MetricBase, pods: int | None, expected: float, unlearnt: float
) -> MetricBase:
    """The reservation with the target keeping room for `expected` of its `pods` more, or
    for the `unlearnt` share of the written target's room when that is more."""
    written = metric.target.amount
    if not pods:  # nothing counted: no pod's share of the requests to size the room by
        return metric
    expected = max(expected, unlearnt * pods * (100 / written - 1))
    # rounded down to a tenth of a percent (towards room): a target a human can read
    share = math.floor(1000 / (1 + expected / pods)) / 10
    target = metric.target.model_copy(update={"average_utilization": max(written, share)})
    return metric.model_copy(update={"target": target})


def sized_buffers(
    policy: NodeGroupPolicy, arrivals: Arrivals, boot: timedelta, source: str, now: datetime
) -> tuple[NodeGroupPolicy, str]:
    """The policy with each `fromArrivals` buffer sized (its `pods` set), and how, for the
    decision ("" when no buffer is sized by arrivals). `boot`: the group's boot time,
    `source` where it comes from."""
    if not any(b.from_arrivals for b in _buffers(policy)):
        return policy, ""
    expected, rate = _expected(arrivals, boot, source, now)
    unlearnt = arrivals.unlearnt(now)
    metrics = [
        _sized(m, expected, unlearnt) if isinstance(m, PendingPodsMetric) else m
        for m in policy.spec.metrics
    ]
    spec = policy.spec.model_copy(update={"metrics": metrics})
    sized = policy.model_copy(update={"spec": spec})
    said = ", ".join(b.describe() for b in _buffers(sized) if b.from_arrivals)
    return sized, f"buffer from arrivals: {rate} pods{_learning(unlearnt)}: {said}"


def _expected(arrivals: Arrivals, boot: timedelta, source: str, now: datetime) -> tuple[float, str]:
    """The pods expected before a node asked for at the next look is Ready: those a boot
    time brings, and the time between looks (room that runs short just after one is
    seen at the next); with the decision's words for it."""
    looks = arrivals.between_looks(now)
    expected = arrivals.arriving_in(boot + looks)
    span = f"{boot.total_seconds() / 60:.1f} min boot ({source})"
    if looks:
        span = f"({span} + {looks.total_seconds() / 60:.1f} min between looks)"
    return expected, f"{arrivals.per_minute:.2f} pods/min × {span} = {expected:.1f}"


def _learning(unlearnt: float) -> str:
    """The note's words for the room kept while the rate is learnt ("" once it is)."""
    if unlearnt < 0.005:  # it would read 0%
        return ""
    return f", {unlearnt:.0%} of the most room kept while the rate is learnt"


def _buffers(policy: NodeGroupPolicy) -> list[CapacityBuffer]:
    return [
        b
        for m in policy.spec.metrics
        if isinstance(m, PendingPodsMetric)
        for b in m.pending_pods.buffer
    ]


def _sized(metric: PendingPodsMetric, expected: float, unlearnt: float) -> PendingPodsMetric:
    """The metric with its `fromArrivals` buffers holding the pods `expected` in a boot
    time, or the `unlearnt` share of their `maxPods` when that is more, to the nearest
    pod, within their bounds."""
    buffers = [
        b
        if (sizing := b.from_arrivals) is None
        else b.model_copy(update={"pods": _nearest(expected, unlearnt, sizing)})
        for b in metric.pending_pods.buffer
    ]
    source = metric.pending_pods.model_copy(update={"buffer": buffers})
    return metric.model_copy(update={"pending_pods": source})


def _nearest(expected: float, unlearnt: float, sizing: ArrivalsSizing) -> int:
    """The buffer's pods: the expected arrivals, or the unlearnt share of its most room
    when more, to the nearest pod, within its bounds."""
    pods = math.floor(max(expected, unlearnt * sizing.max_pods) + 0.5)
    return min(max(pods, sizing.min_pods), sizing.max_pods)
