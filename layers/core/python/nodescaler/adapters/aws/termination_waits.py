"""How long a group's termination policy has answered a cause with none, in the state table.

One item a group and cause, `(TERMINATION-WAIT#<name>, <cause>)`: a partition of the waits'
own, never the group's (`GROUP#<name>`), so IAM confines the terminate function to the
waits and keeps it from each group's state and audit items (`termination_wait_keys`); and
never in the state item, which evaluate writes whole and would erase the wait with. Its
expiry lets DynamoDB delete a wait that ended long ago; `Wait.asked` ignores one that
ended, deleted yet or not. Auto Scaling waits two seconds for the answer: the client given
here should carry a budget of its own (`wiring.terminator`).

Before this layout a wait was `(GROUP#<name>, TERMINATION-WAIT#<cause>)`, which terminate
may no longer read: a wait in progress when the new version is deployed begins afresh (its
patience, at most 30 minutes, counted again from the first ask after the deploy), and the
old items expire by their TTL within a day (docs/deploy.md, "Upgrading").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.termination_wait_keys import waits_pk
from nodescaler.domain.scale_down.termination_policy import QUIET, Wait
from nodescaler.errors import StateCorruptError, StateUnavailableError


class DynamoTerminationWaits:
    def __init__(self, dynamodb: Any, table_name: str) -> None:
        self._dynamodb = dynamodb
        self._table = table_name

    def _key(self, group: str, cause: str) -> dict[str, Any]:
        return {"pk": {"S": waits_pk(group)}, "sk": {"S": cause}}

    def _where(self, group: str, cause: str) -> str:
        return f"node group {group}: termination wait item {cause!r} in {self._table}"

    @contextmanager
    def _reaching(self, group: str, cause: str) -> Iterator[None]:
        try:
            yield
        except (BotoCoreError, ClientError) as error:
            raise StateUnavailableError(f"{self._where(group, cause)}: {error}") from None

    def load(self, group: str, cause: str) -> Wait | None:
        with self._reaching(group, cause):
            item = self._dynamodb.get_item(
                TableName=self._table, Key=self._key(group, cause), ConsistentRead=True
            ).get("Item")
        if item is None:
            return None
        try:
            return Wait(
                datetime.fromisoformat(item["since"]["S"]),
                datetime.fromisoformat(item["last"]["S"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise StateCorruptError(
                f"{self._where(group, cause)} is unreadable ({type(error).__name__})"
            ) from None

    def save(self, group: str, cause: str, wait: Wait) -> None:
        expires = int((wait.last + QUIET).timestamp()) + 24 * 3600
        item = self._key(group, cause) | {
            "since": {"S": wait.since.isoformat()},
            "last": {"S": wait.last.isoformat()},
            "expires_at": {"N": str(expires)},
        }
        with self._reaching(group, cause):
            self._dynamodb.put_item(TableName=self._table, Item=item)

    def clear(self, group: str, cause: str) -> None:
        with self._reaching(group, cause):
            self._dynamodb.delete_item(TableName=self._table, Key=self._key(group, cause))
