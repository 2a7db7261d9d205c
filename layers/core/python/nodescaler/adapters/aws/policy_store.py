"""Policies applied with `nodescaler apply`, versioned, in the state table.

Layout (pk, sk):
  POLICIES, <name>                    each policy's head: its current version and document,
                                      so the functions read every policy with one query
  POLICY#<name>, VERSION#<000001>     every version: the document, who applied it, when,
                                      and from which file

An apply writes every new version and every head in one transaction, each head on the
condition that it is still at the version read and each version that it is new, so a
racing apply or a failure leaves nothing half-written. Only the operator's identity may
write these items: the functions' roles are denied `POLICY*` leading keys (infra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from nodescaler.adapters.aws.state_table import condition_failed_in
from nodescaler.adapters.policy_keys import HEADS_PK, versions_pk
from nodescaler.domain.policy.versions import StoredPolicy
from nodescaler.errors import PolicyConflictError

VERSION_PREFIX = "VERSION#"
# TransactWriteItems takes 100 items: a version and a head per policy.
MAX_POLICIES_PER_APPLY = 50


def version_sk(version: int) -> str:
    return f"{VERSION_PREFIX}{version:06d}"


@dataclass(frozen=True)
class PolicyChange:
    """A new version of `name`; `head` is the version its head was read at (0: no head)."""

    name: str
    version: int
    document: str
    source: str
    head: int


class DynamoPolicyStore:
    def __init__(self, dynamodb: Any, table_name: str) -> None:
        self._dynamodb = dynamodb
        self._table = table_name

    def heads(self) -> list[StoredPolicy]:
        """Every policy's current version (an unreadable head says so in its `problem`)."""
        items = self._query(
            "pk = :pk", {":pk": {"S": HEADS_PK}}, consistent=False, forward=True, limit=None
        )
        return [self._read(item, item.get("sk", {}).get("S", "?")) for item in items]

    def head(self, name: str) -> StoredPolicy | None:
        item = self._dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": HEADS_PK}, "sk": {"S": name}},
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else self._read(item, name)

    def versions(self, name: str) -> list[StoredPolicy]:
        """Every version of `name`, oldest first."""
        items = self._query(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": {"S": versions_pk(name)}, ":prefix": {"S": VERSION_PREFIX}},
            consistent=True,
            forward=True,
            limit=None,
        )
        return [self._read(item, name) for item in items]

    def latest_version(self, name: str) -> int:
        """The highest version stored of `name`, whatever its head says (0: none)."""
        items = self._query(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": {"S": versions_pk(name)}, ":prefix": {"S": VERSION_PREFIX}},
            consistent=True,
            forward=False,
            limit=1,
        )
        return int(items[0]["sk"]["S"].removeprefix(VERSION_PREFIX)) if items else 0

    def version(self, name: str, version: int) -> StoredPolicy | None:
        item = self._dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": versions_pk(name)}, "sk": {"S": version_sk(version)}},
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else self._read(item, name)

    def apply(self, changes: Sequence[PolicyChange], applied_by: str, at: datetime) -> None:
        """Every change, or none: `PolicyConflictError` when another apply wrote first."""
        if len(changes) > MAX_POLICIES_PER_APPLY:
            raise ValueError(f"at most {MAX_POLICIES_PER_APPLY} policies can be applied at once")
        writes: list[dict[str, Any]] = []
        for change in changes:
            record = {
                "version": {"N": str(change.version)},
                "document": {"S": change.document},
                "applied_by": {"S": applied_by},
                "applied_at": {"S": at.isoformat()},
                "source": {"S": change.source},
            }
            writes.append(
                self._put(
                    {"pk": {"S": versions_pk(change.name)}, "sk": {"S": version_sk(change.version)}}
                    | record,
                    "attribute_not_exists(pk)",
                )
            )
            head_key = {"pk": {"S": HEADS_PK}, "sk": {"S": change.name}}
            if change.head:
                writes.append(
                    self._put(
                        head_key | record, "version = :read", {":read": {"N": str(change.head)}}
                    )
                )
            else:
                writes.append(self._put(head_key | record, "attribute_not_exists(pk)"))
        try:
            self._dynamodb.transact_write_items(TransactItems=writes)
        except ClientError as error:
            if condition_failed_in(error):
                names = ", ".join(sorted({c.name for c in changes}))
                raise PolicyConflictError(
                    f"policies {names}: another apply wrote first; nothing was written, apply again"
                ) from None
            raise

    def _put(
        self, item: Mapping[str, Any], condition: str, values: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        put: dict[str, Any] = {"TableName": self._table, "Item": dict(item)}
        put["ConditionExpression"] = condition
        if values:
            put["ExpressionAttributeValues"] = dict(values)
        return {"Put": put}

    def _query(
        self,
        condition: str,
        values: Mapping[str, Any],
        *,
        consistent: bool,
        forward: bool,
        limit: int | None,
    ) -> list[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": dict(values),
            "ConsistentRead": consistent,
            "ScanIndexForward": forward,
        }
        if limit is not None:
            request["Limit"] = limit
        items: list[dict[str, Any]] = []
        while True:
            page = self._dynamodb.query(**request)
            items.extend(page.get("Items", []))
            if limit is not None or "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _read(self, item: Mapping[str, Any], name: str) -> StoredPolicy:
        where = f"({item.get('pk', {}).get('S')}, {item.get('sk', {}).get('S')}) in {self._table}"
        try:
            at = item.get("applied_at", {}).get("S")
            return StoredPolicy(
                name=name,
                version=int(item["version"]["N"]),
                document=item["document"]["S"],
                applied_by=item.get("applied_by", {}).get("S", ""),
                applied_at=datetime.fromisoformat(at) if at else None,
                source=item.get("source", {}).get("S", ""),
            )
        except (KeyError, ValueError, TypeError, AttributeError) as error:
            return StoredPolicy(
                name=name,
                version=0,
                document="",
                problem=f"stored policy {name}: item {where} is unreadable "
                f"({type(error).__name__}: {error})",
            )
