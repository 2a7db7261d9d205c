"""Evaluate: one decision per queued request; a failed request is retried alone.

The FIFO queue hands each node group's requests over in order; Powertools' batch processor
parses each record into its model, and when one fails it returns that one, and the rest of
its group's batch, for a retry, while the other groups' requests complete. After the
queue's maxReceiveCount it is dead-lettered.
"""

from __future__ import annotations

import os
from functools import cache, partial
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext
from nodescaler import wiring
from nodescaler.config import EvaluateSettings
from nodescaler.events import describe_errors
from nodescaler.events.sqs import EvaluationRecord
from nodescaler.observability import (
    logger,
    logging_keys,
    reject,
    report_evaluation,
    report_evaluation_error,
)
from nodescaler.service.evaluation import Evaluator
from pydantic import ValidationError


@cache
def configured_evaluator() -> Evaluator:
    return wiring.evaluator(EvaluateSettings.from_environment(os.environ))


@logger.inject_lambda_context
def handler(
    event: dict[str, Any], context: LambdaContext, evaluator: Evaluator | None = None
) -> PartialItemFailureResponse:
    evaluate = partial(evaluate_record, evaluator or configured_evaluator())
    return process_partial_response(event, evaluate, EvaluationBatch(), context)


def evaluate_record(evaluator: Evaluator, record: EvaluationRecord) -> str:
    request = record.body
    group = request.node_group
    with logging_keys(node_group=group, event_id=request.event_id, cause=request.cause):
        try:
            result = evaluator.evaluate(group, request.event_id)
        except Exception as error:
            report_evaluation_error(group, error, record.attributes.ApproximateReceiveCount)
            raise
    latency = evaluator.clock.now() - request.requested_at
    report_evaluation(result, latency.total_seconds() * 1000)
    return result.outcome.value


class EvaluationBatch(SqsFifoPartialProcessor):
    """The FIFO processor, parsing each record into an `EvaluationRecord`; a record that is
    not one is rejected (named and counted) before it joins the failures. A failed
    evaluation was reported where it failed, with its group's log keys."""

    def __init__(self) -> None:
        super().__init__(model=EvaluationRecord, skip_group_on_error=True)

    def _process_record(self, record: dict[str, Any]) -> Any:
        # Powertools parses even a record it skips (an earlier one of its group failed) with
        # the model, so a malformed record there escaped and failed the whole batch: a
        # skipped record is returned for its retry as it is, unparsed.
        group = (record.get("attributes") or {}).get("MessageGroupId")
        if group is not None and group in self._failed_group_ids:
            self._current_group_id = group
            skipped = self._to_batch_type(record, event_type=self.event_type)
            return self.failure_handler(skipped, self.group_circuit_breaker_exc)
        return super()._process_record(record)  # type: ignore[no-untyped-call]

    def failure_handler(self, record: Any, exception: Any) -> Any:
        error = exception[1]
        if isinstance(error, ValidationError):
            raw = record.raw_event
            reject(
                f"malformed evaluation message {record.message_id}: {describe_errors(error)}",
                message_id=record.message_id,
                # read with care: the attributes may be what is malformed
                receive_count=(raw.get("attributes") or {}).get("ApproximateReceiveCount"),
            )
        return super().failure_handler(record, exception)
