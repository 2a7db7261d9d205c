"""Dispatch: a schedule tick queues an evaluation of every managed node group; an alarm
state change queues the groups whose policy lists that alarm (the fast path).

A malformed event fails the invocation with a message naming the field; Lambda retries
an asynchronous event twice, then sends it to the function's dead-letter queue.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.config import DispatchSettings
from nodescaler.dispatch import Dispatcher
from nodescaler.events import AlarmStateChangeEvent, parse_dispatch_event
from nodescaler.observability import SERVICE, MetricName, Record, emit

logger = Logger(service=SERVICE)


@cache
def configured_dispatcher() -> Dispatcher:
    return wiring.dispatcher(DispatchSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, dispatcher: Dispatcher | None = None
) -> dict[str, Any]:
    try:
        incoming = parse_dispatch_event(event)
    except ValueError as error:
        logger.error(str(error), event_id=event.get("id") if isinstance(event, dict) else None)
        emit([Record({MetricName.MALFORMED_EVENTS: 1})])
        raise

    dispatcher = dispatcher or configured_dispatcher()
    if isinstance(incoming, AlarmStateChangeEvent):
        alarm = incoming.detail.alarm_name
        queued = dispatcher.alarm(alarm, incoming.id, incoming.cause, incoming.time)
        if not queued:
            logger.warning(f"alarm {alarm}: no managed node group's policy lists it")
    else:
        queued = dispatcher.tick(incoming.id, incoming.time)
    logger.info(f"queued {len(queued)} evaluations", cause=incoming.cause, node_groups=queued)
    emit([Record({MetricName.EVALUATIONS_QUEUED: len(queued)})])
    return {"cause": incoming.cause, "queued": queued}
