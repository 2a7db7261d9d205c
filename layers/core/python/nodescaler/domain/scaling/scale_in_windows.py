"""Scale-in windows: hours in which a policy caps (or forbids) how many nodes may go.

A window is open from each firing of its cron `schedule` (in its time zone) for
`durationMinutes`. While one is open, the nodes removed in the last hour plus those a
decision would remove may not exceed its `maxNodesPerHour`; with several open, the
tightest wins. Nothing here ever adds a node: a window only holds a scale-in back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from nodescaler.domain.policy import ScaleInWindow
from nodescaler.domain.scaling.history import History

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class WindowRoom:
    window: ScaleInWindow
    room: int  # nodes that may still go this hour

    def describe(self) -> str:
        if self.window.allowed(0) == 0 and self.window.max_nodes_per_hour in (0, "0%"):
            return f"{self.window.describe()}: no scale-in"
        return f"{self.window.describe()}: {self.room} more may go this hour"


def is_open(window: ScaleInWindow, now: datetime) -> bool:
    local = now.astimezone(ZoneInfo(window.time_zone))
    base = local.replace(second=0, microsecond=0) + timedelta(minutes=1)
    fired: datetime = croniter(window.schedule, base).get_prev(datetime)
    return local - fired < timedelta(minutes=window.duration_minutes)


def removed_last_hour(history: History, now: datetime) -> int:
    return sum(-e.change for e in history.scale_events if e.change < 0 and e.at > now - HOUR)


def scale_in_room(
    windows: Sequence[ScaleInWindow], current: int, history: History, now: datetime
) -> WindowRoom | None:
    """The tightest open window and how many nodes it lets go now; None: none is open."""
    removed = removed_last_hour(history, now)
    rooms = [
        WindowRoom(w, max(w.allowed(current) - removed, 0)) for w in windows if is_open(w, now)
    ]
    return min(rooms, key=lambda r: r.room, default=None)
