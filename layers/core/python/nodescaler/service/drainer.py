"""Draining a node before its instance goes: cordon it, evict every pod that can move
(honouring PodDisruptionBudgets), wait until they have gone, then let the instance go.

The drain function's whole job. A terminate lifecycle action is completed exactly once,
whatever happens, so Auto Scaling never waits out the hook's timeout because of us; an
EC2 Spot warning has no action to complete, and first asks for the node group to be
re-evaluated so replacement capacity starts at once. Kubernetes, Auto Scaling, the clock
and sleeping are ports, so the tests run a ten-minute drain in virtual time; the rules
are in `nodescaler.domain.draining`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from nodescaler.domain.draining import (
    DRAIN_TIMEOUT,
    HEARTBEAT_INTERVAL,
    MAX_GRACE_SECONDS,
    POLL,
    DrainOutcome,
    DrainProgress,
    DrainRequest,
    DrainResult,
    LifecycleAction,
    LifecycleResult,
    Replacement,
    ReplacementOutcome,
    SpotWarning,
)
from nodescaler.domain.optin import TagNames, is_managed
from nodescaler.errors import DrainFailedError, LifecycleActionExpiredError
from nodescaler.events.queue import EvaluationRequest
from nodescaler.ports import (
    Clock,
    DrainCluster,
    EvaluationQueue,
    InstanceGroups,
    LifecycleActions,
    NodeGroupLookup,
    Sleep,
)


@dataclass(frozen=True)
class Replacements:
    """Queues a re-evaluation of an interrupted instance's node group, when nodescaler
    manages it, so the group's replacement capacity is decided now, not at the next tick."""

    instances: InstanceGroups
    node_groups: NodeGroupLookup
    queue: EvaluationQueue
    tag_names: TagNames = field(default_factory=TagNames)
    cluster_name: str = ""

    def request(self, warning: SpotWarning) -> Replacement:
        instance, name = warning.instance_id, None
        try:
            name = self.instances.group_of(instance)
            if name is None:
                note = f"instance {instance} is in no Auto Scaling group: no group re-evaluated"
                return Replacement(ReplacementOutcome.NO_GROUP, None, note)
            group = self.node_groups.get(name)
            if group is None or not is_managed(group.tags, self.tag_names, self.cluster_name):
                note = f"node group {name} is not managed by nodescaler: not re-evaluated"
                return Replacement(ReplacementOutcome.UNMANAGED, name, note)
            request = EvaluationRequest(
                node_group=name,
                event_id=warning.event_id,
                cause=warning.cause,
                requested_at=warning.at,
            )
            self.queue.send([request])
        except Exception as error:  # the drain matters more; the next tick evaluates anyway
            note = f"re-evaluation of {name or 'the node group'} not queued: {error}"
            return Replacement(ReplacementOutcome.FAILED, name, note)
        return Replacement(ReplacementOutcome.QUEUED, name, f"re-evaluation of {name} queued")


@dataclass(frozen=True)
class Drainer:
    cluster: DrainCluster
    lifecycle: LifecycleActions
    clock: Clock
    sleep: Sleep
    replacements: Replacements | None = None
    drain_timeout: timedelta = DRAIN_TIMEOUT
    heartbeat_interval: timedelta = HEARTBEAT_INTERVAL
    max_grace_seconds: int = MAX_GRACE_SECONDS
    # Sent when the drain times out or fails (the instance is terminated either way).
    timeout_result: LifecycleResult = LifecycleResult.CONTINUE

    def handle(self, request: DrainRequest) -> DrainResult:
        if isinstance(request, LifecycleAction):
            return self.lifecycle_action(request)
        return self.interruption(request)

    def lifecycle_action(self, action: LifecycleAction) -> DrainResult:
        """Drain, then complete the action: exactly once, also when the drain raises (then
        with `timeout_result`, and the error raised after completing)."""
        progress = DrainProgress(action.instance_id, action.cause, action.group, self._now())
        sent = self.timeout_result
        try:
            result = self._drain(
                progress, self.drain_timeout, lambda: self.lifecycle.heartbeat(action)
            )
            if result.outcome is not DrainOutcome.TIMED_OUT:
                sent = LifecycleResult.CONTINUE
            return replace(result, lifecycle_result=sent)
        except LifecycleActionExpiredError:
            raise  # a heartbeat was refused: completing will be too, and says so itself
        except Exception as error:
            failed = progress.result(DrainOutcome.FAILED, self._now(), _describe(error))
            raise DrainFailedError(replace(failed, lifecycle_result=sent)) from error
        finally:
            self.lifecycle.complete(action, sent)

    def interruption(self, warning: SpotWarning) -> DrainResult:
        """A Spot warning: ask for replacement capacity first, then drain while there is time."""
        replacement = self.replacements.request(warning) if self.replacements else None
        group = replacement.node_group if replacement else None
        progress = DrainProgress(
            warning.instance_id, warning.cause, group, self._now(), replacement
        )
        deadline = min(self.drain_timeout, warning.deadline or self.drain_timeout)
        try:
            return self._drain(progress, deadline, heartbeat=None)
        except Exception as error:
            failed = progress.result(DrainOutcome.FAILED, self._now(), _describe(error))
            raise DrainFailedError(failed) from error

    def _now(self) -> datetime:
        return self.clock.now()

    def _drain(
        self, progress: DrainProgress, timeout: timedelta, heartbeat: Callable[[], None] | None
    ) -> DrainResult:
        # 1. The node; an instance that never joined the cluster has nothing to drain.
        node = self.cluster.find_node(progress.instance_id)
        if node is None:
            return progress.result(DrainOutcome.NOT_IN_CLUSTER, self._now())
        progress.node = node

        # 2. Cordon, so nothing new lands on it, then decide which pods move.
        self.cluster.cordon(node)
        progress.plan(self.cluster.pods_on(node))

        # 3. Evict, retrying refusals with backoff, until every evicted pod has gone or the
        #    deadline passes; heartbeats keep the lifecycle action alive meanwhile.
        deadline = progress.started + timeout
        next_beat = progress.started + self.heartbeat_interval
        while True:
            for pod in progress.due(self._now()):
                grace = pod.grace(self.max_grace_seconds)
                progress.record(pod, self.cluster.evict(pod, grace), grace, self._now())
            if progress.terminating:
                progress.forget_gone(self.cluster.pods_on(node))
            now = self._now()
            if progress.done:
                return progress.result(DrainOutcome.DRAINED, now)
            if now >= deadline:
                return progress.result(DrainOutcome.TIMED_OUT, now)
            if heartbeat is not None and now >= next_beat:
                heartbeat()
                next_beat = now + self.heartbeat_interval
            wake = [deadline, *(progress.retry_at[key] for key in progress.to_evict)]
            if progress.terminating:
                wake.append(now + POLL)
            if heartbeat is not None:
                wake.append(next_beat)
            self.sleep(max((min(wake) - now).total_seconds(), 0.0))


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"
