"""IAM for the reserved-first expander: read-only, and only when the chain uses it."""

from __future__ import annotations

from typing import Any

from tests.infra.stack_template import actions_of, role_statements, statement_for
from tests.infra.test_stack import synth


def evaluate_actions(**settings: Any) -> set[str]:
    return {a for s in role_statements(synth(**settings), "evaluate") for a in actions_of(s)}


def test_given_reserved_first_then_evaluate_may_read_reservations_and_nothing_more() -> None:
    chain = [{"name": "reserved-first"}, {"name": "least-waste"}]
    template = synth(expanders=chain)
    reads = statement_for(role_statements(template, "evaluate"), "ec2:DescribeCapacityReservations")
    assert reads["Resource"] == "*"  # DescribeCapacityReservations has no resource scope
    assert "ec2:DescribeLaunchTemplateVersions" in actions_of(reads)
    # the one action it adds to a chain without it
    assert evaluate_actions(expanders=chain) - evaluate_actions() == {
        "ec2:DescribeCapacityReservations"
    }
