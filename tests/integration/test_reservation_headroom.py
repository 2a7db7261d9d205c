"""A reservation's headroom sized from arrivals through the evaluator and the state table
(moto): the rate its pending-pods metric's counts teach sets the next decision's target."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import CapacityReservationMetric, MetricBase, PendingPodsMetric
from nodescaler.domain.scaling.readings import MetricReading, Reading
from nodescaler.service.evaluation import Evaluator
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers

from tests.aws import client, make_asg, make_state_table
from tests.builders import VirtualClock, policy

TABLE = "state"
SERVICES = policy(
    {
        "type": "CapacityReservation",
        "capacityReservation": {"resource": "cpu", "headroom": "fromArrivals"},
        "target": {"type": "Utilization", "averageUtilization": 60},
    },
    {"type": "PendingPods"},
    min_replicas=1,
    max_replicas=10,
    name="services",
)


@dataclass
class Cluster:
    """The cluster's part: the group's pods as counted, at 50 % of its CPU."""

    pods: list[int]

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        if isinstance(metric, CapacityReservationMetric):
            return MetricReading(value=50, at=now)
        return MetricReading(value=0, at=now, group_pods=self.pods.pop(0))


def test_a_burst_keeps_the_targets_room_and_an_hour_of_quiet_packs_towards_100() -> None:
    # Given a group whose 66 pods came in one minute, then no more
    make_asg("svc-ng", tags={"nodescaler/enabled": "true", "nodescaler/policy": "services"})
    clock = VirtualClock()
    cluster = Cluster([0, 66] + [66] * 90)
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({PendingPodsMetric: cluster, CapacityReservationMetric: cluster}),
        state=DynamoStateStore(make_state_table(TABLE), TABLE, audit_ttl=timedelta(days=7)),
        policies=PolicyBook({"services": SERVICES}),
        clock=clock,
    )
    # When it is evaluated every minute, its state kept in the table
    decisions = []
    for minute in range(92):
        decisions.append(evaluator.evaluate("svc-ng", f"m-{minute}").decision)
        clock.advance(minutes=1)
    targets = [d.metrics[0].target for d in decisions]  # type: ignore[union-attr]
    # Then the written 60 % holds until a count is learnt and through the burst, and the
    # quiet lets the target rise to about 100 % (66 pods a minute forgotten in 15 minutes)
    assert targets[:3] == ["60%", "60%", "60%"]
    assert float(targets[-1].rstrip("%")) > 98
    assert "headroom from arrivals: " in decisions[-1].reason  # type: ignore[union-attr]
    assert "reservation-cpu 60% (60% written)" in decisions[2].reason  # type: ignore[union-attr]
