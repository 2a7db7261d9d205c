"""The memory the behavior rules need: recent raw recommendations and recent scale events.

Plain, immutable data in and out, so the state store can persist it between evaluations.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict

# Bounds the persisted item (DynamoDB allows 400 KB) whatever the windows and the rate.
MAX_ENTRIES = 1000


class TimedRecommendation(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: AwareDatetime
    replicas: int


class ScaleEvent(BaseModel):
    """A change of the desired count that was acted on; `change` > 0 is a scale-up."""

    model_config = ConfigDict(frozen=True)

    at: AwareDatetime
    change: int


class History(BaseModel):
    model_config = ConfigDict(frozen=True)

    recommendations: tuple[TimedRecommendation, ...] = ()
    scale_events: tuple[ScaleEvent, ...] = ()

    def with_recommendation(self, at: datetime, replicas: int, keep_seconds: int) -> History:
        """Add a raw recommendation; drop those no stabilization window can still see.

        An older entry with the same count as a newer one is dropped too: whenever it is
        inside a window the newer one is as well, so the windows' min and max are unchanged.
        """
        cutoff = at - timedelta(seconds=keep_seconds)
        kept = [r for r in self.recommendations if r.at >= cutoff and r.replicas != replicas]
        kept.append(TimedRecommendation(at=at, replicas=replicas))
        return self.model_copy(update={"recommendations": tuple(kept[-MAX_ENTRIES:])})

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
