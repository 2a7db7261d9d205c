"""Pauses: an operator's hold on a group's scale-in, scale-out or both, as KEDA's `paused`,
`paused-scale-in` and `paused-scale-out`.

A pause is stored by `nodescaler pause` (who, why, when, until when) or set by the group's
paused tag (read with its other tags, in `optin`); either pauses. While paused the decision
is made as usual, then held at the current size where the paused direction would move it,
saying so and what it would have done. The bounds still apply: a group outside [min, max]
goes back inside them, paused or not, because "never outside [min, max]" is a safety rule
and a pause is not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict

from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scaling.decision import Decision, Limit

# The longest `--for`: a pause meant to outlast it has no expiry (until resumed).
LONGEST_PAUSE = timedelta(days=365)
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


class Pause(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    direction: PauseDirection
    by: str  # the caller's ARN, or the tag that pauses
    reason: str = ""
    at: AwareDatetime | None = None  # None: a tag's (when it was set is not known)
    until: AwareDatetime | None = None  # None: until resumed

    def active(self, now: datetime) -> bool:
        return self.until is None or now < self.until

    def describe(self) -> str:
        """Who paused which way, until when and why: paused (scale-in) by arn:… until
        2026-03-02 14:00:00Z (node upgrade)."""
        until = "" if self.until is None else f" until {self.until:%Y-%m-%d %H:%M:%S}Z"
        why = f" ({self.reason})" if self.reason else ""
        return f"paused ({self.direction}) by {self.by}{until}{why}"


def parse_duration(text: str) -> timedelta:
    """A duration such as 90s, 30m, 2h, 1d or 1h30m: positive and at most a year. Raises
    ValueError saying what is wrong."""
    written = text.strip()
    if written.startswith("-") and written[1:] and _DURATION.match(written[1:]):
        raise ValueError(f"{text!r} is not a positive duration")
    match = _DURATION.match(written)
    if not written or match is None:
        raise ValueError(
            f"{text!r} is not a duration: write a whole number of days, hours, minutes or "
            "seconds, e.g. 90s, 30m, 2h, 1d or 1h30m"
        )
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    if max(days, hours, minutes, seconds) > LONGEST_PAUSE.total_seconds():
        raise ValueError(f"{text!r} is longer than {LONGEST_PAUSE.days} days")
    duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if duration <= timedelta(0):
        raise ValueError(f"{text!r} is not a positive duration")
    if duration > LONGEST_PAUSE:
        raise ValueError(
            f"{text!r} is longer than {LONGEST_PAUSE.days} days; leave --for out to pause "
            "until resumed"
        )
    return duration


def in_force(
    stored: Pause | None, tagged: PauseDirection | None, tag: str, now: datetime
) -> tuple[Pause, ...]:
    """The pauses that apply now: the stored one unless it expired, and the tag's."""
    pauses = [] if stored is None or not stored.active(now) else [stored]
    if tagged is not None:
        pauses.append(Pause(direction=tagged, by=f"tag {tag}"))
    return tuple(pauses)


def hold(decision: Decision, pauses: Sequence[Pause]) -> Decision:
    """The decision with the paused direction held at the current size, saying which pause
    held it and what it would have done; a group outside its bounds still goes back inside."""
    if not pauses:
        return decision
    said = "; ".join(p.describe() for p in pauses)
    holding = [p for p in pauses if p.direction.holds(decision.change)]
    if not holding:
        return decision.model_copy(update={"paused": said})
    current, would = decision.current, decision.desired
    holders = "; ".join(p.describe() for p in holding)
    if not decision.min_replicas <= current <= decision.max_replicas:  # the bounds win
        bounds = f"[{decision.min_replicas}, {decision.max_replicas}]"
        reason = f"{holders}, but a group outside {bounds} goes back inside | {decision.reason}"
        return decision.model_copy(update={"paused": said, "reason": reason})
    verb = "scale out" if would > current else "scale in"
    reason = f"{holders}: would {verb} {current} → {would} | {decision.reason}"
    return decision.model_copy(
        update={
            "desired": current,
            "paused": said,
            "would_desire": would,
            "limited_by": (*decision.limited_by, Limit.PAUSED),
            "reason": reason,
        }
    )
