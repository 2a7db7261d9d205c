"""Every error nodescaler raises on purpose, in one place, each saying whether to retry.

`retryable` is what the handlers act on: a retryable error (a lost race, a throttled or
unreachable service) may pass if the same input is tried again, so the event or message
is retried; a permanent one (malformed input, a broken setting, an unreadable item) will
fail the same way every time, so it is reported and dead-lettered rather than retried.
This module imports nothing at run time, so every layer, the domain included, may derive from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar


class NodescalerError(Exception):
    """Base of nodescaler's errors; the message names what is wrong and where."""

    retryable: ClassVar[bool] = False


class RetryableError(NodescalerError):
    """Trying the same input again may succeed."""

    retryable = True


class PermanentError(NodescalerError):
    """Trying the same input again fails the same way: report it, do not retry."""

    retryable = False


def is_retryable(error: BaseException) -> bool:
    """Whether to try again: nodescaler's errors say; anything else (a bug, an SDK error
    that escaped its adapter) is retried, as Lambda and SQS would."""
    return error.retryable if isinstance(error, NodescalerError) else True


# --- input and configuration ----------------------------------------------------------


class MalformedEventError(PermanentError, ValueError):
    """An event or message no function here can handle; names the event and the field."""


class SettingsError(PermanentError, ValueError):
    """A function's environment, or cdk.json's context, has a missing or bad setting;
    names the variable or key."""


class PolicyError(PermanentError, ValueError):
    """A policy document that cannot be used; `problems` holds one line per defect."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class QuantityError(PermanentError, ValueError):
    """A Kubernetes quantity ("500m", "2Gi") that can't be read."""


class ReservationError(PermanentError, ValueError):
    """A group's capacity reservation can't be computed from what its pods request."""


class OutOfTimeError(RetryableError):
    """An invocation with too little time left to start a piece of work: a later one will."""


class NotStartedError(OutOfTimeError):
    """An evaluation request its invocation had no time to start: nothing of it was tried,
    so it goes back to the queue as a new message, its receives not counted (batch.py)."""


# --- the state table ---------------------------------------------------------------------


class StateConflictError(RetryableError):
    """Another evaluation of the same group wrote first."""


class StateUnavailableError(RetryableError):
    """The state table could not be read or written in time; names the item."""


class StateCorruptError(PermanentError):
    """A stored state item can't be read back; names the group and the item."""


class PolicyConflictError(RetryableError):
    """Another `nodescaler apply` wrote a policy first; nothing of this apply was written."""


class MetricHistoryError(RetryableError):
    """A named metric's history could not be read (throttled, refused, unreachable); names
    the metric and the cause. A forecast from it abstains, naming this."""


# --- node groups and the evaluation queue -----------------------------------------------


class UnmanagedGroupError(PermanentError, LookupError):
    """An event names a node group nodescaler does not manage."""


class RefusedError(PermanentError, PermissionError):
    """nodescaler will not write to this group: it is not opted in, or not what its tags
    claim to be (an ASG tagged with another EKS node group's name)."""


class InstanceTypeUnknownError(PermanentError, LookupError):
    """Nothing says which instance type the group launches; names the group."""


class ActuationError(RetryableError):
    """Resizing a group failed; the message is retried (and dead-lettered after its retries)."""


class QueueSendError(RetryableError):
    """Some evaluation requests could not be queued; the message names their groups, and
    `unqueued` holds them (empty: not known which)."""

    def __init__(self, message: str, unqueued: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.unqueued = frozenset(unqueued)


# --- metric sources ----------------------------------------------------------------------


class PrometheusQueryError(PermanentError):
    """A Prometheus server refused a query (its syntax, its rights) or answered with
    something that is not one number; names what came back."""


class BearerTokenRefusedError(PrometheusQueryError):
    """A bearer token asked for on a server its secret was not deployed for: never sent."""


class PrometheusUnavailableError(RetryableError):
    """A Prometheus server did not answer in time, could not be reached or failed (5xx)."""

    unreachable = False  # no answer at all (timed out, refused): not asked again for a while


# --- the cluster and draining ------------------------------------------------------------


class KubernetesUnavailableError(RetryableError):
    """The API server could not be read; names the server and the cause."""


class ExpanderError(RetryableError):
    """An expander could not choose (the custom expander failed or ran out of time)."""


class EventUnconfirmedError(PermanentError):
    """AWS's own record does not bear a well-formed event out (a forged or stale event:
    an on-demand instance's "Spot warning", a launch failure of an activity that did not
    fail); names the event, the instance or group, and why. Refused, not retried."""


class EventUnconfirmableError(RetryableError):
    """AWS could not be read to confirm an event; nothing was done, the event is retried."""


class LifecycleActionExpiredError(PermanentError):
    """Auto Scaling no longer holds the lifecycle action (its heartbeat timeout passed, or it
    was completed): names the group, the hook and the instance."""


class DrainHookUnreadError(RetryableError):
    """Auto Scaling could not say whether a group carries the deployment's drain hook (slow,
    throttled, refusing): names the group, the hook and Auto Scaling's answer."""


class Outcome(Protocol):
    """What a failed operation had done, told in one line (a drain's `DrainResult`)."""

    @property
    def message(self) -> str: ...


DoneSoFar = TypeVar("DoneSoFar", bound=Outcome)


class DrainFailedError(PermanentError, Generic[DoneSoFar]):
    """A drain raised part-way; carries what it had done (its lifecycle action is completed,
    so trying again could only fail again). Generic in what it carries, so this module
    needs nothing from the domain above it."""

    def __init__(self, result: DoneSoFar) -> None:
        super().__init__(result.message)
        self.result = result


class QueueUnreadableError(RetryableError):
    """A policy's SQS queue could not be read: `gone` when it no longer exists (nothing to
    wait for), else throttled or unreachable (worth backing off)."""

    def __init__(self, message: str, *, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone
