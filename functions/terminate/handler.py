"""Terminate: the custom termination policy of an opted-in Auto Scaling group → the
instances its scale-in may take, chosen from the cluster (`service.termination_policy`).

A malformed request is logged, counted and answered with no instance: Auto Scaling
documents that it waits a short time and asks again after an empty answer (an error it does
not document so), so nothing is terminated on a request nodescaler could not read. Whatever
it cannot tell (an unknown group, an unreadable cluster) it gives back to the group: every
offered instance, from which the group picks by its next termination policy. It never
guesses. A choice that fails (the groups or the state table unreachable, a bug) is logged,
counted and answered none for now too. A cause other than a scale-in is never answered
none for good (`service.termination_policy`).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.config import TerminateSettings
from nodescaler.errors import MalformedEventError
from nodescaler.events.termination_policy import answer, parse_termination_request
from nodescaler.observability.reports import (
    logger,
    logging_keys,
    parse_or_reject,
    report_termination,
    report_termination_error,
)
from nodescaler.service.termination_policy import TerminationChooser


@cache
def configured_chooser() -> TerminationChooser:
    return wiring.terminator(TerminateSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, chooser: TerminationChooser | None = None
) -> dict[str, list[str]]:
    try:
        request = parse_or_reject(parse_termination_request, event)
    except MalformedEventError:  # logged and counted: none for now, the group asks again
        return answer(())
    with logging_keys(node_group=request.group, cause=request.cause):
        try:
            choice = (chooser or configured_chooser()).choose(request)
        except Exception as error:  # never an error: Auto Scaling documents none as asked again
            report_termination_error(request.group, error)
            return answer(())
        report_termination(choice, request.wanted)
    return answer(choice.instance_ids)
