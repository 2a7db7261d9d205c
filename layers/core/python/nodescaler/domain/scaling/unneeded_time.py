"""How long each of a group's nodes has been unneeded, as Cluster Autoscaler times it: a node
the cluster's view finds unneeded at every evaluation for a whole scale-down window, and
empty now, has been held long enough. The window over recommendations remembers the group's
peak (a queue's backlog of ten minutes ago); this lets such a node go unless the demand now
wants it, as Cluster Autoscaler deletes a node unneeded for its unneeded time whatever the
group's other nodes did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, Reading


@dataclass(frozen=True)
class Spare:
    """The group's nodes the cluster's view found unneeded now, and which of them are empty."""

    nodes: tuple[str, ...] = ()
    empty: frozenset[str] = frozenset()


def spare_of(readings: Sequence[Reading | None]) -> Spare:
    """Of the pending-pods readings (the metric's, or the group's own pods'), the one naming
    the most empty nodes: its unneeded nodes, empty ones first (`unneeded_nodes`)."""
    named = [r for r in readings if isinstance(r, MetricReading) and r.candidates]
    if not named:
        return Spare()
    most = max(named, key=lambda r: r.empty_nodes or 0)
    return Spare(most.candidates, frozenset(most.candidates[: most.empty_nodes or 0]))


def held_long_enough(
    spare: Spare, history: History, now: datetime, *, window_seconds: int, current: int
) -> int:
    """How many of the group's `current` nodes stay once its empty nodes unneeded for at
    least `window_seconds` (its `history` timing them) go: all of them when none is due."""
    return current - history.unneeded_for(window_seconds, now, spare.empty)
