"""A node group's persisted state: its history, last decision, backoff, claims and failures."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.forecast import DemandHistory
from nodescaler.domain.ahead.recheck import SpareSeen
from nodescaler.domain.outside_text import bounded_problems
from nodescaler.domain.scale_up.backoff import Backoff, Provisioning
from nodescaler.domain.scaling.decision import Decision
from nodescaler.domain.scaling.fallback import MetricFailures
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.pause import Pause

RECENT_EVENTS = 50  # enough to recognise a redelivered message; bounded item size


@dataclass(frozen=True)
class GroupState:
    group: str
    version: int = 0  # 0: never saved
    history: History = field(default_factory=History)
    last_decision: Decision | None = None
    recent_events: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # what is wrong with the group's tags or policy, if anything
    backoff: Backoff | None = None  # the latest, running or not: the next one doubles it
    provisioning: Provisioning | None = None  # a scale-up in flight
    protected: frozenset[str] = frozenset()  # instances nodescaler protected from scale-in
    # A resize claimed and maybe made, whose record is not written yet (and the message that
    # asked for it): if that write is lost, the next evaluation records it.
    acting: Decision | None = None
    acting_event: str = ""
    # The size nodescaler last set, and when: an Auto Scaling read older than that resize
    # (read before it, or not showing it yet) must not be decided on.
    resized: tuple[int, datetime] | None = None
    # What its live metrics asked for, in five-minute slots, for its forecasts.
    demand: DemandHistory = field(default_factory=DemandHistory)
    # How fast its pods arrive, for a buffer sized from arrivals (`domain.arrivals`).
    arrivals: Arrivals = field(default_factory=Arrivals)
    # When the fast path is to ask for an evaluation (its buffer's room running short
    # before the next tick, or its coming nodes due Ready with pods counted onto them:
    # `domain.scaling.plan_recheck`); and the room's count the buffer's rate is measured
    # from (`domain.ahead.recheck`).
    recheck: datetime | None = None
    spare_seen: SpareSeen | None = None
    # How long each metric with a fallback has been failing, for its failureThreshold.
    failures: MetricFailures = field(default_factory=MetricFailures)
    # An operator's `nodescaler pause`, running or expired (written only by it and resume).
    pause: Pause | None = None

    @property
    def grown_at(self) -> datetime | None:
        """When its scale-up in flight was asked, if one is."""
        return self.provisioning.since if self.provisioning is not None else None

    def seen(self, event_id: str) -> bool:
        return event_id in self.recent_events

    def remembering(self, *event_ids: str) -> GroupState:
        """With these ids among the recent events (to recognise them when they come again)."""
        events = self.recent_events + tuple(e for e in event_ids if e not in self.recent_events)
        return replace(self, recent_events=events[-RECENT_EVENTS:])

    def after(
        self,
        *,
        history: History,
        decision: Decision | None = None,
        event_id: str | None = None,
        problems: tuple[str, ...] = (),
    ) -> GroupState:
        changed = replace(
            self,
            history=history,
            last_decision=decision or self.last_decision,
            problems=bounded_problems(problems),
        )
        return changed if event_id is None else changed.remembering(event_id)


def failure_key(activity_id: str) -> str:
    """The recent-event id of a failed launch, whichever path reported it first."""
    return f"launch-failure:{activity_id}"
