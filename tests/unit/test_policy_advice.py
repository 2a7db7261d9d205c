"""A valid policy that does what no one would write on purpose is warned about
(`domain.policy.advice`): a CapacityReservation whose AverageValue target divides the
group's share as a count a node."""

from __future__ import annotations

import pytest
from nodescaler.domain.policy.advice import advice

from tests.builders import policy

PENDING = {"type": "PendingPods"}


def reservation(target: dict[str, object], name: str | None = None) -> dict[str, object]:
    metric: dict[str, object] = {
        "type": "CapacityReservation",
        "capacityReservation": {"resource": "memory"},
        "target": target,
    }
    return metric | ({"name": name} if name else {})


@pytest.mark.parametrize(
    ("average", "nodes", "written"),
    [(70, "1 node", "70"), (35, "2 nodes", "35"), (150, "1 node", "100")],
)
def test_an_average_value_reservation_is_named_with_what_it_asks(
    average: float, nodes: str, written: str
) -> None:
    metric = reservation({"type": "AverageValue", "averageValue": average}, "mem")
    (said,) = advice(policy(metric, PENDING))
    assert said == (
        "metric 'mem': a CapacityReservation reads the share of the group's allocatable "
        f"requested, in %; an AverageValue target of {average:g} divides it as a count a "
        f"node (60 % requested asks for {nodes}, whatever the group's size): for "
        f"{average:g} % requested, write target: {{type: Utilization, "
        f"averageUtilization: {written}}}"
    )


def test_a_utilization_or_value_reservation_and_other_metrics_are_not_warned_about() -> None:
    utilization = reservation({"type": "Utilization", "averageUtilization": 70})
    value = reservation({"type": "Value", "value": 70})
    queue = {
        "type": "SQSQueue",
        "sqsQueue": {"queue": "q"},
        "target": {"type": "AverageValue", "averageValue": 4},
    }
    assert advice(policy(utilization, PENDING)) == []
    assert advice(policy(value, PENDING)) == []
    assert advice(policy(queue, PENDING)) == []


def test_each_such_metric_is_warned_about() -> None:
    memory = reservation({"type": "AverageValue", "averageValue": 70}, "mem")
    cpu = reservation({"type": "AverageValue", "averageValue": 60}, "cpu")
    cpu["capacityReservation"] = {"resource": "cpu"}
    said = advice(policy(memory, cpu, PENDING))
    assert [s.split(":")[0] for s in said] == ["metric 'mem'", "metric 'cpu'"]
