"""IAM for impaired zones: evaluate may read the zonal shifts and autoshifts in force and
the zones' IDs, read-only, and is told to read them."""

from __future__ import annotations

from tests.infra.stack_template import actions_of, environment, role_statements, statement_for
from tests.infra.test_stack import synth


def test_evaluate_may_read_zonal_shifts_and_autoshifts_and_change_none() -> None:
    template = synth()
    reads = statement_for(role_statements(template, "evaluate"), "arc-zonal-shift:ListZonalShifts")
    assert reads["Effect"] == "Allow" and reads["Resource"] == "*"  # no resource scope
    assert "Condition" not in reads
    assert set(actions_of(reads)) >= {
        "arc-zonal-shift:ListZonalShifts",
        "arc-zonal-shift:ListAutoshifts",
        "ec2:DescribeAvailabilityZones",
    }
    every = {a for s in role_statements(template, "evaluate") for a in actions_of(s)}
    # nothing that starts, updates or cancels a shift
    assert not {a for a in every if a.startswith("arc-zonal-shift:") and ":List" not in a}
    assert environment(template, "evaluate")["ZONAL_SHIFTS"] == "true"
