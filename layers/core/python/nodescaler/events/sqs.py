"""The SQS record that carries an evaluation request, as the evaluate function receives it."""

from __future__ import annotations

from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from pydantic import Json

from nodescaler.events.queue import EvaluationRequest


class EvaluationRecord(SqsRecordModel):
    body: Json[EvaluationRequest]
