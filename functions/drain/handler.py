"""Drain: an instance-terminate lifecycle action or an EC2 Spot warning → the instance's node
cordoned and its pods evicted; the lifecycle action completed, always, exactly once.

A malformed event, a failed drain or an expired lifecycle action fails the invocation.
All three are permanent errors: the stack sets no retries (a failed drain has already
completed its action, so a retry could only fail again), and Lambda keeps the event in
the function's dead-letter queue. A passing AWS or Kubernetes outage is waited out within
the invocation instead, the hook held by heartbeats, until the drain's time is up: only
then is an event AWS could not be read to confirm kept there too (nothing was done). An
event AWS's own record does not bear out is refused: logged, counted, answered, never
retried.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.config import DrainSettings
from nodescaler.errors import (
    DrainFailedError,
    EventUnconfirmableError,
    LifecycleActionExpiredError,
)
from nodescaler.events.drain import LifecycleTestEvent, parse_drain_event
from nodescaler.observability.reports import (
    logger,
    logging_keys,
    parse_or_reject,
    put_scaling_events,
    report_drain,
    report_drain_failure,
    report_expired,
    report_unconfirmable,
)
from nodescaler.service.drainer import Drainer


@cache
def configured_drainer() -> Drainer:
    return wiring.drainer(DrainSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, drainer: Drainer | None = None
) -> dict[str, Any]:
    incoming = parse_or_reject(parse_drain_event, event)
    if isinstance(incoming, LifecycleTestEvent):
        return acknowledge(incoming)
    request, drainer = incoming.request, drainer or configured_drainer()
    with logging_keys(instance_id=request.instance_id, cause=request.cause, event_id=incoming.id):
        try:
            result = drainer.handle(request)
        except LifecycleActionExpiredError as error:
            report_expired(error)
            raise
        except EventUnconfirmableError as error:
            report_unconfirmable(error)
            raise
        except DrainFailedError as error:
            report_drain_failure(error.result)
            raise
        finally:  # the drain's outcome
            put_scaling_events(drainer.events)
        report_drain(result)
    return asdict(result)


def acknowledge(test: LifecycleTestEvent) -> dict[str, Any]:
    """A new hook's test notification: nothing to drain, nothing to complete."""
    group = test.detail.group or "?"
    logger.info(f"lifecycle hook test notification for node group {group}: nothing to drain")
    return {"outcome": "test-notification", "node_group": group}
