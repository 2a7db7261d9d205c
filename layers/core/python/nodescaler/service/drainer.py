"""Draining a node before its instance goes: cordon it, evict every pod that can move
(honouring PodDisruptionBudgets), wait until they have gone, then let the instance go.

The drain function's whole job. A terminate lifecycle action is completed exactly once,
whatever happens, so Auto Scaling never waits out the hook's timeout because of us; an
EC2 Spot warning has no action to complete, and first asks for the node group to be
re-evaluated so replacement capacity starts at once. Kubernetes, Auto Scaling, the clock
and sleeping are ports, so the tests run a ten-minute drain in virtual time; the rules
are in `nodescaler.domain.scale_down.drain`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from nodescaler.deployment import DEFAULT_DRAIN_HOOK
from nodescaler.domain.groups.optin import TagNames, is_managed
from nodescaler.domain.scale_down.drain import (
    DRAIN_TIMEOUT,
    HEARTBEAT_INTERVAL,
    LEAVING_STATES,
    MAX_GRACE_SECONDS,
    POLL,
    WATCH_INTERVAL,
    DrainCause,
    DrainOutcome,
    DrainProgress,
    DrainRequest,
    DrainResult,
    LifecycleAction,
    LifecycleResult,
    Replacement,
    ReplacementOutcome,
    SpotWarning,
    unconfirmed_action,
    unconfirmed_warning,
)
from nodescaler.domain.scale_down.pod_rules import CA_DEFAULTS, KUBE_SYSTEM, DrainRules
from nodescaler.errors import (
    DrainFailedError,
    EventUnconfirmableError,
    LifecycleActionExpiredError,
    RetryableError,
)
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.ports import (
    Clock,
    DrainCluster,
    EvaluationQueue,
    InstanceGroups,
    InstanceMarkets,
    LifecycleActions,
    NodeGroupLookup,
    ScalingEvents,
    Sleep,
)

T = TypeVar("T")

# An AWS or Kubernetes call that fails is tried again after this wait, doubling up to the
# heartbeat interval (beyond the SDK's own retries): the drain function has no Lambda retries
# (a failed drain has acted already), so a passing outage is waited out here.
FIRST_WAIT = timedelta(seconds=5)
# A Spot warning's two minutes leave only this long to confirm it (two reads again).
SPOT_CONFIRM_WITHIN = timedelta(seconds=20)


@dataclass(frozen=True)
class Owners:
    """Whose node it is. nodescaler touches only the nodes of groups it manages (opted in,
    for this cluster) or that the stack hooked by name (`drainGroups`): a hook or a Spot
    warning for any other group is not its business, whatever the event says. Auto
    Scaling's and EC2's records (`instances`, `markets`) confirm the event itself: anyone
    allowed to invoke the function could send one."""

    instances: InstanceGroups
    markets: InstanceMarkets
    node_groups: NodeGroupLookup
    tag_names: TagNames = field(default_factory=TagNames)
    cluster_name: str = ""
    drain_groups: frozenset[str] = frozenset()
    # The deployment's own terminate hook: another deployment's hook on a group both watch
    # is answered by that deployment.
    hook: str = DEFAULT_DRAIN_HOOK

    def manages(self, group: str) -> bool:
        found = self.node_groups.get(group)
        return found is not None and is_managed(found.tags, self.tag_names, self.cluster_name)

    def why_not_ours(self, group: str | None, instance_id: str) -> str | None:
        """None when the group's nodes are ours to drain; else why not, in words."""
        if group is None:
            return f"instance {instance_id} is in no Auto Scaling group"
        if group in self.drain_groups or self.manages(group):
            return None
        return (
            f"instance {instance_id} is in node group {group}, which is neither opted in nor "
            "one of the stack's drainGroups"
        )


@dataclass(frozen=True)
class Replacements:
    """Queues a re-evaluation of an interrupted instance's node group, when nodescaler
    manages it, so the group's replacement capacity is decided now, not at the next tick."""

    owners: Owners
    queue: EvaluationQueue

    def request(self, warning: SpotWarning, group: str) -> Replacement:
        try:
            if not self.owners.manages(group):
                note = f"node group {group} is not managed by nodescaler: not re-evaluated"
                return Replacement(ReplacementOutcome.UNMANAGED, group, note)
            request = EvaluationRequest(
                node_group=group,
                event_id=warning.event_id,
                cause=warning.cause,
                requested_at=warning.at,
            )
            self.queue.send([request])
        except Exception as error:  # the drain matters more; the next tick evaluates anyway
            note = f"re-evaluation of {group} not queued: {error}"
            return Replacement(ReplacementOutcome.FAILED, group, note)
        return Replacement(ReplacementOutcome.QUEUED, group, f"re-evaluation of {group} queued")


