"""The memory the behavior rules need: recent raw recommendations, recent scale events,
and the nodes the group's pods needed at recent evaluations (`pods_floor`).

Plain, immutable data in and out, so the state store can persist it between evaluations.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from itertools import pairwise

from pydantic import AwareDatetime, BaseModel, ConfigDict

# Bounds the persisted item (DynamoDB allows 400 KB) whatever the windows and the rate.
MAX_ENTRIES = 1000
# Nodes timed as unneeded (a name is up to 253 characters): those past it are not timed,
# so they wait for the window as before
MAX_UNNEEDED = 200


class TimedRecommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: AwareDatetime
    replicas: int


class ScaleEvent(BaseModel):
    """A change of the desired count that was acted on; `change` > 0 is a scale-up."""

    model_config = ConfigDict(frozen=True)

    at: AwareDatetime
    change: int


class UnneededSince(BaseModel):
    """A node of the group the cluster's view has found unneeded at every evaluation since."""

    model_config = ConfigDict(frozen=True)

    node: str
    since: AwareDatetime


class History(BaseModel):
    model_config = ConfigDict(frozen=True)

    recommendations: tuple[TimedRecommendation, ...] = ()
    scale_events: tuple[ScaleEvent, ...] = ()
    # the nodes the group's pods needed (the cluster's view) at recent evaluations, kept one
    # scale-down window: a node they needed that recently is not shed (`pods_floor`)
    needs: tuple[TimedRecommendation, ...] = ()
    # each node unneeded at every evaluation since when (Cluster Autoscaler's unneeded time),
    # and when they were last read
    unneeded: tuple[UnneededSince, ...] = ()
    unneeded_read: AwareDatetime | None = None
    # its last scale-in, and the last scale-up that bought nodes back within a scale-down
    # window of one (churn: the window let go what the demand wanted back)
    scaled_in_at: AwareDatetime | None = None
    bought_back_at: AwareDatetime | None = None
    # its last acted-on change, however old (`scale_events` keep only a rate period's)
    last_change: ScaleEvent | None = None

    def with_unneeded(self, at: datetime, nodes: Sequence[str], trusted_seconds: float) -> History:
        """The nodes found unneeded at `at`, each since it has been at every evaluation: a
        node found needed (or not read) starts again, as Cluster Autoscaler's does, and so
        do all of them after a gap of more than `trusted_seconds` with no evaluation (what
        happened then is not known; a name may even be a new instance's)."""
        if not nodes:  # none unneeded, or the cluster unread: no node timed
            return self.model_copy(update={"unneeded": ()}) if self.unneeded else self
        read = self.unneeded_read
        fresh = read is None or not read <= at <= read + timedelta(seconds=trusted_seconds)
        known = {} if fresh else {u.node: u.since for u in self.unneeded}
        kept = tuple(UnneededSince(node=n, since=known.get(n, at)) for n in nodes)
        return self.model_copy(update={"unneeded": kept[:MAX_UNNEEDED], "unneeded_read": at})

    def unneeded_for(self, seconds: float, now: datetime, nodes: Collection[str]) -> int:
        """How many of `nodes` have been unneeded for at least `seconds`."""
        cutoff = now - timedelta(seconds=seconds)
        return sum(1 for u in self.unneeded if u.node in nodes and u.since <= cutoff)

    def with_recommendation(self, at: datetime, replicas: int, keep_seconds: int) -> History:
        """Add a raw recommendation (each in force until the next); drop those no longer in
        force `keep_seconds` before `at`, the longest window. Of a run of equal ones only the
        first and the latest are kept: whenever one between is in a window, so is the latest."""
        read = TimedRecommendation(at=at, replicas=replicas)
        return self.model_copy(
            update={"recommendations": _in_runs(self.recommendations, read, keep_seconds)}
        )

    def recommended_before(self, at: datetime) -> int | None:
        """The latest recommendation recorded before `at`: the last evaluation's."""
        return next((r.replicas for r in reversed(self.recommendations) if r.at < at), None)

    def in_force_at(self, at: datetime, trusted_seconds: float) -> int | None:
        """The recommendation in force at `at`: the latest made at or before it, by no more
        than `trusted_seconds` (past a longer gap with no evaluation, what held is not
        known). None: none was."""
        latest = next((r for r in reversed(self.recommendations) if r.at <= at), None)
        trusted = latest is not None and at - latest.at <= timedelta(seconds=trusted_seconds)
        return latest.replicas if latest is not None and trusted else None

    def with_need(self, at: datetime, nodes: int, keep_seconds: float) -> History:
        """Add the nodes the group's pods need, read at `at` (each read in force until the
        next); drop the reads no longer in force `keep_seconds` before `at`. Of a run of
        equal reads only the first and the latest are kept: when it began, and when it was
        last read."""
        read = TimedRecommendation(at=at, replicas=nodes)
        return self.model_copy(update={"needs": _in_runs(self.needs, read, keep_seconds)})

    def needed_since(
        self, since: datetime, read_after: datetime, read_again: datetime | None = None
    ) -> int | None:
        """The most nodes the group's pods needed at any time after `since`, by a read made
        after `read_after`: each read in force until the next, the latest until
        `read_again` (when the cluster was read again, with no entry yet), else only at its
        own time. None: no such read."""
        needs = self.needs
        ends = [after.at for after in needs[1:]] + [read_again or needs[-1].at] if needs else []
        in_force = [
            n.replicas
            for n, end in zip(needs, ends, strict=True)
            if end > since and n.at > read_after
        ]
        return max(in_force, default=None)

    def with_scale_event(self, at: datetime, before: int, after: int, keep_seconds: int) -> History:
        """Record an acted-on change; drop events older than the longest rate-policy period."""
        cutoff = at - timedelta(seconds=keep_seconds)
        kept = [e for e in self.scale_events if e.at > cutoff]
        last = self.last_change
        if after != before:
            last = ScaleEvent(at=at, change=after - before)
            kept.append(last)
        return self.model_copy(
            update={"scale_events": tuple(kept[-MAX_ENTRIES:]), "last_change": last}
        )

    def with_scale_in(self, at: datetime) -> History:
        """The group let nodes go at `at`."""
        return self.model_copy(update={"scaled_in_at": at})

    @property
    def shrinking(self) -> bool:
        """Whether the group's latest change was a scale-in not yet done (`settled`): its
        termination policy may still be waiting for the nodes it means to take."""
        return self.last_change is not None and self.last_change.change < 0

    def settled(self, in_service: int, desired: int) -> History:
        """Once no more are in service than desired, the last change is done: an excess
        after it has another cause (an instance refresh, a rebalance), not this one."""
        if self.last_change is None or in_service > desired:
            return self
        return self.model_copy(update={"last_change": None})

    def with_bought_back(self, at: datetime, window_seconds: float) -> History:
        """A scale-up its demand asked for at `at`: churn when it came within
        `window_seconds` of the last scale-in (nodes bought back)."""
        last_in = self.scaled_in_at
        if last_in is None or at - last_in > timedelta(seconds=window_seconds):
            return self
        return self.model_copy(update={"bought_back_at": at})

    def replicas_changed_within(self, seconds: int, now: datetime, *, up: bool) -> int:
        """Replicas added (up) or removed (down) by events strictly newer than `seconds` ago."""
        cutoff = now - timedelta(seconds=seconds)
        return sum(
            abs(e.change) for e in self.scale_events if e.at > cutoff and (e.change > 0) == up
        )


