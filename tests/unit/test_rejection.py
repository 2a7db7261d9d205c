"""A rejection is a plan (`domain.scaling.plan.rejection`): from the group's state as
loaded, what to write (its problems, once) and nothing done; the actuator writes it."""

from __future__ import annotations

from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.plan import rejection


def test_given_new_problems_when_rejected_then_the_plan_writes_them_and_keeps_the_rest() -> None:
    # Given a group whose state says nothing is wrong
    state = GroupState("web", version=3, recent_events=("e-1",))
    # When its policy is rejected
    rejected = rejection("web", state, ("policy web: spec.maxReplicas missing",))
    # Then the plan writes the problem, and only the problem changes
    assert rejected.group == "web"
    assert rejected.problems == ("policy web: spec.maxReplicas missing",)
    assert rejected.state is not None
    assert rejected.state.problems == ("policy web: spec.maxReplicas missing",)
    assert rejected.state.recent_events == ("e-1",)
    assert rejected.state.history == state.history


def test_given_the_same_problems_when_rejected_again_then_nothing_is_written() -> None:
    # Given a group whose state already holds the problem (each tick rejects it again)
    state = GroupState("web", problems=("not allowed",))
    # When it is rejected for the same reason, then the plan writes nothing
    assert rejection("web", state, ("not allowed",)).state is None
    # and for another reason, it writes that one
    assert rejection("web", state, ("other",)).state == state.after(
        history=state.history, problems=("other",)
    )
