"""Drain: an instance-terminate lifecycle action or an EC2 Spot warning → the instance's node
cordoned and its pods evicted; the lifecycle action completed, always, exactly once.

A malformed event, a failed drain or an expired lifecycle action fails the invocation.
The stack sets no retries (a failed drain has already completed its action, so a retry
could only fail again): Lambda keeps the event in the function's dead-letter queue.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.config import DrainSettings
from nodescaler.drain import (
    Drainer,
    DrainFailedError,
    DrainOutcome,
    DrainResult,
    LifecycleActionExpiredError,
    ReplacementOutcome,
)
from nodescaler.drain_events import LifecycleTestEvent, parse_drain_event
from nodescaler.events import MalformedEventError
from nodescaler.observability import SERVICE, MetricName, Record, drain_records, emit

logger = Logger(service=SERVICE)


@cache
def configured_drainer() -> Drainer:
    return wiring.drainer(DrainSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, drainer: Drainer | None = None
) -> dict[str, Any]:
    try:
        incoming = parse_drain_event(event)
    except MalformedEventError as error:
        logger.error(str(error), event_id=event.get("id") if isinstance(event, dict) else None)
        emit([Record({MetricName.MALFORMED_EVENTS: 1})])
        raise
    if isinstance(incoming, LifecycleTestEvent):
        group = incoming.detail.group or "?"
        logger.info(f"lifecycle hook test notification for node group {group}: nothing to drain")
        return {"outcome": "test-notification", "node_group": group}

    keys = {"instance_id": incoming.instance_id, "cause": incoming.cause, "event_id": incoming.id}
    logger.append_keys(**keys)
    try:
        result = (drainer or configured_drainer()).handle(incoming)
    except LifecycleActionExpiredError as error:
        logger.error(f"{error}; the event is kept in the dead-letter queue")
        emit([Record({MetricName.LIFECYCLE_ACTIONS_EXPIRED: 1})])
        raise
    except DrainFailedError as error:
        logger.exception(error.result.message, drain=asdict(error.result))
        emit(drain_records(error.result))
        raise
    else:
        report(result)
    finally:
        logger.remove_keys(list(keys))
    return asdict(result)


def report(result: DrainResult) -> None:
    """One log line per drain, with everything it did, and its EMF records."""
    fields: dict[str, Any] = {"drain": asdict(result), "node": result.node}
    replacement = result.replacement
    if result.outcome is DrainOutcome.TIMED_OUT or (
        replacement is not None and replacement.outcome is not ReplacementOutcome.QUEUED
    ):
        logger.warning(result.message, **fields)
    else:
        logger.info(result.message, **fields)
    emit(drain_records(result))
