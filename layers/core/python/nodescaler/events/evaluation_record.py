"""The SQS record that carries an evaluation request, as the evaluate function receives it."""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from nodescaler.events.evaluation_request import EvaluationRequest


def _no_key_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if twice := sorted({key for key in keys if keys.count(key) > 1}):
        raise ValueError(f"key {', '.join(map(repr, twice))} given twice")
    return dict(pairs)


def _json_object(body: Any) -> Any:
    """The body's JSON, refusing a key given twice (a plain parser keeps the last silently,
    so two writers' fields could disagree unseen)."""
    if not isinstance(body, str | bytes):
        return body  # not text: the model says what it should be
    try:
        return json.loads(body, object_pairs_hook=_no_key_twice)
    except (ValueError, RecursionError) as error:  # `[[[[…` recurses, and is no ValueError
        raise PydanticCustomError(
            "json_invalid", "Invalid JSON: {why}", {"why": str(error)}
        ) from None


class EvaluationRecord(SqsRecordModel):
    body: Annotated[EvaluationRequest, BeforeValidator(_json_object)]
