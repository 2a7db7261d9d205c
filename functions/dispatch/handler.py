"""Dispatch: a schedule tick queues an evaluation of every managed node group; an alarm
state change queues the groups whose policy lists that alarm (the fast path).

A malformed event fails the invocation with a message naming the field; Lambda retries
an asynchronous event twice, then sends it to the function's dead-letter queue.

Importing this module loads boto3 and Powertools only: pydantic and the models built with
it (events, settings, policies, evaluation requests) are imported with the first event,
which keeps the cold import within 1.5 times boto3's (`make bench`). The first invocation
pays for them instead.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.observability import SERVICE, Dimension, MetricName, Record, emit

if TYPE_CHECKING:
    from nodescaler.dispatch import Dispatcher
    from nodescaler.events import LaunchUnsuccessfulEvent

logger = Logger(service=SERVICE)


@cache
def configured_dispatcher() -> Dispatcher:
    from nodescaler.config import DispatchSettings  # with the first event (module docstring)

    return wiring.dispatcher(DispatchSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, dispatcher: Dispatcher | None = None
) -> dict[str, Any]:
    from nodescaler.events import (  # with the first event (module docstring)
        AlarmStateChangeEvent,
        LaunchUnsuccessfulEvent,
        parse_dispatch_event,
    )

    try:
        incoming = parse_dispatch_event(event)
    except ValueError as error:
        logger.error(str(error), event_id=event.get("id") if isinstance(event, dict) else None)
        emit([Record({MetricName.MALFORMED_EVENTS: 1})])
        raise

    dispatcher = dispatcher or configured_dispatcher()
    if isinstance(incoming, LaunchUnsuccessfulEvent):
        return launch_failed(dispatcher, incoming)
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


def launch_failed(dispatcher: Dispatcher, event: LaunchUnsuccessfulEvent) -> dict[str, Any]:
    from nodescaler.dispatch import UnmanagedGroupError

    group, activity = event.detail.group, event.detail.activity_id
    try:
        backoff, queued = dispatcher.launch_failed(
            group, activity, event.reason, event.id, event.time
        )
    except UnmanagedGroupError as error:  # every ASG's failures reach the rule; most aren't ours
        logger.warning(str(error), event_id=event.id, node_group=group)
        emit([Record({MetricName.IGNORED_EVENTS: 1})])
        return {"cause": event.cause, "queued": []}
    logger.warning(
        f"node group {group}: launch failed ({event.reason}); backed off until "
        f"{backoff.until.isoformat()}, re-planning {len(queued)} groups",
        event_id=event.id,
        node_group=group,
        activity_id=activity,
        node_groups=queued,
    )
    emit(
        [
            Record({MetricName.LAUNCH_FAILURES: 1}, {Dimension.NODE_GROUP: group}),
            Record({MetricName.EVALUATIONS_QUEUED: len(queued)}),
        ]
    )
    return {"cause": event.cause, "queued": queued, "backed_off_until": backoff.until.isoformat()}
