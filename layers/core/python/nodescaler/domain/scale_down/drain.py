"""Draining a node, as rules and values: which pods move, how an eviction's answer is
taken, when a refused one is tried again, and what a drain reports.

The drain service (`nodescaler.service.drainer`) runs these against the cluster and Auto
Scaling; nothing here calls either, or reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from nodescaler.domain.scale_down.pod_rules import (
    CA_DEFAULTS,
    DEFAULT_GRACE_SECONDS,
    DrainRules,
    blocking,
)

if TYPE_CHECKING:
    from nodescaler.domain.cluster.snapshot import DisruptionBudget

DRAIN_TIMEOUT = timedelta(seconds=600)
# A Spot warning comes two minutes before the instance is reclaimed; the last ten seconds
# are left for the function's own last calls.
INTERRUPTION_DEADLINE = timedelta(seconds=110)
HEARTBEAT_INTERVAL = timedelta(seconds=60)
# EC2 interrupts an instance two minutes after its warning, and EventBridge gives up on
# handing an event to the drain after five (infra/drain.py's DRAIN_MAX_EVENT_AGE): a Spot
# warning older than this is a replay, whatever its instance is doing now.
WARNING_MAX_AGE = timedelta(minutes=5)
MAX_GRACE_SECONDS = 600
POLL = timedelta(seconds=5)  # how often evicted pods are looked for while they terminate
FIRST_RETRY = timedelta(seconds=5)  # a refused eviction is retried after this, doubling
LAST_RETRY = timedelta(seconds=30)  # ... up to this
TERMINAL_PHASES = ("Succeeded", "Failed")
# After a rebalance recommendation: how often the instance is looked at, and the Auto
# Scaling lifecycle states that mean it is going (capacity rebalancing replaces it).
WATCH_INTERVAL = timedelta(seconds=30)
LEAVING_STATES = ("Terminat", "Detach", "Warmed")
# The states in which a terminate hook holds an instance, its lifecycle action pending:
# https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html
# (and, for a warm pool's instance, warm-pool-instance-lifecycle.html).
HOOK_WAIT_STATES = ("Terminating:Wait", "Warmed:Terminating:Wait")
SPOT_MARKET = "spot"  # DescribeInstances' InstanceLifecycle of a Spot Instance


class DrainCause(StrEnum):
    LIFECYCLE_ACTION = "lifecycle-action"
    SPOT_INTERRUPTION = "spot-interruption"
    REBALANCE_RECOMMENDATION = "rebalance-recommendation"

    @property
    def event(self) -> str:
        """The event in words, as a log line names it: "spot interruption"."""
        return self.value.replace("-", " ")


@dataclass(frozen=True)
class LifecycleAction:
    """A terminate lifecycle action to heartbeat and complete: the hook holds the instance
    until then."""

    group: str
    hook: str
    instance_id: str
    token: str

    @property
    def cause(self) -> DrainCause:
        return DrainCause.LIFECYCLE_ACTION


@dataclass(frozen=True)
class SpotWarning:
    """An EC2 Spot interruption warning or rebalance recommendation for one instance."""

    instance_id: str
    cause: DrainCause
    event_id: str  # the event's id: its group's re-evaluation is keyed on it
    at: datetime

    def drain_until(self, started: datetime, timeout: timedelta) -> datetime:
        """When its drain, started at `started`, must end: after `timeout`, and for an
        interruption 110 s after the warning, whenever the drain could start (EC2 reclaims
        the instance two minutes after warning it, however late the event was delivered)."""
        until = started + timeout
        if self.cause is DrainCause.SPOT_INTERRUPTION:
            return min(until, self.at + INTERRUPTION_DEADLINE)
        return until


DrainRequest = LifecycleAction | SpotWarning


@dataclass(frozen=True)
class Membership:
    """An instance as Auto Scaling describes it: its group and its lifecycle state."""

    group: str
    state: str  # "InService", "Terminating:Wait", ...


def unconfirmed_action(action: LifecycleAction, member: Membership | None) -> str | None:
    """Why Auto Scaling's own record does not bear the lifecycle action out (a forged or
    stale event), or None: its hook holds the instance, in the event's group."""
    event = f"{action.cause.event} for instance {action.instance_id} in node group {action.group}"
    if member is None:
        return f"{event}: Auto Scaling has the instance in no group"
    if member.group != action.group:
        return f"{event}: the instance is in node group {member.group}"
    if member.state not in HOOK_WAIT_STATES:
        return f"{event}: the instance is {member.state}, not held by a terminate hook"
    return None


def unconfirmed_warning(
    warning: SpotWarning, group: str, market: str | None, now: datetime
) -> str | None:
    """Why EC2's own record does not bear the Spot warning out, or None: EC2 warns only
    Spot Instances of an interruption, and recommends only their rebalancing; and a
    warning is current only for minutes (a replayed one would drain a running instance)."""
    event = f"{warning.cause.event} for instance {warning.instance_id} in node group {group}"
    if market is None:
        return f"{event}: EC2 has no such instance"
    if market != SPOT_MARKET:
        return f"{event}: its market is {market}, not spot"
    if (age := now - warning.at) > WARNING_MAX_AGE:
        return (
            f"{event}: issued at {warning.at:%Y-%m-%dT%H:%M:%SZ}, {age.total_seconds():.0f} s "
            f"ago, longer than the {WARNING_MAX_AGE.total_seconds():.0f} s a current one can "
            "be: a replay"
        )
    return None


