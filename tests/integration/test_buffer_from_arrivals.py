"""A buffer sized from arrivals through the evaluator and the state table (moto): each
evaluation counts the group's pods, the table keeps the rate learnt, and the next
evaluation's pending-pods read is given a buffer of a boot time of arrivals."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import MetricBase, PendingPodsMetric
from nodescaler.domain.scaling.readings import MetricReading, Reading
from nodescaler.service.evaluation import Evaluator
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers

from tests.aws import client, make_asg, make_state_table
from tests.builders import VirtualClock, policy

TABLE = "state"
WEB = policy(
    {
        "type": "PendingPods",
        "pendingPods": {
            "buffer": [{"fromArrivals": {"minPods": 1, "maxPods": 30}, "requests": {"cpu": "1"}}]
        },
    },
    name="web",
)


@dataclass
class CountedPods:
    """The pending-pods producer's part here: the group's pods as counted, and the buffer
    each read was given."""

    pods: list[int]
    given: list[int] = field(default_factory=list)

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        assert isinstance(metric, PendingPodsMetric)
        self.given.append(metric.pending_pods.buffer[0].least)
        return MetricReading(value=0, at=now, group_pods=self.pods.pop(0))


def test_arrivals_learnt_across_evaluations_size_the_next_buffer_and_quiet_shrinks_it() -> None:
    # Given a new web group, quiet for 80 minutes, whose pods then grow by 4 a minute for
    # five minutes, then stay
    make_asg("web-ng", tags={"nodescaler/enabled": "true", "nodescaler/policy": "web"})
    clock = VirtualClock()
    counted = CountedPods([0] * 80 + [4, 8, 12, 16, 20] + [20] * 91)
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({PendingPodsMetric: counted}),
        state=DynamoStateStore(make_state_table(TABLE), TABLE, audit_ttl=timedelta(days=7)),
        policies=PolicyBook({"web": WEB}),
        clock=clock,
    )
    # When it is evaluated every minute, its state kept in the table between evaluations
    reasons = []
    for minute in range(176):
        reasons.append(evaluator.evaluate("web-ng", f"m-{minute}").decision.reason)  # type: ignore[union-attr]
        clock.advance(minutes=1)
    # Then the first read holds the buffer's most (nothing learnt), forgotten from the
    # first count as a rate is (e^(-t / 15 min)), down to its least by minute 80; the burst
    # raises it to 4 a minute × (the five-minute boot time assumed until launches are
    # measured + the minute between evaluations), and an hour and a half of quiet brings
    # it back down to its least
    assert counted.given[:3] == [30, 28, 26]
    assert counted.given[79:82] == [1, 1, 24]
    assert max(counted.given[80:]) == 24
    assert counted.given[-1] == 1
    assert "30 × 1 cpu" in reasons[0] and "100% of the most room kept while" in reasons[0]
    assert "pods/min × (5.0 min boot (default until 5 cold launches are measured" in reasons[86]
    assert "+ 1.0 min between looks) = " in reasons[86]
    stored = DynamoStateStore(client("dynamodb"), TABLE).load("web-ng").arrivals
    assert (stored.pods, stored.per_minute < 0.1) == (20, True)
