"""One evaluation of one node group: read, plan, then act.

The handler only parses the message and calls `Evaluator.evaluate`, which reads what the
group's plan needs (`domain.scaling.plan.Facts`), plans (pure: `domain.scaling.plan.plan`), and
hands the `Plan` to the actuator (`service.actuation`); in dry-run the plan is recorded and
nothing acted on. Of two evaluations racing on a group, only the one whose conditional
state write lands first acts (write, then act).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nodescaler.domain.ahead.arrivals import sized_by_arrivals
from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup
from nodescaler.domain.groups.optin import AllowedGroups, is_managed
from nodescaler.domain.groups.zonal_shift import ZoneHold, zone_hold
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scale_up.backoff import BackoffRules
from nodescaler.domain.scaling.group_state import GroupState, failure_key
from nodescaler.domain.scaling.limits import ClusterUsage
from nodescaler.domain.scaling.pause import in_force
from nodescaler.domain.scaling.plan import Facts, boot_time, plan, rejection
from nodescaler.errors import StateConflictError
from nodescaler.ports import (
    Clock,
    ClusterView,
    DrainHookKeeper,
    MetricHistory,
    NodeGroups,
    ScalingEvents,
    StateStore,
    ZonalShiftSource,
)
from nodescaler.service.actuation import Actuator, EvaluationResult, Outcome
from nodescaler.service.forecasts import named_histories
from nodescaler.service.limiter import ClusterLimiter
from nodescaler.service.policy_resolver import PolicyBook, PolicyChoice
from nodescaler.service.producers import Producers

if TYPE_CHECKING:
    from nodescaler.deadline import Deadline

__all__ = ["ClusterSay", "EvaluationResult", "Evaluator", "Outcome", "Setup"]

# How long a resize may take to show in DescribeAutoScalingGroups (eventually consistent):
# a read that disagrees with nodescaler's own resize younger than this is stale.
RESIZE_VISIBLE_WITHIN = timedelta(seconds=60)


def _no_deadline() -> Deadline:
    from nodescaler.deadline import Deadline  # the clock is read there, never here

    return Deadline()


@dataclass(frozen=True)
class Setup:
    """What the deployment sets for every evaluation: whose groups it manages (the cluster's
    name, cdk.json's allowedGroups), whether it only records, and how failed launches back
    off."""

    cluster_name: str = ""
    dry_run: bool = False
    backoff_rules: BackoffRules = field(default_factory=BackoffRules)
    allowed: AllowedGroups = field(default_factory=AllowedGroups)


@dataclass(frozen=True)
class ClusterSay:
    """What the cluster has to say of a group, each part only when there is one."""

    view: ClusterView | None = None  # the Kubernetes cluster: its metrics, nodes and marks
    limiter: ClusterLimiter | None = None  # the cluster's limits, when any is set
    zonal_shifts: ZonalShiftSource | None = None  # ARC's shifts in force, when read


@dataclass(frozen=True)
class Evaluator:
    node_groups: NodeGroups
    producers: Producers
    state: StateStore
    policies: PolicyBook
    clock: Clock
    setup: Setup = field(default_factory=Setup)
    cluster: ClusterSay = field(default_factory=ClusterSay)
    histories: MetricHistory | None = None  # the metrics forecasts name, when any does
    events: ScalingEvents | None = None  # each resize and backoff told on EventBridge
    drain_hooks: DrainHookKeeper | None = None  # opted-in groups given the drain hook
    # the invocation's time left, which its network reads share (the handler starts it)
    deadline: Deadline = field(default_factory=_no_deadline)

    @property
    def actuator(self) -> Actuator:
        return Actuator(
            self.node_groups,
            self.state,
            self.cluster.view,
            self.events,
            self.setup.cluster_name,
            self.cluster.limiter,
            self.drain_hooks,
        )

    def evaluate(
        self, group_name: str, event_id: str, requested_at: datetime | None = None
    ) -> EvaluationResult:
        # 1. The group as it is now; it may have gone, or opted out, since it was queued.
        group = self.node_groups.get(group_name)
        if group is None:
            return EvaluationResult(group_name, Outcome.SKIPPED, problems=("no such node group",))
        if (not_ours := self._not_ours(group)) is not None:
            return not_ours

        # 2. Its tags and policy; a bad one is reported and the group left alone.
        choice = self.policies.choose(group)
        policy = choice.policy
        if policy is None:  # a rejection is a plan too: from the state, carried out
            return self.actuator.reject(
                rejection(group.name, self.state.load(group.name), choice.problems)
            )

        # 3. State; a message seen before is not handled twice, and a resize whose record
        # was lost (the write after it failed) is settled first, by the actuator.
        now = self.clock.now()
        state = self.state.load(group.name)
        if state.seen(event_id):
            return EvaluationResult(group.name, Outcome.DUPLICATE, state.last_decision)
        if state.acting is not None:
            acted = state.acting
            state = self.actuator.settle_lost_resize(group, policy, state, event_id, now)
            if state.seen(event_id):  # this very message made it: its work is done
                return EvaluationResult(group.name, Outcome.ACTED, acted, choice.problems)
        self._check_fresh(group, state, now)

        # 4. Read everything the plan needs: metrics, the cluster's say, launches that failed;
        # the cluster as it was when the request was made, or later (never in the future).
        if self.cluster.view is not None and requested_at is not None:
            self.cluster.view.listed_since(min(requested_at, now))
        facts = self._read(group, policy, choice, state, now)

        # 5. Plan (pure).
        planned = plan(facts)

        # 6. Act on the plan: a scale-up claimed against the cluster's limits first (planned
        # again under them); a dry run plans under them and only records it.
        planned = self.actuator.claim_limits(facts, planned, facts.dry_run)
        if facts.dry_run:
            outcome = Outcome.DRY_RUN if planned.resizes else Outcome.UNCHANGED
            return self.actuator.record(planned, planned.state, event_id, outcome)
        return self.actuator.act(planned, event_id)

    def _read(
        self,
        group: NodeGroup,
        policy: NodeGroupPolicy,
        choice: PolicyChoice,
        state: GroupState,
        now: datetime,
    ) -> Facts:
        """What the group's plan is made from; nothing is written here."""
        cluster = self.cluster.view
        # a buffer or a headroom sized from arrivals holds what a boot time (and the time
        # between looks) brings, as learnt; by the boot time the plan's keep uses
        boot = boot_time(group, state)
        policy, sizing_note = sized_by_arrivals(
            policy, state.arrivals, timedelta(seconds=boot.seconds), boot.source, now
        )
        failures: list[LaunchFailure] = []
        ready: Sequence[datetime | None] | None = None
        if state.provisioning is not None:  # a scale-up in flight: did it fail, or arrive?
            failures = [
                f
                for f in self.node_groups.failed_launches(group, state.provisioning.since)
                if not state.seen(failure_key(f.activity_id))
            ]
            # new instances must become Ready nodes where there is a cluster to ask
            ready = None if cluster is None else cluster.ready_nodes(group, now)
        return Facts(
            group,
            policy,
            state,
            now,
            readings=self.producers.read_all(policy, group, now),
            # a policy without PendingPods still grows for its own pending pods (`own_pods`)
            own_pending=cluster.own_pending_pods(group, now)
            if cluster is not None and policy.counts_own_pending_pods
            else None,
            histories=named_histories(policy, self.histories, now),
            # a pause holds the decision before the cluster's limits are claimed
            pauses=in_force(state.pause, choice.paused, self.policies.tag_names.paused, now),
            launch_failures=failures,
            ready=None if ready is None else len(ready),
            ready_since=tuple(ready or ()),
            must_stay=None if cluster is None else cluster.protected(group, now),
            choose_leaving=None if cluster is None else cluster.leaving(group, now),
            backoff_rules=self.setup.backoff_rules,
            policy_version=choice.version,
            policy_note=choice.note,
            sizing_note=sizing_note,
            problems=choice.problems,
            cluster_name=self.setup.cluster_name,
            zones=self._zones(group, now),
            # its plan asks no look it could buy nothing at (`domain.scaling.plan_recheck`)
            dry_run=choice.dry_run or self.setup.dry_run,
        )

    def cluster_usage(self) -> ClusterUsage | None:
        """The cluster's usage as its limits count it, for the batch's report; None when
        it has no limits. Started only with time enough, as an evaluation is."""
        limiter = self.cluster.limiter
        if limiter is None:
            return None
        self.deadline.check_start("the cluster's usage against its limits")
        return limiter.usage(self.clock.now())

    def _zones(self, group: NodeGroup, now: datetime) -> ZoneHold | None:
        """What the zonal shifts in force hold of the group (a refused read: its scale-in)."""
        shifts = self.cluster.zonal_shifts
        if shifts is None:
            return None
        return zone_hold(group.zones, shifts.in_force(), now)

    @staticmethod
    def _check_fresh(group: NodeGroup, state: GroupState, now: datetime) -> None:
        """The group read must show nodescaler's own last resize, if that is recent: a read
        made before another evaluation resized it (or one Auto Scaling answered from before
        the resize) would decide from a size the group no longer has, and act twice."""
        if state.resized is None:
            return
        size, at = state.resized
        if group.desired != size and now - at < RESIZE_VISIBLE_WITHIN:
            raise StateConflictError(
                f"node group {group.name}: read at {group.desired} nodes, but nodescaler resized "
                f"it to {size} at {at.isoformat()}; that read is older than the resize, so the "
                "evaluation will be retried"
            )

    def _not_ours(self, group: NodeGroup) -> EvaluationResult | None:
        """Why the deployment leaves the group alone: not opted in (or for another
        cluster), or left out by allowedGroups (queued before the list changed, or forged)."""
        if not is_managed(group.tags, self.policies.tag_names, self.setup.cluster_name):
            return EvaluationResult(group.name, Outcome.SKIPPED, problems=("not opted in",))
        if not self.setup.allowed.allows(group.name):
            refusal = (self.setup.allowed.refusal(group.name),)
            return self.actuator.reject(rejection(group.name, self.state.load(group.name), refusal))
        return None
