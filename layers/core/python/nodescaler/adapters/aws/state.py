"""Per-group state and the decision audit trail in one DynamoDB table.

Layout (pk, sk):
  GROUP#<name>, STATE                 history, last decision, recent event ids, version
  GROUP#<name>, DECISION#<at>#<event> one audit item per decision, deleted by TTL

Every state write is conditional on the version it read, so of two evaluations racing on
one group only the first write wins; the loser gets `StateConflictError` and retries.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from nodescaler.domain.decision import Decision
from nodescaler.domain.history import History
from nodescaler.state import GroupState, StateConflictError, StateCorruptError

STATE_SK = "STATE"


def _pk(group: str) -> str:
    return f"GROUP#{group}"


class DynamoStateStore:
    def __init__(self, dynamodb: Any, table_name: str, *, audit_ttl: timedelta) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._audit_ttl = audit_ttl

    def load(self, group: str) -> GroupState:
        item = self._dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": _pk(group)}, "sk": {"S": STATE_SK}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            return GroupState(group=group)
        try:
            last = item.get("last_decision", {}).get("S")
            return GroupState(
                group=group,
                version=int(item["version"]["N"]),
                history=History.model_validate_json(item["history"]["S"]),
                last_decision=Decision.model_validate_json(last) if last else None,
                recent_events=tuple(json.loads(item.get("recent_events", {}).get("S", "[]"))),
                problems=tuple(json.loads(item.get("problems", {}).get("S", "[]"))),
            )
        except (KeyError, ValueError, TypeError) as error:  # pydantic's ValidationError too
            raise StateCorruptError(
                f"node group {group}: state item ({_pk(group)}, {STATE_SK}) in {self._table} is "
                f"unreadable ({type(error).__name__}: {error}); delete it to start the group's "
                "history afresh"
            ) from None

    def save(
        self, state: GroupState, *, audit: Decision | None = None, event_id: str = ""
    ) -> GroupState:
        """Write `state` if nobody wrote since it was loaded; returns it with its new version."""
        saved = replace(state, version=state.version + 1)
        item: dict[str, Any] = {
            "pk": {"S": _pk(state.group)},
            "sk": {"S": STATE_SK},
            "version": {"N": str(saved.version)},
            "history": {"S": state.history.model_dump_json()},
            "recent_events": {"S": json.dumps(list(state.recent_events))},
            "problems": {"S": json.dumps(list(state.problems))},
        }
        if state.last_decision is not None:
            item["last_decision"] = {"S": state.last_decision.model_dump_json()}
        put: dict[str, Any] = {"TableName": self._table, "Item": item}
        if state.version == 0:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ConditionExpression"] = "version = :read"
            put["ExpressionAttributeValues"] = {":read": {"N": str(state.version)}}
        writes = [{"Put": put}]
        if audit is not None:
            writes.append(
                {"Put": {"TableName": self._table, "Item": self._audit_item(audit, event_id)}}
            )
        try:
            self._dynamodb.transact_write_items(TransactItems=writes)
        except ClientError as error:
            reasons = error.response.get("CancellationReasons") or []
            if error.response["Error"]["Code"] == "TransactionCanceledException" and any(
                r.get("Code") == "ConditionalCheckFailed" for r in reasons
            ):
                message = f"state changed since version {state.version} was read"
                raise StateConflictError(f"node group {state.group}: {message}") from None
            raise
        return saved

    def _audit_item(self, decision: Decision, event_id: str) -> dict[str, Any]:
        return {
            "pk": {"S": _pk(decision.node_group)},
            "sk": {"S": f"DECISION#{decision.at.isoformat()}#{event_id}"},
            "decision": {"S": decision.model_dump_json()},
            "expires_at": {"N": str(int((decision.at + self._audit_ttl).timestamp()))},
        }

    def decisions(self, group: str, limit: int = 20) -> list[Decision]:
        """The group's most recent audit items, newest first (for `nodescaler explain`)."""
        items = self._dynamodb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": _pk(group)}, ":prefix": {"S": "DECISION#"}},
            ScanIndexForward=False,
            Limit=limit,
        )["Items"]
        return [Decision.model_validate_json(i["decision"]["S"]) for i in items]
