"""Draining a node before its instance goes: cordon it, evict every pod that can move
(honouring PodDisruptionBudgets), wait until they have gone, then let the instance go.

The drain function's whole job. A terminate lifecycle action is completed exactly once,
whatever happens, so Auto Scaling never waits out the hook's timeout because of us; an
EC2 Spot warning has no action to complete, and first asks for the node group to be
re-evaluated so replacement capacity starts at once. Kubernetes, Auto Scaling, the clock
and sleeping are ports, so the tests run a ten-minute drain in virtual time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from nodescaler.domain.optin import TagNames, is_managed
from nodescaler.drain_events import (
    DrainEvent,
    LifecycleAction,
    LifecycleActionEvent,
    SpotEvent,
    SpotInterruptionEvent,
)
from nodescaler.messages import EvaluationRequest
from nodescaler.ports import Clock, EvaluationQueue, NodeGroup

DRAIN_TIMEOUT = timedelta(seconds=600)
# A Spot warning comes two minutes before the instance is reclaimed; the last ten seconds
# are left for the function's own last calls.
INTERRUPTION_DEADLINE = timedelta(seconds=110)
HEARTBEAT_INTERVAL = timedelta(seconds=60)
DEFAULT_GRACE_SECONDS = 30  # a pod's terminationGracePeriodSeconds when it names none
MAX_GRACE_SECONDS = 600
POLL = timedelta(seconds=5)  # how often evicted pods are looked for while they terminate
FIRST_RETRY = timedelta(seconds=5)  # a refused eviction is retried after this, doubling
LAST_RETRY = timedelta(seconds=30)  # ... up to this
TERMINAL_PHASES = ("Succeeded", "Failed")

Sleep = Callable[[float], None]


class LifecycleResult(StrEnum):
    # For a terminating instance both let it terminate; ABANDON also skips the group's
    # other terminate hooks, CONTINUE lets them run.
    CONTINUE = "CONTINUE"
    ABANDON = "ABANDON"


class DrainOutcome(StrEnum):
    DRAINED = "drained"
    TIMED_OUT = "timed-out"  # pods were left on the node at the deadline
    NOT_IN_CLUSTER = "not-in-cluster"  # no node has this instance: it never joined
    FAILED = "failed"  # something raised; the lifecycle action was completed all the same


class EvictionOutcome(StrEnum):
    EVICTED = "evicted"
    GONE = "gone"  # 404: the pod was deleted already
    BLOCKED = "blocked"  # 429: a PodDisruptionBudget does not allow it now
    FAILED = "failed"  # any other answer (a pod under two budgets answers 500): retried too


@dataclass(frozen=True)
class Eviction:
    outcome: EvictionOutcome
    reason: str = ""  # "blocked by PodDisruptionBudget default/web (...)", the API's message


@dataclass(frozen=True)
class DrainPod:
    """A pod on the node being drained, as much of it as the drain reads."""

    namespace: str
    name: str
    uid: str = ""  # a pod recreated under the same name is another pod
    phase: str = "Running"
    daemon_set: bool = False
    mirror: bool = False  # a static pod's mirror: the kubelet runs it, eviction can't move it
    grace_seconds: int | None = None  # its terminationGracePeriodSeconds

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def stays(self) -> str | None:
        """Why the drain leaves it where it is, as kubectl drain does; None: evict it."""
        if self.mirror:
            return "mirror pod of a static pod"
        if self.daemon_set:
            return "DaemonSet pod"
        if self.phase in TERMINAL_PHASES:
            return f"finished ({self.phase})"
        return None


class DrainCluster(Protocol):
    """The Kubernetes side of a drain."""

    def find_node(self, instance_id: str) -> str | None:
        """The name of the node whose spec.providerID ends in /<instance_id>, or None."""
        ...

    def cordon(self, node: str) -> None: ...

    def pods_on(self, node: str) -> Sequence[DrainPod]: ...

    def evict(self, pod: DrainPod, grace_seconds: int) -> Eviction:
        """An eviction through the Eviction API; raises only when the API can't be reached."""
        ...


class LifecycleActions(Protocol):
    """The Auto Scaling side: both raise `LifecycleActionExpiredError` for a gone action."""

    def heartbeat(self, action: LifecycleAction) -> None: ...

    def complete(self, action: LifecycleAction, result: LifecycleResult) -> None: ...


