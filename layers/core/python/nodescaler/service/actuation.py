"""Carrying out one group's `Plan` (`domain.planning`): protect, mark, claim, resize,
record and announce, in that order, and nothing it does not say.

Write, then act: the state item claims the resize (a racing evaluation's conditional write
then fails) before the group is resized, and the resize is recorded after. A dry run
records the plan and acts on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from nodescaler.domain.decision import Decision
from nodescaler.domain.group_state import GroupState
from nodescaler.domain.history import History
from nodescaler.domain.planning import Plan
from nodescaler.domain.text import bounded_problems
from nodescaler.errors import ActuationError, RefusedError
from nodescaler.ports import ClusterView, NodeGroups, ScalingEvents, StateStore

if TYPE_CHECKING:  # its models load with the first event told, not at a cold start
    from nodescaler.domain.scaling_events import ScalingEvent


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


def reject(state: StateStore, group: str, problems: tuple[str, ...]) -> EvaluationResult:
    """Leave the group alone, but keep its problems in its state for `nodescaler status`."""
    loaded = state.load(group)
    if loaded.problems != bounded_problems(problems):  # written once, not on every tick
        state.save(loaded.after(history=loaded.history, problems=problems))
    return EvaluationResult(group, Outcome.REJECTED, problems=problems)


@dataclass(frozen=True)
class Actuator:
    node_groups: NodeGroups
    state: StateStore
    cluster: ClusterView | None = None  # marks deletion candidates, when there is a cluster
    events: ScalingEvents | None = None
    cluster_name: str = ""

    def act(self, plan: Plan, event_id: str) -> EvaluationResult:
        """Carry out the plan: protection and marks first, then the resize, claimed before
        and recorded after; a plan that resizes nothing is recorded only."""
        group, decision = plan.group, plan.decision
        state = self._protect(plan)
        if self.cluster is not None:  # steer new pods off the nodes that may leave
            self.cluster.mark_candidates(group, plan.candidates, plan.decision.at)
        if not plan.resizes:
            return self._keep_warm_pool(plan, self.record(plan, state, event_id, Outcome.UNCHANGED))
        if plan.grows:  # watched until in service, or overdue
            state = replace(state, provisioning=plan.provisioning)
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
            return reject(self.state, group.name, (*plan.problems, str(error)))
        except Exception as error:
            raise ActuationError(
                f"node group {group.name}: resizing {decision.current} → {decision.desired} "
                f"failed: {error}"
            ) from error
        self.record_resize(claimed, plan.resized_history, plan.announce_resized, plan.problems)
        result = EvaluationResult(group.name, Outcome.ACTED, decision, plan.problems)
        return self._keep_warm_pool(plan, result)

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
