"""One evaluation of one node group: read, decide, claim, act, record.

The numbered steps are the evaluator Lambda's whole job; the handler only parses the
message and calls `Evaluator.evaluate`. Of two evaluations racing on a group, only the one
whose conditional state write lands first acts (write, then act).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from nodescaler.domain.autoscaler import Evaluation, GroupSize, decide, record_scale
from nodescaler.domain.backoff import BackoffRules, Provisioning, after_failure, provision_check
from nodescaler.domain.decision import Decision, fit_to_store
from nodescaler.domain.forecast import forecast_readings
from nodescaler.domain.group_state import GroupState, failure_key
from nodescaler.domain.node_group import LaunchFailure, NodeGroup
from nodescaler.domain.optin import AllowedGroups, is_managed
from nodescaler.domain.pause import Pause, hold, in_force
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.readings import Reading
from nodescaler.domain.text import bounded_problems
from nodescaler.domain.warm_pool import WarmPoolPlan, plan_warm_pool
from nodescaler.errors import ActuationError, RefusedError, StateConflictError
from nodescaler.ports import (
    Clock,
    ClusterView,
    MetricHistory,
    NodeGroups,
    ScalingEvents,
    StateStore,
)
from nodescaler.service.forecasts import named_histories
from nodescaler.service.limiter import ClusterLimiter
from nodescaler.service.policy_resolver import PolicyBook, PolicyChoice
from nodescaler.service.producers import Producers

if TYPE_CHECKING:
    from nodescaler.deadline import Deadline

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


def _paused(pauses: Sequence[Pause], **decide_args: Any) -> Evaluation:
    """`decide`, then held where a pause in force holds it."""
    evaluation = decide(**decide_args)
    return replace(evaluation, decision=hold(evaluation.decision, pauses))


def _as_chosen(decision: Decision, choice: PolicyChoice) -> Decision:
    """The decision naming the policy version it used, and why the deployed one stood in,
    cut to a size its state item always holds."""
    reason = f"{decision.reason} | {choice.note}" if choice.note else decision.reason
    named = decision.model_copy(update={"policy_version": choice.version, "reason": reason})
    return fit_to_store(named)


class Outcome(StrEnum):
    ACTED = "acted"
    UNCHANGED = "unchanged"
    DRY_RUN = "dry-run"
    DUPLICATE = "duplicate"  # a redelivered message: already handled
    SKIPPED = "skipped"  # the group is gone or no longer opted in
    REJECTED = "rejected"  # opted in, but its tags or policy are unusable: reported, untouched


@dataclass(frozen=True)
class EvaluationResult:
    group: str
    outcome: Outcome
    decision: Decision | None = None
    problems: tuple[str, ...] = field(default=())


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
    # the invocation's time left, which its network reads share (the handler starts it)
    deadline: Deadline = field(default_factory=_no_deadline)

    def evaluate(self, group_name: str, event_id: str) -> EvaluationResult:
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
            return self._reject(group.name, choice.problems)

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

        # 4. A scale-up that failed, or overran its time, backs the group off.
        loaded = state
        state = self._check_scale_up(group, state, now)

        # 5. Scale-in protection follows the cluster's annotations.
        dry_run = choice.dry_run or self.dry_run
        ours, protected = self._protect(group, state, now, dry_run)
        state = replace(state, protected=ours)

        # 6. Metrics (and forecasts from the group's recorded demand), then the decision.
        readings = self._read(policy, group, state, now)
        size = GroupSize(
            group.desired,
            group.min_size,
            group.max_size,
            ready=group.in_service,
            launched=group.launched,
            protected=len(protected),
        )
        # A pause holds the decision where it would move the group (checked before the
        # cluster's limits are claimed, so a held scale-up claims nothing).
        pauses = in_force(state.pause, choice.paused, self.policies.tag_names.paused, now)
        decide_with = partial(
            _paused,
            pauses,
            node_group=group.name,
            policy=policy,
            size=size,
            readings=readings,
            history=state.history,
            now=now,
            backoff=state.backoff,
            failures=state.failures,
        )
        evaluation = self._within_limits(decide_with, group, now, dry_run)
        decision, removing = self._which_go(group, evaluation.decision, now)
        if self.cluster is not None and not dry_run:  # steer new pods off leaving nodes
            # none leaves while scale-in is paused: no node is marked to
            self.cluster.mark_candidates(
                group, now, shedding=not any(p.direction.holds(-1) for p in pauses)
            )
        state = replace(
            state,
            failures=evaluation.failures,
            # no demand while a metric fails: not known, not recorded
            demand=state.demand
            if decision.demand is None
            else state.demand.record(now, decision.demand),
        )
        decision = self._plan_warm_pool(policy, group, decision, readings)
        decision = _as_chosen(decision, choice)
        problems = choice.problems

        # 7. Record only, when nothing changes or the group is in dry-run.
        if decision.desired == decision.current or dry_run:
            self.state.save(
                state.after(
                    history=evaluation.history,
                    decision=decision,
                    event_id=event_id,
                    problems=problems,
                ),
                audit=decision,
                event_id=event_id,
                backoff_changed=state.backoff != loaded.backoff,
            )
            self._announce_backoff(group.name, loaded, state)
            outcome = Outcome.UNCHANGED if decision.desired == decision.current else Outcome.DRY_RUN
            return self._keep_warm_pool(
                group, EvaluationResult(group.name, outcome, decision, problems), dry_run
            )

        # 8. Claim (a racing evaluation now fails its write), act, then record the scale event.
        if decision.desired > decision.current:  # watched until in service, or overdue
            state = replace(state, provisioning=Provisioning(since=now, target=decision.desired))
        claimed = self.state.save(
            replace(
                state.after(history=evaluation.history, decision=decision, problems=problems),
                acting=decision,
                acting_event=event_id,
            ),
            backoff_changed=state.backoff != loaded.backoff,
        )
        self._announce_backoff(group.name, loaded, state)
        try:
            if removing:
                self.node_groups.remove_instances(group, removing)
            else:
                self.node_groups.set_desired(group, decision.desired)
        except RefusedError as error:  # not ours to resize: reported, never retried
            self.state.save(replace(claimed, acting=None, acting_event=""))
            return self._reject(group.name, (*problems, str(error)))
        except Exception as error:
            raise ActuationError(
                f"node group {group.name}: resizing {decision.current} → {decision.desired} "
                f"failed: {error}"
            ) from error
        self._record_resize(claimed, policy, problems)
        return self._keep_warm_pool(
            group, EvaluationResult(group.name, Outcome.ACTED, decision, problems), dry_run
        )

    def _read(
        self, policy: NodeGroupPolicy, group: NodeGroup, state: GroupState, now: datetime
    ) -> dict[str, Reading]:
        """The policy's metrics, and its forecasts from the group's recorded demand."""
        readings = dict(self.producers.read_all(policy, group, now))
        named = named_histories(policy, self.histories, now)
        return readings | dict(forecast_readings(policy, state.demand, now, named))

    @staticmethod
    def _plan_warm_pool(
        policy: NodeGroupPolicy,
        group: NodeGroup,
        decision: Decision,
        readings: Mapping[str, Reading],
    ) -> Decision:
        """The warm pool a `warmPool` forecast asks for, in the decision."""
        warm = plan_warm_pool(policy, decision, readings, group.warm_pool)
        if not warm.note:
            return decision
        return decision.model_copy(
            update={
                "warm_pool": warm.size,
                "warm_pool_note": warm.note,
                "reason": f"{decision.reason} | {warm.note}",
            }
        )

    def _keep_warm_pool(
        self, group: NodeGroup, result: EvaluationResult, dry_run: bool
    ) -> EvaluationResult:
        """The decided warm pool written, when it differs, after the resize: a pool shrunk
        first would give up the warm instances the scale-up is about to take. A refusal
        or an AWS error is the group's problem to report (kept in its state), never the
        evaluation's failure: the pool is asked again next time."""
        decision = result.decision
        if dry_run or decision is None or decision.warm_pool is None:
            return result
        if not WarmPoolPlan(decision.warm_pool, decision.warm_pool_note).changes(group.warm_pool):
            return result
        try:
            self.node_groups.size_warm_pool(group, decision.warm_pool)
        except Exception as error:
            problem = f"warm pool: sizing it to {decision.warm_pool} failed: {error}"
            state = self.state.load(group.name)
            problems = (*result.problems, problem)
            self.state.save(state.after(history=state.history, problems=problems))
            return replace(result, problems=problems)
        return result

    def _which_go(
        self, group: NodeGroup, decision: Decision, now: datetime
    ) -> tuple[Decision, tuple[str, ...]]:
        """An EKS managed node group takes no custom termination policy: on its scale-in
        nodescaler chooses the instances (never Ready, empty, then one whose pods can
        move) and terminates them itself, as Cluster Autoscaler does; the decision then
        asks for no more than can go. Other groups: their termination policy chooses."""
        if not group.is_eks_managed or decision.desired >= decision.current or self.cluster is None:
            return decision, ()
        found = self.cluster.removable(group, decision.current - decision.desired, now)
        if found is None:  # the cluster can't say now: nothing leaves on a guess
            held = f"{decision.reason} | the cluster cannot be read: no instance chosen"
            return decision.model_copy(update={"desired": decision.current, "reason": held}), ()
        desired = decision.current - len(found.instance_ids)
        reason = f"{decision.reason} | {found.reason}"
        return decision.model_copy(
            update={"desired": desired, "reason": reason}
        ), found.instance_ids

    def _record_resize(
        self, claimed: GroupState, policy: NodeGroupPolicy, problems: tuple[str, ...]
    ) -> GroupState:
        """The resize made: its scale event in the history, its decision in the audit trail."""
        decision, event_id = claimed.acting, claimed.acting_event
        assert decision is not None
        done = replace(
            claimed, acting=None, acting_event="", resized=(decision.desired, decision.at)
        )
        recorded = self.state.save(
            done.after(
                history=record_scale(claimed.history, policy, decision),
                event_id=event_id,
                problems=problems,
            ),
            audit=decision,
            event_id=event_id,
        )
        if self.events is not None:  # told once recorded: a retry finds it done, not told twice
            from nodescaler.domain.scaling_events import resized  # with the first (cold starts)

            self.events.publish(resized(decision, self.cluster_name))
        return recorded

    def _announce_backoff(self, group: str, loaded: GroupState, saved: GroupState) -> None:
        """A backoff this evaluation started, told once its state is written."""
        if self.events is None:
            return
        from nodescaler.domain.scaling_events import backed_off, new_backoff

        if started := new_backoff(loaded.backoff, saved.backoff):
            self.events.publish(backed_off(group, started, self.cluster_name, "evaluation"))

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
            return self._record_resize(state, policy, state.problems)
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

    def _within_limits(
        self,
        decide_with: Callable[..., Evaluation],
        group: NodeGroup,
        now: datetime,
        dry_run: bool,
    ) -> Evaluation:
        """The decision, its scale-up capped by the cluster's limits and claimed against
        them before acting, so groups scaling up together can't overshoot."""
        evaluation: Evaluation = decide_with(ceiling=None)
        if self.limiter is None or evaluation.decision.desired <= evaluation.decision.current:
            return evaluation
        for _ in range(CLAIM_ATTEMPTS):
            ceiling, claims = self.limiter.ceiling(group, now)
            evaluation = decide_with(ceiling=ceiling)
            decision = evaluation.decision
            if (
                dry_run
                or decision.desired <= decision.current
                or self.limiter.claim(group, decision.desired, claims, now)
            ):
                return evaluation
        raise StateConflictError(
            f"node group {group.name}: {CLAIM_ATTEMPTS} claims under the cluster's limits lost "
            "to other groups scaling up; the evaluation will be retried"
        )

    def _check_scale_up(self, group: NodeGroup, state: GroupState, now: datetime) -> GroupState:
        """Back the group off on a failed launch (the fallback for a missed launch-failure
        event) or on instances not in service in time; the scale-up then ends."""
        # New instances must become Ready nodes where there is a cluster to ask; else in service.
        ready = None
        if self.cluster is not None and state.provisioning is not None:
            ready = self.cluster.ready_nodes(group, now)
        provisioning, overdue = provision_check(
            state.provisioning,
            desired=group.desired,
            in_service=group.in_service if ready is None else ready,
            now=now,
            rules=self.backoff_rules,
        )
        failures: Sequence[LaunchFailure] = ()
        if state.provisioning is not None:
            failures = [
                f
                for f in self.node_groups.failed_launches(group, state.provisioning.since)
                if not state.seen(failure_key(f.activity_id))
            ]
        reasons = [f.reason for f in failures] + ([overdue] if overdue else [])
        if not reasons:
            arrived = state.provisioning is not None and provisioning is None
            if arrived and group.desired >= state.provisioning.target:  # type: ignore[union-attr]
                # the time from a scale request to Ready nodes: the forecasts' lead time
                lead = now - state.provisioning.since  # type: ignore[union-attr]
                state = replace(state, demand=state.demand.measured_lead(lead))
            return replace(state, provisioning=provisioning)
        backoff = after_failure(state.backoff, now, reasons[0], self.backoff_rules)
        return replace(state, backoff=backoff, provisioning=None).remembering(
            *(failure_key(f.activity_id) for f in failures)
        )

    def _protect(
        self, group: NodeGroup, state: GroupState, now: datetime, dry_run: bool
    ) -> tuple[frozenset[str], frozenset[str]]:
        """Protect the instances whose nodes the cluster says must stay, and release those
        we protected that no longer need it. Protection set by anyone else is left alone,
        and an unreadable cluster changes nothing. Returns the instances we protect, and
        all the group's protected ones (in dry-run: as they would be)."""
        ours = state.protected & group.protected_ids
        wanted = None if self.cluster is None else self.cluster.protected(group, now)
        if wanted is None:
            return ours, group.protected_ids
        wanted &= group.instance_ids
        add, release = wanted - group.protected_ids, ours - wanted
        if not dry_run:
            if add:
                self.node_groups.protect(group, add, protected=True)
            if release:
                self.node_groups.protect(group, release, protected=False)
            ours = wanted - (group.protected_ids - ours)  # not claiming others' protection
        return ours, (group.protected_ids | add) - release

    def _not_ours(self, group: NodeGroup) -> EvaluationResult | None:
        """Why the deployment leaves the group alone: not opted in (or for another
        cluster), or left out by allowedGroups (queued before the list changed, or forged)."""
        if not is_managed(group.tags, self.policies.tag_names, self.cluster_name):
            return EvaluationResult(group.name, Outcome.SKIPPED, problems=("not opted in",))
        if not self.allowed.allows(group.name):
            return self._reject(group.name, (self.allowed.refusal(group.name),))
        return None

    def _reject(self, group: str, problems: tuple[str, ...]) -> EvaluationResult:
        """Leave the group alone, but keep its problems in its state for `nodescaler status`."""
        state = self.state.load(group)
        if state.problems != bounded_problems(problems):  # written once, not on every tick
            self.state.save(state.after(history=state.history, problems=problems))
        return EvaluationResult(group, Outcome.REJECTED, problems=problems)
