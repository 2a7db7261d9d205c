"""Dispatch: a schedule tick queues an evaluation of every managed node group; an alarm
state change queues the groups whose policy lists that alarm (the fast path); a launch
failure the group's scaling activities confirm backs its group off and re-plans the groups
that share its pending pods (one they do not confirm is refused, logged and counted).

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

from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.observability.reports import (
    logger,
    parse_or_reject,
    put_scaling_events,
    reject,
    report_ignored,
    report_launch_failure,
    report_queued,
    report_unconfirmable,
    report_unconfirmed,
)

if TYPE_CHECKING:
    from nodescaler.events.dispatch import DispatchEvent, LaunchUnsuccessfulEvent
    from nodescaler.service.dispatch import Dispatcher


@cache
def configured_dispatcher() -> Dispatcher:
    from nodescaler.config import DispatchSettings  # with the first event (module docstring)

    return wiring.dispatcher(DispatchSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, dispatcher: Dispatcher | None = None
) -> dict[str, Any]:
    from nodescaler.errors import MalformedEventError  # with the first event (docstring)
    from nodescaler.events import dispatch as events

    if refusal := events.unreplaced_keyword(event):  # the same on a retry: not failed
        reject(refusal, event_id=event.get("id"))
        return {"cause": "tick", "queued": [], "refused": refusal}
    incoming = parse_or_reject(events.parse_dispatch_event, event)
    dispatcher = dispatcher or configured_dispatcher()
    try:
        return dispatch(dispatcher, incoming)
    except MalformedEventError as error:  # well-formed, but not to be believed (its time)
        reject(str(error), event_id=incoming.id)
        raise
    finally:  # a launch failure's backoff
        put_scaling_events(dispatcher.events)


def dispatch(dispatcher: Dispatcher, incoming: DispatchEvent) -> dict[str, Any]:
    from nodescaler.events import dispatch as events

    match incoming:
        case events.LaunchUnsuccessfulEvent():
            return launch_failed(dispatcher, incoming)
        case events.AlarmStateChangeEvent(detail=events.AlarmStateChange(alarm_name=alarm)):
            done = dispatcher.alarm(alarm, incoming.id, incoming.cause, incoming.time)
            if not done.queued and not done.not_allowed:
                shown = incoming.detail.shown_name
                logger.warning(f"alarm {shown}: no managed node group's policy lists it")
        case _:
            done = dispatcher.tick(incoming.id, incoming.time, incoming.identity)
    for group in done.not_allowed:  # opted in, but never resized: said on every tick
        logger.warning(dispatcher.allowed.refusal(group), node_group=group)
    report_queued(incoming.cause, done.queued)
    result: dict[str, Any] = {"cause": incoming.cause, "queued": done.queued}
    return result | ({"not_allowed": done.not_allowed} if done.not_allowed else {})


def launch_failed(dispatcher: Dispatcher, event: LaunchUnsuccessfulEvent) -> dict[str, Any]:
    from nodescaler.errors import (
        EventUnconfirmableError,
        EventUnconfirmedError,
        UnmanagedGroupError,
    )

    group, activity = event.detail.group, event.detail.activity_id
    try:
        backoff, queued = dispatcher.launch_failed(
            group, activity, event.reason, event.id, event.time
        )
    except UnmanagedGroupError as error:  # every ASG's failures reach the rule; most aren't ours
        report_ignored(str(error), event_id=event.id, node_group=event.detail.shown_group)
        return {"cause": event.cause, "queued": []}
    except EventUnconfirmedError as error:  # forged, or mistaken: answered, not retried
        report_unconfirmed(str(error), group, event_id=event.id, activity_id=activity)
        return {"cause": event.cause, "queued": [], "refused": str(error)}
    except EventUnconfirmableError as error:  # nothing done; Lambda tries the event again
        report_unconfirmable(error)
        raise
    until = backoff.until.isoformat()
    report_launch_failure(
        group, event.reason, until, queued, event_id=event.id, activity_id=activity
    )
    return {"cause": event.cause, "queued": queued, "backed_off_until": until}