class LifecycleResult(StrEnum):
    # For a terminating instance both let it terminate; ABANDON also skips the group's
    # other terminate hooks, CONTINUE lets them run.
    CONTINUE = "CONTINUE"
    ABANDON = "ABANDON"


class DrainOutcome(StrEnum):
    DRAINED = "drained"
    TIMED_OUT = "timed-out"  # pods were left on the node at the deadline
    NOT_IN_CLUSTER = "not-in-cluster"  # no node has this instance: it never joined
    NOT_OURS = "not-ours"  # its group is neither opted in nor hooked by the stack: untouched
    FAILED = "failed"  # something raised; the lifecycle action was completed all the same
    # AWS's own record does not bear the event out (forged, or stale): untouched, not answered
    UNCONFIRMED = "unconfirmed"


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
    # What the drainability rules read (`domain.scale_down.pod_rules`), as for scale-in
    labels: Mapping[str, str] = field(default_factory=dict)
    controlled: bool = True
    local_storage: bool = False
    safe_to_evict: bool = False
    not_safe_to_evict: bool = False
    gone_after: datetime | None = None  # deleted: taken as gone after this
    created: datetime | None = None  # its creationTimestamp (None: unknown, so never "old")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def grace(self, max_seconds: int) -> int:
        """The grace period its eviction gives it: its own, capped at `max_seconds`."""
        own = DEFAULT_GRACE_SECONDS if self.grace_seconds is None else self.grace_seconds
        return min(own, max_seconds)

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


class ReplacementOutcome(StrEnum):
    QUEUED = "queued"
    UNMANAGED = "unmanaged"  # its group is hooked by the stack (drainGroups) but not opted in
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
    problem: str | None = None  # what failed, why the node is not ours, or why refused
    uncordoned: bool = False  # a rebalance recommendation's node, whose instance stayed

    @property
    def message(self) -> str:
        """One line for the log: what happened to which node, and what was left."""
        node = f"node {self.node} ({self.instance_id})"
        evicted = f"{len(self.evicted)} pods evicted"
        match self.outcome:
            case DrainOutcome.NOT_IN_CLUSTER:
                text = f"instance {self.instance_id} has no node in the cluster: nothing to drain"
            case DrainOutcome.NOT_OURS:
                text = f"{self.problem}: its node is left alone"
            case DrainOutcome.UNCONFIRMED:
                text = f"refused: {self.problem}; its node is left alone"
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
        if self.uncordoned:
            text += "; uncordoned: the instance stayed in service"
        return text


@dataclass
class DrainProgress:
    """One drain as it goes, so that a failure can still say what was done."""

    instance_id: str
    cause: str
    node_group: str | None
    started: datetime
    replacement: Replacement | None = None
    node: str | None = None
    cordoned: bool = False  # this drain cordoned the node (it was schedulable before)
    to_evict: dict[str, DrainPod] = field(default_factory=dict)
    terminating: dict[str, DrainPod] = field(default_factory=dict)  # evicted, not gone yet
    evicted: list[str] = field(default_factory=list)
    skipped: list[PodNote] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    retry_at: dict[str, datetime] = field(default_factory=dict)
    retry_after: dict[str, timedelta] = field(default_factory=dict)
    # Pods that may not be evicted (as kubectl drain refuses them without --force): left
    # on the node, watched in case someone moves them, and the drain never done with them.
    refused: dict[str, DrainPod] = field(default_factory=dict)

    def plan(
        self,
        pods: Sequence[DrainPod],
        rules: DrainRules = CA_DEFAULTS,
        budgets: Sequence[DisruptionBudget] | None = (),
    ) -> None:
        self.skipped.clear()  # a drain started again after an outage plans afresh
        self.refused.clear()
        for pod in pods:
            if pod.key in self.terminating:  # evicted before an outage: watched till gone
                continue
            if (why := pod.stays) is not None:
                self.skipped.append(PodNote(pod.key, why))
            elif pod.gone_after is not None and pod.gone_after < self.started:
                self.skipped.append(PodNote(pod.key, "deleted, past its grace period"))
            # judged when the drain began, a moment after the scale-in that chose the node
            elif (why := blocking(pod, rules, budgets, self.started)) is not None:
                self.refused[pod.key] = pod
                self.reasons[pod.key] = f"not evicted: {why}"
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
        for watched in (self.terminating, self.refused):
            for key, pod in list(watched.items()):
                if pod.uid not in running:
                    del watched[key]

    @property
    def watching(self) -> bool:
        """Pods it waits to see gone: evicted ones terminating, refused ones."""
        return bool(self.terminating or self.refused)

    def due(self, now: datetime) -> list[DrainPod]:
        return [pod for key, pod in self.to_evict.items() if self.retry_at[key] <= now]

    @property
    def done(self) -> bool:
        return not self.to_evict and not self.watching

    def result(
        self, outcome: DrainOutcome, now: datetime, problem: str | None = None
    ) -> DrainResult:
        left = [*self.to_evict, *self.terminating, *self.refused]
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
