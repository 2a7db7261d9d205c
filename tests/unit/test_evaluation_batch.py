"""The evaluate function's batch: a message no evaluation could serve fails alone, never its
batch (whose other records would each spend a receive, and be dead-lettered with it)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.batch import process_partial_response
from nodescaler.adapters.aws.batch import EvaluationBatch
from nodescaler.events.evaluation_record import EvaluationRecord

EVENTS = Path(__file__).parents[2] / "events"


class Redelivery:  # SqsRedelivery's calls, recorded
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def requeue(self, message_id: str, body: str, group_id: str) -> None:
        self.calls.append(("requeue", message_id))

    def retry_in(self, receipt_handle: str, delay: Any) -> None:
        self.calls.append(("retry", receipt_handle))

    def dead_letter(self, message_id: str, body: str, group_id: str, reason: str) -> None:
        self.calls.append(("dead-letter", message_id))


def test_a_message_nested_past_the_parsers_recursion_fails_alone_dead_lettered() -> None:
    # Given a batch whose middle message is "[" nested 5,000 deep (anyone who may send to
    # the queue can write one), between two well-formed requests
    good, other = json.loads((EVENTS / "evaluate-batch.json").read_text())["Records"]
    nested = copy.deepcopy(good) | {"messageId": "nested", "body": "[" * 5_000}
    redelivery, evaluated = Redelivery(), []

    def evaluate(record: EvaluationRecord) -> str:
        evaluated.append(record.messageId)
        return "ok"

    # When the batch is processed
    response = process_partial_response(
        {"Records": [good, nested, other]},
        evaluate,
        EvaluationBatch(redelivery),  # type: ignore[arg-type]
        None,
    )
    # Then both requests are evaluated, the nested one is dead-lettered at once as malformed,
    # and no record goes back to the queue (it used to fail the whole batch)
    assert evaluated == [good["messageId"], other["messageId"]]
    assert redelivery.calls == [("dead-letter", "nested")]
    assert response == {"batchItemFailures": []}
