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
        """Add a raw recommendation; drop those no stabilization window can still see.

        An older entry with the same count as a newer one is dropped too: whenever it is
        inside a window the newer one is as well, so the windows' min and max are unchanged.
        """
        kept = _timed(self.recommendations, at, replicas, keep_seconds)
        return self.model_copy(update={"recommendations": kept})

    def recommended_before(self, at: datetime) -> int | None:
        """The latest recommendation recorded before `at`: the last evaluation's."""
        return next((r.replicas for r in reversed(self.recommendations) if r.at < at), None)

    def with_need(self, at: datetime, nodes: int, keep_seconds: float) -> History:
        """Add the nodes the group's pods need, read at `at` (each read in force until the
        next); drop the reads no longer in force `keep_seconds` before `at`. Of a run of
        equal reads only the first and the latest are kept: when it began, and when it was
        last read."""
        needs = list(self.needs)
        read = TimedRecommendation(at=at, replicas=nodes)
        if len(needs) >= 2 and needs[-2].replicas == needs[-1].replicas == nodes:
            needs[-1] = read
        else:
            needs.append(read)
        cutoff = at - timedelta(seconds=keep_seconds)
        kept = [n for n, after in pairwise(needs) if after.at > cutoff]
        kept.append(needs[-1])
        return self.model_copy(update={"needs": tuple(kept[-MAX_ENTRIES:])})

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
        if after != before:
            kept.append(ScaleEvent(at=at, change=after - before))
        return self.model_copy(update={"scale_events": tuple(kept[-MAX_ENTRIES:])})

    def replicas_changed_within(self, seconds: int, now: datetime, *, up: bool) -> int:
        """Replicas added (up) or removed (down) by events strictly newer than `seconds` ago."""
        cutoff = now - timedelta(seconds=seconds)
        return sum(
            abs(e.change) for e in self.scale_events if e.at > cutoff and (e.change > 0) == up
        )


def _timed(
    entries: tuple[TimedRecommendation, ...], at: datetime, count: int, keep_seconds: float
) -> tuple[TimedRecommendation, ...]:
    cutoff = at - timedelta(seconds=keep_seconds)
    kept = [e for e in entries if e.at >= cutoff and e.replicas != count]
    kept.append(TimedRecommendation(at=at, replicas=count))
    return tuple(kept[-MAX_ENTRIES:])
