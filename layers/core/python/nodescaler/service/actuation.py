"""Carrying out one group's `Plan` (`domain.scaling.plan`): protect, mark, claim, resize,
record and announce, in that order, and nothing it does not say. Its other named steps:
settling a resize whose record was lost (before the group is planned), claiming a scale-up
against the cluster's limits, and carrying out a `Rejection`.

Write, then act: the state item claims the resize (a racing evaluation's conditional write
then fails) before the group is resized, and the resize is recorded after. A dry run
records the plan and acts on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.outside_text import outside
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.acted import record_scale
from nodescaler.domain.scaling.decision import Decision, Limit
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.plan import Facts, Plan, Rejection, plan, rejection
from nodescaler.errors import ActuationError, RefusedError, StateConflictError
from nodescaler.ports import ClusterView, DrainHookKeeper, NodeGroups, ScalingEvents, StateStore
from nodescaler.service.limiter import ClusterLimiter

if TYPE_CHECKING:  # its models load with the first event told, not at a cold start
    from nodescaler.domain.groups.scaling_events import ScalingEvent


CLAIM_ATTEMPTS = 5
# An evaluation acts on its claim within the evaluate function's timeout (60 s, infra's
# EVALUATE_TIMEOUT): a younger claim by another message may still be in progress.
CLAIM_IN_PROGRESS = timedelta(seconds=60)


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
class Actuator:
    node_groups: NodeGroups
    state: StateStore
    cluster: ClusterView | None = None  # marks deletion candidates, when there is a cluster
    events: ScalingEvents | None = None
    cluster_name: str = ""
    limiter: ClusterLimiter | None = None  # the cluster's limits, when any is set
    drain_hooks: DrainHookKeeper | None = None  # where the deployment drains opted-in groups

    def act(self, plan: Plan, event_id: str) -> EvaluationResult:
        """Carry out the plan: protection and marks first, then the resize, claimed before
        and recorded after; a plan that resizes nothing is recorded only."""
        group, decision = plan.group, plan.decision
        state = self._protect(plan)
        if self.cluster is not None:  # steer new pods off the nodes that may leave
            # as protected once applied: a node protected now is not one that leaves next
            protected = replace(group, protected_ids=plan.protection.protected)
            self.cluster.mark_candidates(
                protected, plan.candidates, decision.at, _awaiting(plan), plan.rooms
            )
        if not plan.resizes:
            self._shed(plan, 0)
            return self._keep_warm_pool(plan, self.record(plan, state, event_id, Outcome.UNCHANGED))
        if plan.grows:  # watched until in service, or overdue
            state = replace(state, provisioning=plan.provisioning)
        elif Limit.BACKOFF not in decision.limited_by:  # a scale-in, not a launch given up
            plan = self._with_drain_hook(plan)  # before it: its termination policy reads it
            decision = plan.decision
        claimed = self.state.save(
            replace(
                state.after(history=plan.history, decision=decision, problems=plan.problems),
                acting=decision,
                acting_event=event_id,
            ),
            backoff_changed=plan.backoff_changed,
        )
        self._announce(plan.announce)
        try:
            if plan.leaving:
                self.node_groups.remove_instances(group, plan.leaving)
            else:
                self.node_groups.set_desired(group, decision.desired)
        except RefusedError as error:  # not ours to resize: reported, never retried
            self.state.save(replace(claimed, acting=None, acting_event=""))
            problems = (*plan.problems, str(error))
            return self.reject(rejection(group.name, self.state.load(group.name), problems))
        except Exception as error:
            raise ActuationError(
                f"node group {group.name}: resizing {decision.current} → {decision.desired} "
                f"failed: {error}"
            ) from error
        self.record_resize(claimed, plan.resized_history, plan.announce_resized, plan.problems)
        aborted = Limit.BACKOFF in decision.limited_by  # a scale-up given up: no node goes
        self._shed(plan, 0 if aborted else decision.current - decision.desired)
        result = EvaluationResult(group.name, Outcome.ACTED, decision, plan.problems)
        return self._keep_warm_pool(plan, result)

    def _with_drain_hook(self, plan: Plan) -> Plan:
        """The plan, its group given the deployment's drain hook first where the deployment
        drains opted-in groups: its termination policy may then take a node with pods,
        drained before its instance goes, where without the hook it waits for the node to
        empty (an EKS managed group's nodes EKS drains). A hook that could not be put is
        the group's problem, never the evaluation's failure: the scale-in then takes
        empty nodes only, and the next one tries again."""
        if self.drain_hooks is None or plan.group.is_eks_managed:
            return plan
        try:
            put = self.drain_hooks.keep(plan.group)
        except Exception as error:
            problem = (
                "drain hook: it could not be read or put on the group, so its scale-in may "
                f"take only empty nodes: {outside(error)}"
            )
            return replace(plan, problems=(*plan.problems, problem))
        if not put:
            return plan
        reason = (
            f"{plan.decision.reason} | the deployment's drain hook put on the group: a node "
            "with pods may now go, its pods evicted first"
        )
        return replace(plan, decision=plan.decision.model_copy(update={"reason": reason}))

    def _shed(self, plan: Plan, count: int) -> None:
        """Tell the cluster's view how many of its unneeded nodes the group sheds now (none
        when it holds or grows): room the next groups' scale-ins cannot count on."""
        if self.cluster is not None:
            self.cluster.shed(plan.group.name, max(count, 0))

    def reject(self, rejected: Rejection) -> EvaluationResult:
        """Leave the group alone; its problems written to its state when they changed."""
        if rejected.state is not None:
            self.state.save(rejected.state)
        return EvaluationResult(rejected.group, Outcome.REJECTED, problems=rejected.problems)

    def claim_limits(self, facts: Facts, planned: Plan, dry_run: bool) -> Plan:
        """The plan, its scale-up capped by the cluster's limits and claimed against them
        before acting, so groups scaling up together can't overshoot. The limits are read
        only for a plan that grows; a claim lost to another group plans again from them
        (a dry run plans under them, and claims nothing)."""
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

    def settle_lost_resize(
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
            from nodescaler.domain.groups.scaling_events import (
                resized,  # with the first (cold starts)
            )

            history = record_scale(state.history, policy, claim)
            told = resized(claim, self.cluster_name)
            return self.record_resize(state, history, told, state.problems)
        if state.acting_event != event_id and now - claim.at < CLAIM_IN_PROGRESS:
            raise StateConflictError(
                f"node group {group.name}: a resize to {claim.desired} claimed by another "
                "evaluation may still be in progress; this one will be retried"
            )
        return replace(state, acting=None, acting_event="")

    def record(
        self, plan: Plan, state: GroupState, event_id: str, outcome: Outcome
    ) -> EvaluationResult:
        """The plan in the group's state and audit trail, nothing resized (unchanged, or a
        dry run's), and a backoff it started told."""
        self.state.save(
            state.after(
                history=plan.history,
                decision=plan.decision,
                event_id=event_id,
                problems=plan.problems,
            ),
            audit=plan.decision,
            event_id=event_id,
            backoff_changed=plan.backoff_changed,
        )
        self._announce(plan.announce)
        return EvaluationResult(plan.group.name, outcome, plan.decision, plan.problems)

    def record_resize(
        self,
        claimed: GroupState,
        history: History,
        told: ScalingEvent | None,
        problems: tuple[str, ...],
    ) -> GroupState:
        """The resize made: its scale event in the history, its decision in the audit trail,
        then told (once recorded: a retry finds it done, and does not tell it twice)."""
        decision, event_id = claimed.acting, claimed.acting_event
        assert decision is not None
        done = replace(
            claimed, acting=None, acting_event="", resized=(decision.desired, decision.at)
        )
        recorded = self.state.save(
            done.after(history=history, event_id=event_id, problems=problems),
            audit=decision,
            event_id=event_id,
        )
        self._announce(() if told is None else (told,))
        return recorded

    def _protect(self, plan: Plan) -> GroupState:
        """The plan's scale-in protection set and released; the state then claims ours."""
        protection = plan.protection
        if protection.add:
            self.node_groups.protect(plan.group, protection.add, protected=True)
        if protection.release:
            self.node_groups.protect(plan.group, protection.release, protected=False)
        return replace(plan.state, protected=protection.ours_after)

    def _announce(self, events: tuple[ScalingEvent, ...]) -> None:
        if self.events is not None:
            for event in events:
                self.events.publish(event)

    def _keep_warm_pool(self, plan: Plan, result: EvaluationResult) -> EvaluationResult:
        """The decided warm pool written, when it differs, after the resize: a pool shrunk
        first would give up the warm instances the scale-up is about to take. A refusal
        or an AWS error is the group's problem to report (kept in its state), never the
        evaluation's failure: the pool is asked again next time."""
        if plan.warm_pool is None:
            return result
        try:
            self.node_groups.size_warm_pool(plan.group, plan.warm_pool)
        except Exception as error:
            problem = f"warm pool: sizing it to {plan.warm_pool} failed: {error}"
            state = self.state.load(plan.group.name)
            problems = (*result.problems, problem)
            self.state.save(state.after(history=state.history, problems=problems))
            return replace(result, problems=problems)
        return result


def _awaiting(plan: Plan) -> int:
    """How many of the group's instances in service its termination policy takes next: the
    excess over the desired capacity this plan leaves, while nodescaler's latest change was
    a scale-in (an excess of another cause, an instance refresh or a rebalance, is Auto
    Scaling's to choose), however long its termination policy waits (a Job's node goes
    when its Job ends); none when the plan names the instances that go itself."""
    if plan.leaving or not plan.resized_history.shrinking:
        return 0
    return max(plan.group.in_service - plan.decision.desired, 0)
