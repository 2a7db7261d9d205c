"""Fast path: started each minute by its schedule, it looks every few seconds until the
next start at the cluster's unschedulable pods and the policies' SQS queues, and queues an
evaluation of the groups concerned as soon as something new appears
(`nodescaler.service.fast_path`). The tick stays the reconciler; this only brings a
decision forward. Turned off with cdk.json `fastPath: false`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.observability.reports import logger, report_fast_look

if TYPE_CHECKING:
    from nodescaler.service.fast_path import FastPath

RUN_FOR = timedelta(minutes=1)  # the schedule's period: the next invocation takes over
MARGIN = timedelta(seconds=3)  # to report and return inside the function's timeout


@cache
def configured_fast_path() -> FastPath:
    from nodescaler.config import FastPathSettings

    settings = FastPathSettings.from_environment(os.environ)
    return wiring.fast_path(settings, report=report_fast_look)


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, fast_path: FastPath | None = None
) -> dict[str, Any]:
    fast_path = fast_path or configured_fast_path()
    now = fast_path.clock.now()
    left = timedelta(milliseconds=context.get_remaining_time_in_millis())
    looks = fast_path.run(until=now + min(RUN_FOR, left) - MARGIN)
    queued = sorted({group for look in looks for group in look.requests})
    return {"cause": "fast path", "looks": len(looks), "queued": queued}
