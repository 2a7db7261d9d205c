"""Evaluate: one decision per queued request; a failed request fails alone, and is tried
again within seconds or, when that cannot help, dead-lettered at once
(`nodescaler.adapters.aws.batch`).

The settings and the evaluator (the domain, policies and planning under it) are imported
with the first event, as the dispatch function does, which keeps the cold import within
2.5 times boto3's (`make bench`); the first invocation pays for them instead.
"""

from __future__ import annotations

import os
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import process_partial_response as process
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.adapters.aws.batch import EvaluationBatch
from nodescaler.adapters.aws.evaluation_queue import SqsRedelivery
from nodescaler.errors import NotStartedError, OutOfTimeError
from nodescaler.events.evaluation_record import EvaluationRecord
from nodescaler.observability.reports import (
    logger,
    logging_keys,
    put_scaling_events,
    report_cluster_usage,
    report_evaluation,
    report_evaluation_error,
    request_latency_ms,
)

if TYPE_CHECKING:
    from nodescaler.service.evaluation import Evaluator


@cache
def configured_function() -> tuple[Evaluator, SqsRedelivery | None]:
    from nodescaler.config import EvaluateSettings  # with the first event (module docstring)

    settings = EvaluateSettings.from_environment(os.environ)
    return wiring.evaluator(settings), wiring.redelivery(settings)


@logger.inject_lambda_context
def handler(
    event: dict[str, Any],
    context: LambdaContext,
    evaluator: Evaluator | None = None,
    redelivery: SqsRedelivery | None = None,
) -> PartialItemFailureResponse:
    if evaluator is None:
        evaluator, redelivery = configured_function()
    # each record starts only with time to finish; the rest fail alone, to be retried
    evaluator.deadline.start(context.get_remaining_time_in_millis())
    evaluate = partial(evaluate_record, evaluator)
    try:
        response = process(event, evaluate, EvaluationBatch(redelivery), context)
    finally:  # the batch's resizes and backoffs, in one PutEvents
        put_scaling_events(evaluator.events)
    report_cluster_usage(evaluator.cluster_usage)  # once a batch, after its resizes
    return response


def evaluate_record(evaluator: Evaluator, record: EvaluationRecord) -> str:
    request = record.body
    group = request.node_group
    with logging_keys(node_group=group, event_id=request.event_id, cause=request.cause):
        try:
            start(evaluator, f"node group {group}: evaluation {request.event_id}")
            result = evaluator.evaluate(group, request.event_id, request.requested_at)
        except OutOfTimeError as error:  # not started, or a read cut by the invocation's end:
            logger.warning(str(error))  # retried soon by a later one, neither lost nor an error
            raise
        except Exception as error:
            report_evaluation_error(group, error, record.attributes.ApproximateReceiveCount)
            raise
    report_evaluation(result, request_latency_ms(request.requested_at, evaluator.clock.now()))
    return result.outcome.value


def start(evaluator: Evaluator, work: str) -> None:
    """`NotStartedError` when too little time is left to start `work`: told apart from a
    read cut short once started, it goes back to the queue without spending a receive."""
    try:
        evaluator.deadline.check_start(work)
    except OutOfTimeError as error:
        raise NotStartedError(str(error)) from None
