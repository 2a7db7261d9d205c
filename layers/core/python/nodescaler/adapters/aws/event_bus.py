"""Scaling events on EventBridge: what an invocation published, put at its end in as few
PutEvents calls as the API allows (ten entries each). The client is made on the first
put, so an invocation that tells nothing pays nothing for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from nodescaler.adapters.aws import describe_aws_error

if TYPE_CHECKING:
    from nodescaler.domain.groups.scaling_events import ScalingEvent

BATCH = 10  # the most entries PutEvents takes


class EventBridgeScalingEvents:
    def __init__(self, client: Callable[[], Any], bus: str, source: str = "nodescaler") -> None:
        self._client = client
        self._bus = bus
        self._source = source
        self._pending: list[ScalingEvent] = []

    def publish(self, event: ScalingEvent) -> None:
        self._pending.append(event)

    def flush(self) -> list[str]:
        """Every batch is tried, even after one failed; nothing is kept for a later flush
        (the next invocation's events are its own, and a retry would send them twice)."""
        pending, self._pending = self._pending, []
        unput: list[str] = []
        for start in range(0, len(pending), BATCH):
            unput.extend(self._put(pending[start : start + BATCH]))
        return unput

    def _put(self, batch: Sequence[ScalingEvent]) -> list[str]:
        entries = [
            {
                "Source": self._source,
                "DetailType": event.detail_type,
                "Detail": event.detail_json(),
                "EventBusName": self._bus,
                "Time": event.at,
            }
            for event in batch
        ]
        try:
            response = self._client().put_events(Entries=entries)
        except Exception as error:  # any failure: the scaling it tells of is done all the same
            why = f"PutEvents on bus {self._bus} failed: {describe_aws_error(error)}"
            return [f"{_name(event)}: {why}" for event in batch]
        return [
            f"{_name(event)}: refused by bus {self._bus}: {entry.get('ErrorCode', '?')}: "
            f"{entry.get('ErrorMessage', '')}"
            for event, entry in zip(batch, response.get("Entries", []), strict=False)
            if "ErrorCode" in entry
        ]


def _name(event: ScalingEvent) -> str:
    return f"{event.detail_type} for node group {event.detail.node_group}"
