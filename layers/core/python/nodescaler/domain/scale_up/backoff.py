"""Backoff after a failed scale-up: Cluster Autoscaler's exponential backoff, as data.

A group whose launch failed (or whose new instances never came into service) is left out
of scale-ups for a while, so pending demand goes to the next group at once instead of
waiting out a provision timeout. The first failure backs off `initial`, each later one
doubles it up to `maximum`; after `reset_after` without a failure the next starts afresh.
Failures while a backoff is running belong to the same incident and do not double it
(an Auto Scaling Group retrying its launches reports many failures for one scale-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict


@dataclass(frozen=True)
class BackoffRules:
    initial: timedelta = timedelta(minutes=5)
    maximum: timedelta = timedelta(minutes=30)
    reset_after: timedelta = timedelta(hours=3)
    max_provision_time: timedelta = timedelta(minutes=15)  # new instances in service by then


class Backoff(BaseModel):
    model_config = ConfigDict(frozen=True)

    until: AwareDatetime
    seconds: int  # this backoff's length; the next failure doubles it
    last_failure: AwareDatetime
    reason: str  # what failed, in AWS's words where it gave some

    def active(self, now: datetime) -> bool:
        return now < self.until


def after_failure(
    previous: Backoff | None, now: datetime, reason: str, rules: BackoffRules
) -> Backoff:
    """The backoff a failure at `now` starts (or extends, while one is running)."""
    if previous is not None and previous.active(now):
        return previous.model_copy(update={"last_failure": now, "reason": reason})
    recent = previous is not None and now - previous.last_failure < rules.reset_after
    length = rules.initial
    if previous is not None and recent:
        length = min(timedelta(seconds=previous.seconds * 2), rules.maximum)
    return Backoff(
        until=now + length, seconds=int(length.total_seconds()), last_failure=now, reason=reason
    )


class Provisioning(BaseModel):
    """A scale-up in flight: since when the group has been asked for `target` instances."""

    model_config = ConfigDict(frozen=True)

    since: AwareDatetime
    target: int
    warm: bool = False  # its growth was covered by the group's warm pool when asked for

    def arrived(self, ready_since: Sequence[datetime | None], now: datetime) -> datetime:
        """When the scale-up's last node turned Ready, to the second: the moment the
        group's Ready nodes reached the target, from their Ready conditions'
        lastTransitionTime. `now` (the evaluation that saw it) where that cannot be told:
        a node without the time, fewer nodes than the target, or a time outside the
        scale-up (a node that turned Ready again after a NotReady spell)."""
        if len(ready_since) < self.target or None in ready_since:
            return now
        at = sorted(t for t in ready_since if t is not None)[self.target - 1]
        return at if self.since <= at <= now else now


def provision_check(
    provisioning: Provisioning | None,
    *,
    desired: int,
    in_service: int,
    now: datetime,
    rules: BackoffRules,
) -> tuple[Provisioning | None, str | None]:
    """The scale-up still in flight, and a failure reason once it overran its time.

    Done when the group has the instances in service, or was sized below the target
    since (by us or anyone); overdue after `max_provision_time`, which ends it too.
    """
    if provisioning is None or in_service >= provisioning.target or desired < provisioning.target:
        return None, None
    waited = now - provisioning.since
    if waited <= rules.max_provision_time:
        return provisioning, None
    missing = provisioning.target - in_service
    return None, (
        f"{missing} of the instances asked for at {provisioning.since:%H:%M:%S}Z were not "
        f"ready after {rules.max_provision_time.total_seconds() / 60:g} minutes"
    )