class InstanceGroups(Protocol):
    def group_of(self, instance_id: str) -> str | None:
        """The Auto Scaling group the instance is in, or None."""
        ...


class GroupLookup(Protocol):
    def get(self, name: str) -> NodeGroup | None: ...


class LifecycleActionExpiredError(RuntimeError):
    """Auto Scaling no longer holds the lifecycle action (its heartbeat timeout passed, or it
    was completed): names the group, the hook and the instance."""


class ReplacementOutcome(StrEnum):
    QUEUED = "queued"
    NO_GROUP = "no-group"  # the instance is in no Auto Scaling group
    UNMANAGED = "unmanaged"  # its group is not opted in
    FAILED = "failed"  # looking up or queueing failed; the next tick evaluates the group


@dataclass(frozen=True)
class Replacement:
    """What a Spot warning did about replacement capacity."""

    outcome: ReplacementOutcome
    node_group: str | None
    note: str


@dataclass(frozen=True)
class PodNote:
    pod: str  # namespace/name
    reason: str


@dataclass(frozen=True)
class DrainResult:
    instance_id: str
    cause: str  # lifecycle-action, spot-interruption, rebalance-recommendation
    outcome: DrainOutcome
    node: str | None = None
    node_group: str | None = None
    evicted: tuple[str, ...] = ()
    skipped: tuple[PodNote, ...] = ()  # left in place on purpose (DaemonSet, mirror, finished)
    remaining: tuple[PodNote, ...] = ()  # still on the node when the drain ended, and why
    lifecycle_result: LifecycleResult | None = None  # sent with CompleteLifecycleAction
    replacement: Replacement | None = None  # Spot warnings only
    seconds: float = 0.0
    problem: str | None = None  # what failed

    @property
    def message(self) -> str:
        """One line for the log: what happened to which node, and what was left."""
        node = f"node {self.node} ({self.instance_id})"
        evicted = f"{len(self.evicted)} pods evicted"
        match self.outcome:
            case DrainOutcome.NOT_IN_CLUSTER:
                text = f"instance {self.instance_id} has no node in the cluster: nothing to drain"
            case DrainOutcome.DRAINED:
                text = f"{node} drained in {self.seconds:.0f} s: {evicted}"
            case DrainOutcome.TIMED_OUT:
                left = "; ".join(f"{p.pod} {p.reason}" for p in self.remaining)
                text = f"{node} not drained in {self.seconds:.0f} s: {evicted}, left: {left}"
            case _:
                where = node if self.node else f"instance {self.instance_id}"
                text = f"draining {where} failed after {evicted}: {self.problem}"
        if self.replacement is not None:
            text += f"; {self.replacement.note}"
        if self.lifecycle_result is not None:
            text += f"; lifecycle action completed with {self.lifecycle_result}"
        return text


class DrainFailedError(RuntimeError):
    """A drain raised part-way; carries what it had done (the lifecycle action is completed)."""

    def __init__(self, result: DrainResult) -> None:
        super().__init__(result.message)
        self.result = result


@dataclass(frozen=True)
class Replacements:
    """Queues a re-evaluation of an interrupted instance's node group, when nodescaler
    manages it, so the group's replacement capacity is decided now, not at the next tick."""

    instances: InstanceGroups
    node_groups: GroupLookup
    queue: EvaluationQueue
    tag_names: TagNames = field(default_factory=TagNames)
    cluster_name: str = ""

    def request(self, event: SpotEvent) -> Replacement:
        instance, name = event.instance_id, None
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
                node_group=name, event_id=event.id, cause=event.cause, requested_at=event.time
            )
            self.queue.send([request])
        except Exception as error:  # the drain matters more; the next tick evaluates anyway
            note = f"re-evaluation of {name or 'the node group'} not queued: {error}"
            return Replacement(ReplacementOutcome.FAILED, name, note)
        return Replacement(ReplacementOutcome.QUEUED, name, f"re-evaluation of {name} queued")


