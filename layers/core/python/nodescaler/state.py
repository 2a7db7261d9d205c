"""A node group's persisted state, and the port that stores it with optimistic concurrency."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from nodescaler.domain.decision import Decision
from nodescaler.domain.history import History

RECENT_EVENTS = 50  # enough to recognise a redelivered message; bounded item size


class StateConflictError(RuntimeError):
    """Another evaluation of the same group wrote first."""


class StateCorruptError(RuntimeError):
    """A stored state item can't be read back; names the group and the item."""


@dataclass(frozen=True)
class GroupState:
    group: str
    version: int = 0  # 0: never saved
    history: History = field(default_factory=History)
    last_decision: Decision | None = None
    recent_events: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # what is wrong with the group's tags or policy, if anything

    def seen(self, event_id: str) -> bool:
        return event_id in self.recent_events

    def after(
        self,
        *,
        history: History,
        decision: Decision | None = None,
        event_id: str | None = None,
        problems: tuple[str, ...] = (),
    ) -> GroupState:
        events = self.recent_events
        if event_id is not None and event_id not in events:
            events = (*events, event_id)[-RECENT_EVENTS:]
        return replace(
            self,
            history=history,
            last_decision=decision or self.last_decision,
            recent_events=events,
            problems=problems,
        )


class StateStore(Protocol):
    def load(self, group: str) -> GroupState: ...

    def save(
        self, state: GroupState, *, audit: Decision | None = None, event_id: str = ""
    ) -> GroupState:
        """Write if unchanged since loaded (else `StateConflictError`); returns the new version."""
        ...
