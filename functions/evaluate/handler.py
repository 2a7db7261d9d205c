"""Evaluate: one decision per queued request; a failed request is retried alone.

The FIFO queue hands each node group's requests over in order; when one fails, the
batch processor returns it, and the rest of that group's batch, for a retry, while
the other groups' requests complete. After the queue's maxReceiveCount it is
dead-lettered.
"""

from __future__ import annotations

import os
from functools import cache, partial
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.config import EvaluateSettings
from nodescaler.evaluation import EvaluationResult, Evaluator
from nodescaler.events import EvaluationRecord, describe_errors
from nodescaler.observability import (
    SERVICE,
    Dimension,
    MetricName,
    Record,
    emit,
    result_records,
)
from pydantic import ValidationError

logger = Logger(service=SERVICE)


@cache
def configured_evaluator() -> Evaluator:
    return wiring.evaluator(EvaluateSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, evaluator: Evaluator | None = None
) -> dict[str, Any]:
    evaluate = partial(evaluate_record, evaluator or configured_evaluator())
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    return dict(process_partial_response(event, evaluate, processor, context))


def evaluate_record(evaluator: Evaluator, record: SQSRecord) -> str:
    try:
        request = EvaluationRecord.model_validate(record.raw_event).body
    except ValidationError as error:
        logger.error(
            f"malformed evaluation message {record.message_id}: {describe_errors(error)}",
            message_id=record.message_id,
            # read with care: the attributes may be what is malformed
            receive_count=record.raw_event.get("attributes", {}).get("ApproximateReceiveCount"),
        )
        emit([Record({MetricName.MALFORMED_EVENTS: 1})])
        raise

    group = request.node_group
    logger.append_keys(node_group=group, event_id=request.event_id, cause=request.cause)
    try:
        result = evaluator.evaluate(group, request.event_id)
    except Exception as error:
        logger.exception(
            f"node group {group}: evaluation failed, will retry: {error}",
            receive_count=record.attributes.approximate_receive_count,
        )
        errors = {MetricName.EVALUATION_ERRORS: 1.0}
        emit([Record(errors, {Dimension.NODE_GROUP: group}), Record(errors)])
        raise
    finally:
        logger.remove_keys(["node_group", "event_id", "cause"])
    latency = evaluator.clock.now() - request.requested_at
    report(result, latency.total_seconds() * 1000)
    return result.outcome.value


def report(result: EvaluationResult, latency_ms: float) -> None:
    """One log line per result (the whole decision, when there is one) and its EMF record."""
    decision = result.decision
    fields: dict[str, Any] = {"node_group": result.group, "outcome": result.outcome.value}
    if decision is not None:
        fields["decision"] = decision.model_dump(mode="json")
    if result.problems:
        fields["problems"] = list(result.problems)
        logger.warning("; ".join(result.problems), **fields)
    else:
        logger.info(decision.reason if decision else result.outcome.value, **fields)
    emit(result_records(result, latency_ms))
