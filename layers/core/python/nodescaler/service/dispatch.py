"""The tick, the alarm fast path and launch failures: which node groups to evaluate now,
queued one per group.

Evaluations run in the evaluate function, serialized per group by the FIFO queue; the
dispatcher discovers and queues, so a tick over hundreds of groups stays cheap. A launch
failure is the one thing it writes: the group's backoff, before re-planning at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from nodescaler.domain.groups.node_group import (
    MAX_GROUP_NAME,
    NodeGroup,
    ScalingActivity,
    unconfirmed_launch_failure,
)
from nodescaler.domain.groups.optin import AllowedGroups
from nodescaler.domain.outside_text import outside
from nodescaler.domain.scale_up.backoff import Backoff, BackoffRules, after_failure
from nodescaler.domain.scaling.group_state import failure_key
from nodescaler.errors import (
    EventUnconfirmableError,
    EventUnconfirmedError,
    MalformedEventError,
    StateConflictError,
    UnmanagedGroupError,
)
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.ports import Clock, EvaluationQueue, NodeGroups, ScalingEvents, StateStore
from nodescaler.service.policy_resolver import PolicyBook

CONFLICT_RETRIES = 5  # an evaluation of the group may write between our read and write
# An event dated further ahead of this function's clock carries a bad timestamp: its time
# would become its evaluations' request time, and every latency computed from it nonsense.
CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class Dispatched:
    """The groups queued, and the managed groups left out because allowedGroups omits them."""

    queued: list[str]
    not_allowed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Dispatcher:
    node_groups: NodeGroups
    queue: EvaluationQueue
    policies: PolicyBook
    state: StateStore
    clock: Clock
    backoff_rules: BackoffRules = field(default_factory=BackoffRules)
    cluster_name: str = ""
    events: ScalingEvents | None = None  # each backoff told on EventBridge
    allowed: AllowedGroups = field(default_factory=AllowedGroups)  # cdk.json's allowedGroups

    def tick(self, event_id: str, at: datetime, tick_id: str | None = None) -> Dispatched:
        """Queue an evaluation of every managed group the allow-list allows, under `tick_id`
        (the tick's identity, the same on its retries; by default the event's id)."""
        self._check_time(event_id, at)
        return self._dispatch(self.node_groups.discover(), tick_id or event_id, "tick", at)

    def alarm(self, alarm_name: str, event_id: str, cause: str, at: datetime) -> Dispatched:
        """Queue an evaluation of the managed groups whose policy lists `alarm_name`."""
        self._check_time(event_id, at)
        groups = [g for g in self.node_groups.discover() if alarm_name in self._alarms_of(g)]
        return self._dispatch(groups, event_id, cause, at)

    def _dispatch(
        self, groups: Sequence[NodeGroup], event_id: str, cause: str, at: datetime
    ) -> Dispatched:
        allowed = [g for g in groups if self.allowed.allows(g.name)]
        left_out = [g.name for g in groups if not self.allowed.allows(g.name)]
        return Dispatched(self._queue(allowed, event_id, cause, at), left_out)

    def launch_failed(
        self, group_name: str, activity_id: str, reason: str, event_id: str, at: datetime
    ) -> tuple[Backoff, list[str]]:
        """Back the group off, then queue it and every group that shares the pending pods,
        so the expanders move its demand to the next group now; returns the backoff and
        the groups queued. Only a failure the group's scaling activities confirm counts:
        anyone allowed to invoke dispatch could send the event."""
        self._check_time(event_id, at)
        groups = [g for g in self.node_groups.discover() if self.allowed.allows(g.name)]
        shown = outside(group_name, MAX_GROUP_NAME)  # not yet known to be a group of ours
        if not self.allowed.allows(group_name):
            raise UnmanagedGroupError(
                f"launch failure {activity_id}: {self.allowed.refusal(shown)}; nothing to back off"
            )
        group = next((g for g in groups if g.name == group_name), None)
        if group is None:
            raise UnmanagedGroupError(
                f"launch failure {activity_id}: node group {shown} is not managed by "
                "nodescaler (not opted in, or opted in for another cluster); nothing to back off"
            )
        activity = self._activity(group, activity_id)
        now = self.clock.now()
        if (why := unconfirmed_launch_failure(group_name, activity_id, activity, now)) is not None:
            raise EventUnconfirmedError(why)
        backoff = self._back_off(group_name, activity_id, reason, at)
        replan = [g for g in groups if g.name == group_name or self.policies.takes_pending_pods(g)]
        return backoff, self._queue(replan, event_id, f"launch failure in {group_name}", at)

    def _activity(self, group: NodeGroup, activity_id: str) -> ScalingActivity | None:
        try:
            return self.node_groups.scaling_activity(group, activity_id)
        except Exception as error:  # throttled past the SDK's retries, unreachable, refused
            raise EventUnconfirmableError(
                f"launch failure {activity_id} of node group {group.name}: its scaling "
                f"activities could not be read to confirm it ({type(error).__name__}: {error}); "
                "nothing was done, the event will be retried"
            ) from error

    def _back_off(self, group: str, activity_id: str, reason: str, at: datetime) -> Backoff:
        for _ in range(CONFLICT_RETRIES):
            state = self.state.load(group)
            if state.seen(failure_key(activity_id)) and state.backoff is not None:
                return state.backoff  # a redelivered event, or the evaluator saw it first
            backoff = after_failure(state.backoff, at, reason, self.backoff_rules)
            changed = replace(state, backoff=backoff, provisioning=None)
            try:
                self.state.save(changed.remembering(failure_key(activity_id)), backoff_changed=True)
            except StateConflictError:
                continue
            self._announce(group, state.backoff, backoff)
            return backoff
        raise StateConflictError(
            f"node group {group}: backoff for launch failure {activity_id} not recorded after "
            f"{CONFLICT_RETRIES} conflicting writes; the event will be retried"
        )

    def _announce(self, group: str, before: Backoff | None, after: Backoff) -> None:
        if self.events is None:
            return
        from nodescaler.domain.groups.scaling_events import backed_off, new_backoff

        if started := new_backoff(before, after):
            event = backed_off(group, started, self.cluster_name, "launch-failure-event")
            self.events.publish(event)

    def _check_time(self, event_id: str, at: datetime) -> None:
        ahead = at - self.clock.now()
        if ahead > CLOCK_SKEW:
            raise MalformedEventError(
                f"event {event_id}: time: dated {at.isoformat()}, {ahead} ahead of this "
                "function's clock; refused (its time would become its evaluations' request time)"
            )

    def _alarms_of(self, group: NodeGroup) -> Sequence[str]:
        policy = self.policies.policy_of(group)
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