@dataclass(frozen=True)
class Drainer:
    cluster: DrainCluster
    lifecycle: LifecycleActions
    clock: Clock
    sleep: Sleep
    owners: Owners
    replacements: Replacements | None = None
    drain_timeout: timedelta = DRAIN_TIMEOUT
    heartbeat_interval: timedelta = HEARTBEAT_INTERVAL
    max_grace_seconds: int = MAX_GRACE_SECONDS
    # Sent when the drain times out or fails (the instance is terminated either way).
    timeout_result: LifecycleResult = LifecycleResult.CONTINUE
    events: ScalingEvents | None = None  # each drain's outcome told on EventBridge
    rules: DrainRules = CA_DEFAULTS  # which pods it refuses to evict, as scale-in keeps them

    def handle(self, request: DrainRequest) -> DrainResult:
        """The drain, its outcome told once it is over (its lifecycle action completed)."""
        try:
            if isinstance(request, LifecycleAction):
                result = self.lifecycle_action(request)
            else:
                result = self.interruption(request)
        except DrainFailedError as error:
            self._announce(error.result)
            raise
        self._announce(result)
        return result

    def _announce(self, result: DrainResult) -> None:
        if self.events is None:
            return
        from nodescaler.domain.groups.scaling_events import drain_finished

        if (event := drain_finished(result, self.owners.cluster_name, self._now())) is not None:
            self.events.publish(event)

    def lifecycle_action(self, action: LifecycleAction) -> DrainResult:
        """Drain, then complete the action: exactly once, also when the drain raises (then
        with `timeout_result`, and the error raised after completing). A group that is not
        ours is left alone, its action too: its own hook's timeout decides."""
        if action.hook != self.owners.hook:
            other = f"lifecycle hook {action.hook} is not this deployment's ({self.owners.hook})"
            return self._not_ours(action.instance_id, action.cause, action.group, other)
        started = self._now()
        # Held while whose group it is can't be read: a group not ours is refused the
        # heartbeat by the function's role (infra/permissions.py).
        deadline, keep_held = started + self.drain_timeout, self._keeping_held(action)
        whose = partial(self.owners.why_not_ours, action.group)
        if (why := self._confirming(action, whose, deadline, keep_held)) is not None:
            return self._not_ours(action.instance_id, action.cause, action.group, why)
        member = self._confirming(action, self.owners.instances.membership, deadline, keep_held)
        if (why := unconfirmed_action(action, member)) is not None:
            return self._refused(action, action.group, why)
        progress = DrainProgress(action.instance_id, action.cause, action.group, started)
        sent = self.timeout_result
        try:
            beat = partial(self.lifecycle.heartbeat, action)
            drain = partial(self._drain, progress, self.drain_timeout, beat)
            result = self._retrying(drain, deadline, keep_held)
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
        """A Spot warning: ask for replacement capacity first, then drain while there is time.
        After a rebalance recommendation, whose instance may well stay, the node is watched
        until the deadline and uncordoned if its instance is still in service."""
        confirm_by = self._now() + SPOT_CONFIRM_WITHIN
        member = self._confirming(warning, self.owners.instances.membership, confirm_by)
        group = member.group if member else None
        whose = partial(self.owners.why_not_ours, group)
        if (why := self._confirming(warning, whose, confirm_by)) is not None:
            return self._not_ours(warning.instance_id, warning.cause, group, why)
        assert group is not None
        market = self._confirming(warning, self.owners.markets.market_of, confirm_by)
        if (why := unconfirmed_warning(warning, group, market, self._now())) is not None:
            return self._refused(warning, group, why)
        replacement = self.replacements.request(warning, group) if self.replacements else None
        progress = DrainProgress(
            warning.instance_id, warning.cause, group, self._now(), replacement
        )
        until = warning.drain_until(progress.started, self.drain_timeout)
        try:
            drain = partial(self._drain, progress, until - progress.started, None)
            result = self._retrying(drain, until, keep_alive=lambda: None)
            if warning.cause is DrainCause.REBALANCE_RECOMMENDATION and progress.cordoned:
                result = self._uncordon_if_it_stays(result, until)
            return result
        except Exception as error:
            failed = progress.result(DrainOutcome.FAILED, self._now(), _describe(error))
            raise DrainFailedError(failed) from error

    def _uncordon_if_it_stays(self, result: DrainResult, deadline: datetime) -> DrainResult:
        """Wait for the instance to start terminating (Auto Scaling's capacity rebalancing
        replaces it); if it has not by the deadline, it stays: let pods onto it again."""
        while True:
            member = self.owners.instances.membership(result.instance_id)
            if member is None or member.state.startswith(LEAVING_STATES):
                return result
            now = self._now()
            if now >= deadline:
                assert result.node is not None
                self.cluster.uncordon(result.node)
                return replace(result, uncordoned=True)
            self.sleep(min(WATCH_INTERVAL, deadline - now).total_seconds())

    def _not_ours(self, instance_id: str, cause: str, group: str | None, why: str) -> DrainResult:
        return DrainResult(instance_id, cause, DrainOutcome.NOT_OURS, node_group=group, problem=why)

    def _refused(self, request: DrainRequest, group: str, why: str) -> DrainResult:
        return DrainResult(
            request.instance_id,
            request.cause,
            DrainOutcome.UNCONFIRMED,
            node_group=group,
            problem=why,
        )

    def _confirming(
        self,
        request: DrainRequest,
        read: Callable[[str], T],
        deadline: datetime,
        keep_alive: Callable[[], None] = lambda: None,
    ) -> T:
        """What AWS records of the request's instance, read again on an error until the
        deadline; when it never answers, nothing is done and `EventUnconfirmableError`
        keeps the event (in the function's dead-letter queue, whose alarm wakes someone)."""
        try:
            return self._retrying(lambda: read(request.instance_id), deadline, keep_alive)
        except LifecycleActionExpiredError:
            raise  # the hook let the instance go meanwhile: nothing to hold or drain
        except Exception as error:
            raise EventUnconfirmableError(
                f"{request.cause.event} for instance {request.instance_id}: "
                f"AWS could not be read to confirm it ({_describe(error)}); nothing was done"
            ) from error

    def _retrying(
        self, attempt: Callable[[], T], deadline: datetime, keep_alive: Callable[[], None]
    ) -> T:
        """`attempt` again after each transient error (throttled past the SDK's retries,
        unreachable, refused) until the deadline, `keep_alive` after each wait; then its
        last error. Any other error (a bug, an expired lifecycle action) is raised at once:
        trying again would only hold the instance until the deadline for the same end."""
        wait = FIRST_WAIT
        while True:
            try:
                return attempt()
            except Exception as error:
                if not _transient(error) or self._now() + wait >= deadline:
                    raise
            self.sleep(wait.total_seconds())
            keep_alive()
            wait = min(wait * 2, self.heartbeat_interval)

    def _keeping_held(self, action: LifecycleAction) -> Callable[[], None]:
        """A heartbeat while an outage is waited out: without one, Auto Scaling lets the
        instance go undrained at the hook's heartbeat timeout. It names the action's token,
        so a forged action's is refused (expired); one AWS does not answer is tried again
        at the next wait."""

        def keep_held() -> None:
            try:
                self.lifecycle.heartbeat(action)
            except LifecycleActionExpiredError:
                raise
            except Exception:  # AWS unreachable too: the hook's timeout is minutes away
                pass

        return keep_held

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

        # 2. Cordon, so nothing new lands on it, then decide which pods move: never one
        #    scale-in would not have moved (`domain.scale_down.pod_rules`), as kubectl drain.
        # (Started again after an outage, the node is cordoned already: by this drain still.)
        progress.cordoned = self.cluster.cordon(node) or progress.cordoned
        pods = self.cluster.pods_on(node)
        system = self.rules.skip_nodes_with_system_pods and any(
            p.namespace == KUBE_SYSTEM for p in pods
        )
        progress.plan(pods, self.rules, self.cluster.budgets() if system else ())

        # 3. Evict, retrying refusals with backoff, until every evicted pod has gone or the
        #    deadline passes; heartbeats keep the lifecycle action alive meanwhile.
        deadline = progress.started + timeout
        next_beat = progress.started + self.heartbeat_interval
        while True:
            for pod in progress.due(self._now()):
                grace = pod.grace(self.max_grace_seconds)
                progress.record(pod, self.cluster.evict(pod, grace), grace, self._now())
            if progress.watching:
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
            if progress.watching:
                wake.append(now + POLL)
            if heartbeat is not None:
                wake.append(next_beat)
            self.sleep(max((min(wake) - now).total_seconds(), 0.0))


def _transient(error: Exception) -> bool:
    """An error that may pass if tried again: AWS throttled, refused or unreachable, the
    Kubernetes API unavailable (nodescaler's retryable errors), a network error or timeout.
    Not an expired lifecycle action: nothing holds the instance any more."""
    # AWS's errors (ClientError, BotoCoreError) known by their module: a service imports no SDK
    from_aws = any(kind.__module__ == "botocore.exceptions" for kind in type(error).__mro__)
    return from_aws or isinstance(error, RetryableError | OSError)


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"
