"""The tick and the alarm fast path: which node groups to evaluate now, queued one per group.

Evaluations run in the evaluate function, serialized per group by the FIFO queue; the
dispatcher only discovers and queues, so a tick over hundreds of groups stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from nodescaler.domain.optin import TagNames, read_opt_in
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.messages import EvaluationRequest
from nodescaler.ports import EvaluationQueue, NodeGroup, NodeGroups


@dataclass(frozen=True)
class Dispatcher:
    node_groups: NodeGroups
    queue: EvaluationQueue
    policies: Mapping[str, NodeGroupPolicy]
    tag_names: TagNames = field(default_factory=TagNames)

    def tick(self, event_id: str, at: datetime) -> list[str]:
        """Queue an evaluation of every managed group; returns their names."""
        return self._queue(self.node_groups.discover(), event_id, "tick", at)

    def alarm(self, alarm_name: str, event_id: str, cause: str, at: datetime) -> list[str]:
        """Queue an evaluation of the managed groups whose policy lists `alarm_name`."""
        groups = [g for g in self.node_groups.discover() if alarm_name in self._alarms_of(g)]
        return self._queue(groups, event_id, cause, at)

    def _alarms_of(self, group: NodeGroup) -> Sequence[str]:
        policy = self.policies.get(read_opt_in(group.name, group.tags, self.tag_names).policy or "")
        return policy.spec.alarms if policy else ()

    def _queue(
        self, groups: Sequence[NodeGroup], event_id: str, cause: str, at: datetime
    ) -> list[str]:
        requests = [
            EvaluationRequest(node_group=g.name, event_id=event_id, cause=cause, requested_at=at)
            for g in groups
        ]
        self.queue.send(requests)
        return [r.node_group for r in requests]
