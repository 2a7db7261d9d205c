"""When each group asked to be looked at again (`domain.ahead.recheck`): one attribute of
its state item, which the evaluation writes with the rest of the state
(`adapters.aws.state_table`) and the fast path reads alone, in batches (IAM lets it read
nothing else of the state: `infra.permissions.read_recheck_times`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.state_keys import GROUP_PK_PREFIX, RECHECK, STATE_SK, group_pk
from nodescaler.errors import StateUnavailableError

BATCH = 100  # BatchGetItem's most keys a call


def stored_recheck(item: Mapping[str, Any]) -> datetime | None:
    """The time in a state item. An unreadable one (not a time, or without its zone) is
    none: a hint, which the next evaluation writes afresh; meanwhile the tick looks."""
    stored = item.get(RECHECK, {}).get("S")
    try:
        when = datetime.fromisoformat(stored) if stored else None
    except (TypeError, ValueError):
        return None
    return when if when is not None and when.tzinfo is not None else None


class RecheckTimes:
    """`Rechecks` over the state table."""

    def __init__(self, dynamodb: Any, table_name: str) -> None:
        self._dynamodb = dynamodb
        self._table = table_name

    def rechecks(self, groups: Sequence[str]) -> dict[str, datetime]:
        """When each of these groups asked to be looked at again, of those that did
        (eventually consistent: a time written just now may be seen at the next look). A
        group whose time is unreadable, or whose key DynamoDB leaves unprocessed, is left
        out: the next look reads it, and the tick evaluates it meanwhile."""
        found: dict[str, datetime] = {}
        for start in range(0, len(groups), BATCH):
            keys = [
                {"pk": {"S": group_pk(g)}, "sk": {"S": STATE_SK}}
                for g in groups[start : start + BATCH]
            ]
            request = {
                self._table: {
                    "Keys": keys,
                    "ProjectionExpression": "#pk, #at",  # names aliased: never a reserved word
                    "ExpressionAttributeNames": {"#pk": "pk", "#at": RECHECK},
                }
            }
            try:
                answer = self._dynamodb.batch_get_item(RequestItems=request)
            except (BotoCoreError, ClientError) as error:  # throttled, refused, unreachable
                raise StateUnavailableError(f"{self._table}: {error}") from None
            for item in answer.get("Responses", {}).get(self._table, []):
                if (when := stored_recheck(item)) is not None:
                    found[item["pk"]["S"].removeprefix(GROUP_PK_PREFIX)] = when
        return found
