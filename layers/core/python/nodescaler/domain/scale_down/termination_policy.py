"""Why Auto Scaling asks the custom termination policy, and how long nodescaler may answer
none before the least-bad instance goes.

Auto Scaling asks on a scale-in, an instance refresh, a maximum instance lifetime and a
rebalance across zones (the request's `Cause`). Answered none, it asks again a short time
later: for a scale-in as long as the group is above its desired capacity, for an instance
refresh for an hour and then the refresh fails, for a maximum instance lifetime for as long
as the instance is past it (Amazon EC2 Auto Scaling User Guide, "Create a custom termination
policy with Lambda",
https://docs.aws.amazon.com/autoscaling/ec2/userguide/lambda-custom-termination-policy.html).
A scale-in is nodescaler's own: it waits as long as the pods need. Any other cause is an
operator's rollout or Auto Scaling's upkeep, which answering none would stall for good: it
waits at most `PATIENCE`, then the least-bad instance goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


class Cause(StrEnum):
    """The causes AWS documents."""

    SCALE_IN = "SCALE_IN"
    INSTANCE_REFRESH = "INSTANCE_REFRESH"
    MAX_INSTANCE_LIFETIME = "MAX_INSTANCE_LIFETIME"
    REBALANCE = "REBALANCE"  # across Availability Zones


def known_cause(text: str) -> Cause | None:
    try:
        return Cause(text)
    except ValueError:
        return None


# Half of the hour after which Auto Scaling fails an instance refresh nodescaler answered
# none: time for a budget to free up, and half an hour left for the least-bad answer.
PATIENCE = timedelta(minutes=30)
# Auto Scaling asks again "a short time" after an empty answer: no ask of a cause for this
# long means its wait ended (the refresh was cancelled, the group resized) and a later ask
# begins a new one.
QUIET = timedelta(minutes=15)


@dataclass(frozen=True)
class Wait:
    """Asks of one cause, for one group, answered with none: the first and the latest."""

    since: datetime
    last: datetime

    def asked(self, now: datetime) -> Wait:
        """This wait with one more ask at `now`, or a new one when the last was long ago
        (or, on a clock gone back, after now)."""
        if now - self.last > QUIET or now < self.since:
            return Wait(now, now)
        return Wait(self.since, now)

    def patience_spent(self, now: datetime) -> bool:
        return now - self.since >= PATIENCE

    @property
    def until(self) -> datetime:
        """When the least-bad instance goes, if none can go by the rules before."""
        return self.since + PATIENCE