def _in_runs(
    entries: tuple[TimedRecommendation, ...], read: TimedRecommendation, keep_seconds: float
) -> tuple[TimedRecommendation, ...]:
    """`entries` with `read` added, each in force until the next: a run of equal counts kept
    as its first and its latest, and only those in force within `keep_seconds` of it. Past
    `MAX_ENTRIES` (more changes within a window than evaluations come), the oldest fold
    into one: their highest count, at the latest of their times, so a scale-in still waits
    for it (errs towards holding: while the overflow lasts, that count stays), where
    dropping them would shed early."""
    kept = list(entries)
    if len(kept) >= 2 and kept[-2].replicas == kept[-1].replicas == read.replicas:
        kept[-1] = read
    else:
        kept.append(read)
    cutoff = read.at - timedelta(seconds=keep_seconds)
    in_force = [n for n, after in pairwise(kept) if after.at > cutoff]
    in_force.append(kept[-1])
    if len(in_force) <= MAX_ENTRIES:
        return tuple(in_force)
    oldest, rest = in_force[: len(in_force) - MAX_ENTRIES + 1], in_force[-MAX_ENTRIES + 1 :]
    folded = TimedRecommendation(at=oldest[-1].at, replicas=max(n.replicas for n in oldest))
    return (folded, *rest)
