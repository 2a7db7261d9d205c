"""One evaluation of one node group: read, plan, then act.

The handler only parses the message and calls `Evaluator.evaluate`, which reads what the
group's plan needs (`domain.planning.Facts`), plans (pure: `domain.planning.plan`), and
hands the `Plan` to the actuator (`service.actuation`); in dry-run the plan is recorded and
nothing acted on. Of two evaluations racing on a group, only the one whose conditional
state write lands first acts (write, then act).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nodescaler.domain.arrivals import sized_buffers
from nodescaler.domain.autoscaler import record_scale
from nodescaler.domain.backoff import BackoffRules
from nodescaler.domain.forecast import lead_time
from nodescaler.domain.group_state import GroupState, failure_key
from nodescaler.domain.limits import ClusterUsage
from nodescaler.domain.node_group import LaunchFailure, NodeGroup
from nodescaler.domain.optin import AllowedGroups, is_managed
from nodescaler.domain.pause import in_force
from nodescaler.domain.planning import Facts, Plan, plan
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.warm_pool import usable_pool
from nodescaler.domain.zonal_shift import ZoneHold, zone_hold
from nodescaler.errors import StateConflictError
from nodescaler.ports import (
    Clock,
    ClusterView,
    MetricHistory,
    NodeGroups,
    ScalingEvents,
    StateStore,
    ZonalShiftSource,
)
from nodescaler.service.actuation import Actuator, EvaluationResult, Outcome, reject
from nodescaler.service.forecasts import named_histories
from nodescaler.service.limiter import ClusterLimiter
from nodescaler.service.policy_resolver import PolicyBook, PolicyChoice
from nodescaler.service.producers import Producers

if TYPE_CHECKING:
    from nodescaler.deadline import Deadline

__all__ = ["EvaluationResult", "Evaluator", "Outcome"]

CLAIM_ATTEMPTS = 5
# An evaluation acts on its claim within the evaluate function's timeout (60 s, infra's
# EVALUATE_TIMEOUT): a younger claim by another message may still be in progress.
CLAIM_IN_PROGRESS = timedelta(seconds=60)
# How long a resize may take to show in DescribeAutoScalingGroups (eventually consistent):
# a read that disagrees with nodescaler's own resize younger than this is stale.
RESIZE_VISIBLE_WITHIN = timedelta(seconds=60)


def _no_deadline() -> Deadline:
    from nodescaler.deadline import Deadline  # the clock is read there, never here

    return Deadline()


@dataclass(frozen=True)
class Evaluator:
    node_groups: NodeGroups
    producers: Producers
    state: StateStore
    policies: PolicyBook
    clock: Clock
    cluster_name: str = ""
    dry_run: bool = False
    backoff_rules: BackoffRules = field(default_factory=BackoffRules)
    cluster: ClusterView | None = None  # the Kubernetes cluster's say, when there is one
    limiter: ClusterLimiter | None = None  # the cluster's limits, when any is set
    histories: MetricHistory | None = None  # the metrics forecasts name, when any does
    events: ScalingEvents | None = None  # each resize and backoff told on EventBridge
    allowed: AllowedGroups = field(default_factory=AllowedGroups)  # cdk.json's allowedGroups
    zonal_shifts: ZonalShiftSource | None = None  # ARC's shifts in force, when read
    # the invocation's time left, which its network reads share (the handler starts it)
    deadline: Deadline = field(default_factory=_no_deadline)

    @property
    def actuator(self) -> Actuator:
        return Actuator(self.node_groups, self.state, self.cluster, self.events, self.cluster_name)

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
        if policy is None:
            return reject(self.state, group.name, choice.problems)

        # 3. State; a message seen before is not handled twice, and a resize whose record
        # was lost (the write after it failed) is recorded first.
        now = self.clock.now()
        state = self.state.load(group.name)
        if state.seen(event_id):
            return EvaluationResult(group.name, Outcome.DUPLICATE, state.last_decision)
        if state.acting is not None:
            acted = state.acting
            state = self._record_lost_resize(group, policy, state, event_id, now)
            if state.seen(event_id):  # this very message made it: its work is done
                return EvaluationResult(group.name, Outcome.ACTED, acted, choice.problems)
        self._check_fresh(group, state, now)

        # 4. Read everything the plan needs: metrics, the cluster's say, launches that failed;
        # the cluster as it was when the request was made, or later (never in the future).
        if self.cluster is not None and requested_at is not None:
            self.cluster.listed_since(min(requested_at, now))
        facts = self._read(group, policy, choice, state, now)

        # 5. Plan (pure), a scale-up under the cluster's limits claimed against them.
        dry_run = choice.dry_run or self.dry_run
        planned = self._within_limits(facts, dry_run)

        # 6. Act on the plan; a dry run only records it.
        if dry_run:
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
        cluster = self.cluster
        # a buffer sized from arrivals holds a boot time of them, as learnt so far
        boot, source = lead_time(state.demand, None, warm=usable_pool(group) is not None)
        policy, sizing_note = sized_buffers(policy, state.arrivals, boot, source)
        failures: list[LaunchFailure] = []
        ready = None
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
            histories=named_histories(policy, self.histories, now),
            # a pause holds the decision before the cluster's limits are claimed
            pauses=in_force(state.pause, choice.paused, self.policies.tag_names.paused, now),
            launch_failures=failures,
            ready=ready,
            must_stay=None if cluster is None else cluster.protected(group, now),
            choose_leaving=None if cluster is None else cluster.leaving(group, now),
            backoff_rules=self.backoff_rules,
            policy_version=choice.version,
            policy_note=choice.note,
            sizing_note=sizing_note,
            problems=choice.problems,
            cluster_name=self.cluster_name,
            zones=self._zones(group, now),
        )

    def cluster_usage(self) -> ClusterUsage | None:
        """The cluster's usage as its limits count it, for the batch's report; None when
        it has no limits. Started only with time enough, as an evaluation is."""
        if self.limiter is None:
            return None
        self.deadline.check_start("the cluster's usage against its limits")
        return self.limiter.usage(self.clock.now())

    def _zones(self, group: NodeGroup, now: datetime) -> ZoneHold | None:
        """What the zonal shifts in force hold of the group (a refused read: its scale-in)."""
        if self.zonal_shifts is None:
            return None
        return zone_hold(group.zones, self.zonal_shifts.in_force(), now)

    def _within_limits(self, facts: Facts, dry_run: bool) -> Plan:
        """The plan, its scale-up capped by the cluster's limits and claimed against them
        before acting, so groups scaling up together can't overshoot. The limits are read
        only for a plan that grows; a claim lost to another group plans again from them."""
        planned = plan(facts)
        if self.limiter is None or not planned.grows:
            return planned
        group, now = facts.group, facts.now
        for _ in range(CLAIM_ATTEMPTS):
            ceiling, claims = self.limiter.ceiling(group, now)
            planned = plan(replace(facts, ceiling=ceiling))
            desired = planned.decision.desired
            if dry_run or not planned.grows or self.limiter.claim(group, desired, claims, now):
                return planned
        raise StateConflictError(
            f"node group {group.name}: {CLAIM_ATTEMPTS} claims under the cluster's limits lost "
            "to other groups scaling up; the evaluation will be retried"
        )

    def _record_lost_resize(
        self,
        group: NodeGroup,
        policy: NodeGroupPolicy,
        state: GroupState,
        event_id: str,
        now: datetime,
    ) -> GroupState:
        """A claimed resize whose record was lost: recorded if the group shows it was made,
        forgotten if not (resizing failed, and its message was retried or dead-lettered).
        Another message's claim younger than an evaluation may be one still in progress:
        acting too would resize twice, so this evaluation conflicts, to be retried."""
        claim = state.acting
        assert claim is not None
        if group.desired == claim.desired:
            from nodescaler.domain.scaling_events import resized  # with the first (cold starts)

            history = record_scale(state.history, policy, claim)
            told = resized(claim, self.cluster_name)
            return self.actuator.record_resize(state, history, told, state.problems)
        if state.acting_event != event_id and now - claim.at < CLAIM_IN_PROGRESS:
            raise StateConflictError(
                f"node group {group.name}: a resize to {claim.desired} claimed by another "
                "evaluation may still be in progress; this one will be retried"
            )
        return replace(state, acting=None, acting_event="")

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
        if not is_managed(group.tags, self.policies.tag_names, self.cluster_name):
            return EvaluationResult(group.name, Outcome.SKIPPED, problems=("not opted in",))
        if not self.allowed.allows(group.name):
            return reject(self.state, group.name, (self.allowed.refusal(group.name),))
        return None