@dataclass
class _Progress:
    """One drain as it goes, so that a failure can still say what was done."""

    instance_id: str
    cause: str
    node_group: str | None
    started: datetime
    replacement: Replacement | None = None
    node: str | None = None
    to_evict: dict[str, DrainPod] = field(default_factory=dict)
    terminating: dict[str, DrainPod] = field(default_factory=dict)  # evicted, not gone yet
    evicted: list[str] = field(default_factory=list)
    skipped: list[PodNote] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    retry_at: dict[str, datetime] = field(default_factory=dict)
    retry_after: dict[str, timedelta] = field(default_factory=dict)

    def plan(self, pods: Sequence[DrainPod]) -> None:
        for pod in pods:
            if (why := pod.stays) is not None:
                self.skipped.append(PodNote(pod.key, why))
            else:
                self.to_evict[pod.key] = pod
                self.retry_at[pod.key] = self.started

    def record(self, pod: DrainPod, eviction: Eviction, grace: int, now: datetime) -> None:
        key = pod.key
        if eviction.outcome is EvictionOutcome.EVICTED:
            del self.to_evict[key]
            self.terminating[key] = pod
            self.evicted.append(key)
            self.reasons[key] = f"evicted, still terminating (grace period {grace} s)"
        elif eviction.outcome is EvictionOutcome.GONE:
            del self.to_evict[key]
            self.reasons.pop(key, None)
        else:
            delay = self.retry_after.get(key, FIRST_RETRY)
            self.retry_at[key] = now + delay
            self.retry_after[key] = min(delay * 2, LAST_RETRY)
            self.reasons[key] = eviction.reason

    def forget_gone(self, on_node: Sequence[DrainPod]) -> None:
        # A finished pod's containers have stopped: it holds nothing the instance takes away.
        running = {p.uid for p in on_node if p.phase not in TERMINAL_PHASES}
        for key, pod in list(self.terminating.items()):
            if pod.uid not in running:
                del self.terminating[key]

    def due(self, now: datetime) -> list[DrainPod]:
        return [pod for key, pod in self.to_evict.items() if self.retry_at[key] <= now]

    @property
    def done(self) -> bool:
        return not self.to_evict and not self.terminating

    def result(
        self, outcome: DrainOutcome, now: datetime, problem: str | None = None
    ) -> DrainResult:
        left = [*self.to_evict, *self.terminating]
        return DrainResult(
            instance_id=self.instance_id,
            cause=self.cause,
            outcome=outcome,
            node=self.node,
            node_group=self.node_group,
            evicted=tuple(self.evicted),
            skipped=tuple(self.skipped),
            remaining=tuple(
                PodNote(key, self.reasons.get(key, "not evicted before the deadline"))
                for key in left
            ),
            replacement=self.replacement,
            seconds=(now - self.started).total_seconds(),
            problem=problem,
        )


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

    def handle(self, event: DrainEvent) -> DrainResult:
        if isinstance(event, LifecycleActionEvent):
            return self.lifecycle_action(event.detail)
        return self.interruption(event)

    def lifecycle_action(self, action: LifecycleAction) -> DrainResult:
        """Drain, then complete the action: exactly once, also when the drain raises (then
        with `timeout_result`, and the error raised after completing)."""
        progress = _Progress(action.instance_id, "lifecycle-action", action.group, self._now())
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

    def interruption(self, event: SpotEvent) -> DrainResult:
        """A Spot warning: ask for replacement capacity first, then drain while there is time."""
        replacement = self.replacements.request(event) if self.replacements else None
        group = replacement.node_group if replacement else None
        progress = _Progress(event.instance_id, event.cause, group, self._now(), replacement)
        deadline = self.drain_timeout
        if isinstance(event, SpotInterruptionEvent):
            deadline = min(deadline, INTERRUPTION_DEADLINE)
        try:
            return self._drain(progress, deadline, heartbeat=None)
        except Exception as error:
            failed = progress.result(DrainOutcome.FAILED, self._now(), _describe(error))
            raise DrainFailedError(failed) from error

    def grace_for(self, pod: DrainPod) -> int:
        own = DEFAULT_GRACE_SECONDS if pod.grace_seconds is None else pod.grace_seconds
        return min(own, self.max_grace_seconds)

    def _now(self) -> datetime:
        return self.clock.now()

    def _drain(
        self, progress: _Progress, timeout: timedelta, heartbeat: Callable[[], None] | None
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
                grace = self.grace_for(pod)
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
