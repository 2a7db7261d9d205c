"""Per-group state and the decision audit trail in one DynamoDB table.

Layout (pk, sk):
  GROUP#<name>, STATE                 history, last decision, recent event ids, backoff, version,
                                      demand (14 days in five-minute slots, tenths: 1-4 KB),
                                      failures (failing metrics with a fallback: count, since),
                                      pause (`nodescaler pause`: who, why, which way, until),
                                      recheck (when its buffer runs short: the fast path
                                      reads this alone, `adapters.aws.recheck_times`)
  GROUP#<name>, DECISION#<at>#<event> one audit item per decision, deleted by TTL
  TERMINATION-WAIT#<name>, <cause>    the termination policy's wait (`termination_waits`), in
                                      a partition of its own: terminate may touch nothing else
  CLUSTER, BACKOFFS                   each group's latest backoff (attribute `backoff:<name>`),
                                      written with the group's state: one small read tells a
                                      planner which groups are backed off
  CLUSTER, CLAIMS                     scale-ups just claimed under the cluster's limits, version

Every state write is conditional on the version it read, so of two evaluations racing on
one group only the first write wins; the loser gets `StateConflictError` and retries.
A pause or resume updates only its attribute and bumps the version: an evaluation that read
the state before it then fails its write and retries with the pause, never writing over it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from botocore.exceptions import ClientError
from pydantic import BaseModel

from nodescaler.adapters.aws.recheck_times import stored_recheck
from nodescaler.adapters.state_keys import RECHECK, STATE_SK, group_pk
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.forecast import DemandHistory
from nodescaler.domain.ahead.recheck import SpareSeen
from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scale_up.backoff import Backoff, Provisioning
from nodescaler.domain.scaling.decision import Decision
from nodescaler.domain.scaling.fallback import MetricFailures
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import Claims
from nodescaler.domain.scaling.pause import Pause
from nodescaler.errors import StateConflictError, StateCorruptError

BACKOFFS_KEY = {"pk": {"S": "CLUSTER"}, "sk": {"S": "BACKOFFS"}}
CLAIMS_KEY = {"pk": {"S": "CLUSTER"}, "sk": {"S": "CLAIMS"}}


def _state_item(state: GroupState) -> dict[str, Any]:
    """The state item, every attribute DynamoDB-typed; those with nothing to say left out."""
    item: dict[str, Any] = {
        "pk": {"S": group_pk(state.group)},
        "sk": {"S": STATE_SK},
        "version": {"N": str(state.version)},
        "history": {"S": state.history.model_dump_json()},
        "recent_events": {"S": json.dumps(list(state.recent_events))},
        "problems": {"S": json.dumps(list(state.problems))},
        "protected": {"S": json.dumps(sorted(state.protected))},
        "acting_event": {"S": state.acting_event},
    }
    demand = state.demand
    if demand.values or demand.lead_seconds is not None or demand.cold or demand.warm:
        item["demand"] = {"S": state.demand.dump()}
    if state.arrivals.at is not None:
        item["arrivals"] = {"S": state.arrivals.dump()}
    if state.failures.runs:
        item["failures"] = {"S": state.failures.model_dump_json()}
    if state.recheck is not None:
        item[RECHECK] = {"S": state.recheck.isoformat()}
    if state.spare_seen is not None:
        seen = state.spare_seen
        counted = [seen.pods, seen.at.isoformat(), seen.group_pods, seen.per_minute]
        item["spare_seen"] = {"S": json.dumps(counted)}
    if state.resized is not None:
        desired, at = state.resized
        item["resized"] = {"S": json.dumps([desired, at.isoformat()])}
    for name, value in (
        ("last_decision", state.last_decision),
        ("backoff", state.backoff),
        ("provisioning", state.provisioning),
        ("acting", state.acting),
        ("pause", state.pause),
    ):
        if value is not None:
            item[name] = {"S": value.model_dump_json()}
    return item


M = TypeVar("M", bound=BaseModel)


def _resized(item: Mapping[str, Any]) -> tuple[int, datetime] | None:
    stored = item.get("resized", {}).get("S")
    if not stored:
        return None
    desired, at = json.loads(stored)
    return int(desired), datetime.fromisoformat(at)


def _optional(model: type[M], item: Mapping[str, Any], name: str) -> M | None:
    stored = item.get(name, {}).get("S")
    return model.model_validate_json(stored) if stored else None


def _spare_seen(item: Mapping[str, Any]) -> SpareSeen | None:
    """The buffer's room as last counted; an unreadable count is none: the next counts
    measure afresh (`domain.ahead.recheck`), the tick looks meanwhile."""
    try:
        pods, at, group_pods, rate = json.loads(item["spare_seen"]["S"])
        when = datetime.fromisoformat(at)
    except (KeyError, TypeError, ValueError):
        return None
    counts = (pods, 0 if group_pods is None else group_pods)
    if not all(isinstance(n, int) and n >= 0 for n in counts) or when.tzinfo is None:
        return None
    if not isinstance(rate, (int, float)) or not 0 <= rate < 1e6:
        return None
    return SpareSeen(pods, when, group_pods, float(rate))


def _failures(item: Mapping[str, Any]) -> MetricFailures:
    """The failure runs; none in an item written before fallbacks (or with none failing).
    An unreadable one counts afresh: its fallback comes later, and until then the failing
    metric holds scale-in, as without a fallback; never worth holding the whole group."""
    try:
        return _optional(MetricFailures, item, "failures") or MetricFailures()
    except ValueError:  # pydantic's ValidationError
        return MetricFailures()


def _pause(item: Mapping[str, Any]) -> Pause | None:
    """The stored pause. An unreadable one pauses both ways, saying so, rather than either
    dropping an operator's pause or holding the whole group's state: `resume` removes it."""
    try:
        return _optional(Pause, item, "pause")
    except ValueError as error:  # pydantic's ValidationError
        why = f"its stored pause is unreadable ({type(error).__name__}); resume to clear it"
        return Pause(direction=PauseDirection.BOTH, by="an unreadable pause", reason=why)


def condition_failed_in(error: ClientError) -> bool:
    """Whether a transaction was cancelled because one of its conditions failed (another
    writer got there first), not for a fault worth raising."""
    reasons = error.response.get("CancellationReasons") or []
    return error.response["Error"]["Code"] == "TransactionCanceledException" and any(
        r.get("Code") == "ConditionalCheckFailed" for r in reasons
    )


class DynamoStateStore:
    def __init__(
        self, dynamodb: Any, table_name: str, *, audit_ttl: timedelta = timedelta(days=30)
    ) -> None:
        self._dynamodb = dynamodb
        self._table = table_name
        self._audit_ttl = audit_ttl

    def load(self, group: str) -> GroupState:
        item = self._dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": group_pk(group)}, "sk": {"S": STATE_SK}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            return GroupState(group=group)
        try:
            return GroupState(
                group=group,
                version=int(item["version"]["N"]),
                history=History.model_validate_json(item["history"]["S"]),
                last_decision=_optional(Decision, item, "last_decision"),
                recent_events=tuple(json.loads(item.get("recent_events", {}).get("S", "[]"))),
                problems=tuple(json.loads(item.get("problems", {}).get("S", "[]"))),
                backoff=_optional(Backoff, item, "backoff"),
                provisioning=_optional(Provisioning, item, "provisioning"),
                protected=frozenset(json.loads(item.get("protected", {}).get("S", "[]"))),
                acting=_optional(Decision, item, "acting"),
                acting_event=item.get("acting_event", {}).get("S", ""),
                resized=_resized(item),
                demand=self._demand(group, item),
                arrivals=_arrivals(item),
                recheck=stored_recheck(item),
                spare_seen=_spare_seen(item),
                failures=_failures(item),
                pause=_pause(item),
            )
        except (KeyError, ValueError, TypeError) as error:  # pydantic's ValidationError too
            raise StateCorruptError(
                f"node group {group}: state item ({group_pk(group)}, {STATE_SK}) in "
                f"{self._table} is unreadable ({type(error).__name__}: {error}); delete it to "
                "start the group's "
                "history afresh"
            ) from None

    def _demand(self, group: str, item: Mapping[str, Any]) -> DemandHistory:
        """The recorded demand; an unreadable one starts afresh, saying why (a forecast's
        history is worth less than holding the whole group for it)."""
        if "demand" not in item:
            return DemandHistory()
        try:
            return DemandHistory.load(item["demand"]["S"])
        except (KeyError, ValueError, TypeError) as error:
            return DemandHistory(
                problem=f"its recorded demand in {self._table} was unreadable "
                f"({type(error).__name__}: {error}) and started afresh"
            )

    def save(
        self,
        state: GroupState,
        *,
        audit: Decision | None = None,
        event_id: str = "",
        backoff_changed: bool = False,
    ) -> GroupState:
        """Write `state` if nobody wrote since it was loaded; returns it with its new version.
        A changed backoff is published to the cluster's backoffs item in the same write."""
        saved = replace(state, version=state.version + 1)
        writes: list[dict[str, Any]] = [{"Put": self._put_if_at(state.version, _state_item(saved))}]
        if audit is not None:
            writes.append(
                {"Put": {"TableName": self._table, "Item": self._audit_item(audit, event_id)}}
            )
        if backoff_changed and state.backoff is not None:
            writes.append({"Update": self._publish_backoff(state.group, state.backoff)})
        try:
            self._dynamodb.transact_write_items(TransactItems=writes)
        except ClientError as error:
            if condition_failed_in(error):
                message = f"state changed since version {state.version} was read"
                raise StateConflictError(f"node group {state.group}: {message}") from None
            raise
        return saved

    def _put_if_at(self, read: int, item: dict[str, Any]) -> dict[str, Any]:
        """The put of a state item, if the stored one is still at the version `read` (0:
        none is stored yet)."""
        put: dict[str, Any] = {"TableName": self._table, "Item": item}
        if read == 0:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ConditionExpression"] = "version = :read"
            put["ExpressionAttributeValues"] = {":read": {"N": str(read)}}
        return put

    def _publish_backoff(self, group: str, backoff: Backoff) -> dict[str, Any]:
        """The update of the group's attribute in the cluster's backoffs item."""
        return {
            "TableName": self._table,
            "Key": BACKOFFS_KEY,
            "UpdateExpression": "SET #group = :backoff",
            "ExpressionAttributeNames": {"#group": f"backoff:{group}"},
            "ExpressionAttributeValues": {":backoff": {"S": backoff.model_dump_json()}},
        }

    def pause(self, group: str, pause: Pause) -> None:
        """Store the group's pause (replacing any earlier one), touching no other state: a
        group never saved gets an empty history beside it, so its item loads as state."""
        self._dynamodb.update_item(
            TableName=self._table,
            Key={"pk": {"S": group_pk(group)}, "sk": {"S": STATE_SK}},
            UpdateExpression="SET #pause = :pause, #history = if_not_exists(#history, :empty) "
            "ADD #version :one",
            ExpressionAttributeNames={
                "#pause": "pause",
                "#history": "history",
                "#version": "version",
            },
            ExpressionAttributeValues={
                ":pause": {"S": pause.model_dump_json()},
                ":empty": {"S": History().model_dump_json()},
                ":one": {"N": "1"},
            },
        )

    def resume(self, group: str) -> Pause | None:
        """Remove the group's stored pause; the pause removed, or None if it had none."""
        try:
            old = self._dynamodb.update_item(
                TableName=self._table,
                Key={"pk": {"S": group_pk(group)}, "sk": {"S": STATE_SK}},
                UpdateExpression="REMOVE #pause ADD #version :one",
                ConditionExpression="attribute_exists(#pause)",
                ExpressionAttributeNames={"#pause": "pause", "#version": "version"},
                ExpressionAttributeValues={":one": {"N": "1"}},
                ReturnValues="ALL_OLD",
            )["Attributes"]
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise
        return _pause(old)

    def _audit_item(self, decision: Decision, event_id: str) -> dict[str, Any]:
        return {
            "pk": {"S": group_pk(decision.node_group)},
            "sk": {"S": f"DECISION#{decision.at.isoformat()}#{event_id}"},
            "decision": {"S": decision.model_dump_json()},
            "expires_at": {"N": str(int((decision.at + self._audit_ttl).timestamp()))},
        }

    def backoffs(self, groups: Sequence[str]) -> dict[str, Backoff]:
        """The latest backoff of each of these groups that has one."""
        item = self._dynamodb.get_item(
            TableName=self._table, Key=BACKOFFS_KEY, ConsistentRead=True
        ).get("Item", {})
        found = {}
        for group in groups:
            try:
                found[group] = _optional(Backoff, item, f"backoff:{group}")
            except ValueError as error:  # pydantic's ValidationError too
                raise self._unreadable(
                    BACKOFFS_KEY, f"attribute backoff:{group} of", error
                ) from None
        return {g: b for g, b in found.items() if b is not None}

    def load_claims(self) -> Claims:
        item = self._dynamodb.get_item(
            TableName=self._table, Key=CLAIMS_KEY, ConsistentRead=True
        ).get("Item")
        if item is None:
            return Claims()
        try:
            stored = json.loads(item["claims"]["S"])
            return Claims(
                version=int(item["version"]["N"]),
                desired={g: (int(n), datetime.fromisoformat(at)) for g, (n, at) in stored.items()},
            )
        except (KeyError, ValueError, TypeError) as error:
            raise self._unreadable(CLAIMS_KEY, "the cluster limits' claims", error) from None

    def _unreadable(self, key: Mapping[str, Any], what: str, error: Exception) -> StateCorruptError:
        where = f"({key['pk']['S']}, {key['sk']['S']}) in {self._table}"
        return StateCorruptError(
            f"{what} {where} is unreadable ({type(error).__name__}: {error}); delete it: "
            "nodescaler writes it afresh"
        )

    def save_claims(self, claims: Claims) -> bool:
        encoded = {g: [n, at.isoformat()] for g, (n, at) in claims.desired.items()}
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(pk)"}
            if claims.version == 0
            else {
                "ConditionExpression": "version = :read",
                "ExpressionAttributeValues": {":read": {"N": str(claims.version)}},
            }
        )
        try:
            self._dynamodb.put_item(
                TableName=self._table,
                Item=CLAIMS_KEY
                | {
                    "version": {"N": str(claims.version + 1)},
                    "claims": {"S": json.dumps(encoded)},
                },
                **condition,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def decisions(self, group: str, limit: int = 20) -> list[Decision]:
        """The group's most recent audit items, newest first (for `nodescaler explain`)."""
        items = self._dynamodb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={
                ":pk": {"S": group_pk(group)},
                ":prefix": {"S": "DECISION#"},
            },
            ScanIndexForward=False,
            Limit=limit,
        )["Items"]
        return [Decision.model_validate_json(i["decision"]["S"]) for i in items]


def _arrivals(item: Mapping[str, Any]) -> Arrivals:
    """The group's pod arrivals as learnt; an unreadable record starts afresh (a buffer
    sized from arrivals then holds its maxPods, forgotten as the rate is learnt again)."""
    if "arrivals" not in item:
        return Arrivals()
    try:
        return Arrivals.load(item["arrivals"]["S"])
    except (KeyError, ValueError, TypeError):
        return Arrivals()
