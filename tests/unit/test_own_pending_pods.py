"""A group's own pending pods, a floor under a policy without a PendingPods metric
(`domain.scaling.own_pods`): the queue's workers that wait for room grow the group; the
vote never sheds a node and never holds the policy's own scale-in."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.decision import Limit, MetricStatus
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from pydantic import ValidationError

from tests.builders import T0, UNLIMITED, minutes, policy, queue_metric, readings

# The first queue policy: 10 tasks a node, on nodes that fit 3 workers.
FIRST_QUEUE = policy(queue_metric("jobs", per_node=10), max_replicas=100, behavior=UNLIMITED)
OWN = "own pending pods"


def _decide(
    the_policy: NodeGroupPolicy,
    current: int,
    metrics: dict[str, Reading],
    own: Reading | None,
) -> Evaluation:
    return decide(
        node_group="jobs-ng",
        policy=the_policy,
        size=GroupSize(current=current),
        readings=metrics,
        history=History(),
        now=T0,
        own_pending=own,
    )


def _waiting(nodes: int, **extra: int) -> MetricReading:
    detail = f"{nodes * 3} pending pods: +{nodes} nodes here, +0 in other groups"
    return MetricReading(value=nodes, at=T0, detail=detail, **extra)


def _own(evaluation: Evaluation) -> MetricStatus:
    (outcome,) = [o for o in evaluation.decision.metrics if o.name == OWN]
    return outcome.status


def test_given_200_tasks_at_10_a_node_and_140_workers_waiting_then_the_group_grows_for_them() -> (
    None
):
    # Given 20 nodes (the queue's 200 / 10) holding 60 workers, and 140 waiting: 47 more nodes
    without = _decide(FIRST_QUEUE, 20, readings(jobs=200), None)
    evaluation = _decide(FIRST_QUEUE, 20, readings(jobs=200), _waiting(47))
    # Then the queue alone holds 20; its own pending pods take it to 67, and say why
    assert without.decision.desired == 20
    assert evaluation.decision.desired == 67
    assert _own(evaluation) is MetricStatus.OK
    reason = evaluation.decision.reason
    assert reason.startswith("scale up 20 → 67 | own pending pods: 141 pending pods: +47 nodes")
    assert "its policy has no PendingPods metric" in reason


def test_given_the_queue_asks_for_more_than_the_waiting_pods_then_the_queue_decides() -> None:
    evaluation = _decide(FIRST_QUEUE, 20, readings(jobs=500), _waiting(2))
    assert evaluation.decision.desired == 50
    assert evaluation.decision.reason.startswith("scale up 20 → 50 | jobs: 500")


def test_given_nothing_waits_and_nodes_to_spare_then_it_never_votes_to_shed_them() -> None:
    # Given the queue asks for 30 of the 40 nodes, and the cluster finds 25 of them unneeded
    spare = _waiting(0, unneeded_nodes=25, empty_nodes=25)
    evaluation = _decide(FIRST_QUEUE, 40, readings(jobs=300), spare)
    # Then the queue's 30 stand: the floor abstains, neither shedding more nor holding
    assert evaluation.decision.desired == 30
    assert _own(evaluation) is MetricStatus.ABSTAINED
    assert Limit.EMPTY_ONLY not in evaluation.decision.limited_by


# A queue policy with the default behavior: a 10-minute window, then -20 % or -5 a minute.
DEFAULT_QUEUE = policy(queue_metric("jobs", per_node=4), max_replicas=100)


def _after_the_window(
    own: Callable[[datetime], Reading], jobs: Callable[[datetime], Reading]
) -> int:
    """50 nodes, the queue at 0 for 11 minutes: the size the 11th minute's decision asks."""
    history, desired = History(), 50
    for minute in range(11):
        now = T0 + minutes(minute)
        evaluation = decide(
            node_group="jobs-ng",
            policy=DEFAULT_QUEUE,
            size=GroupSize(current=50),
            readings={"jobs": jobs(now)},
            history=history,
            now=now,
            own_pending=own(now),
        )
        history, desired = evaluation.history, evaluation.decision.desired
    return desired


def test_given_the_queue_sheds_and_its_nodes_are_empty_then_they_go_past_the_default_rate() -> None:
    # Given 50 nodes, the queue at 0 for the whole window, and the cluster finding 46 of
    # them empty of pods (4 still finishing their workers' last tasks)
    def empty(now: datetime) -> Reading:
        return MetricReading(value=0, at=now, empty_nodes=46)

    def idle_queue(now: datetime) -> Reading:
        return MetricReading(value=0, at=now)

    def unread(now: datetime) -> Reading:
        return MetricUnavailable(reason="Kubernetes API unreachable")

    # Then after the window the 46 empty nodes go at once (the default rate alone would
    # take 10 of 50); the 4 with pods are left to the next decisions' rate
    assert _after_the_window(empty, idle_queue) == 4
    # And without the cluster's count, the default rate paces them all
    assert _after_the_window(unread, idle_queue) == 40
    # And with the queue unread, nothing goes: empty nodes never make a scale-in alone
    missing = lambda now: MetricUnavailable(reason="SQS throttled")  # noqa: E731
    assert _after_the_window(empty, missing) == 50


def test_given_the_cluster_cannot_be_read_then_the_queue_still_scales_in() -> None:
    unread = MetricUnavailable(reason="Kubernetes API unreachable")
    evaluation = _decide(FIRST_QUEUE, 40, readings(jobs=100), unread)
    assert evaluation.decision.desired == 10
    assert Limit.MISSING_METRIC not in evaluation.decision.limited_by
    assert _own(evaluation) is MetricStatus.ABSTAINED
    (outcome,) = [o for o in evaluation.decision.metrics if o.name == OWN]
    assert "Kubernetes API unreachable: no vote" in outcome.detail


def test_given_the_queue_metric_is_missing_then_waiting_pods_still_grow_the_group() -> None:
    missing = {"jobs": MetricUnavailable(reason="SQS throttled")}
    evaluation = _decide(FIRST_QUEUE, 20, missing, _waiting(4))
    assert evaluation.decision.desired == 24


def test_given_a_missing_queue_metric_and_nothing_waiting_then_scale_in_stays_held() -> None:
    missing = {"jobs": MetricUnavailable(reason="SQS throttled")}
    evaluation = _decide(FIRST_QUEUE, 20, missing, _waiting(0))
    assert evaluation.decision.desired == 20
    assert Limit.MISSING_METRIC in evaluation.decision.limited_by


def test_given_the_waiting_pods_then_the_recorded_demand_counts_them_but_not_the_pods_running() -> (
    None
):
    reading = _waiting(5, needed_nodes=80)  # what all the group's pods need: not a floor
    evaluation = _decide(FIRST_QUEUE, 20, readings(jobs=200), reading)
    assert evaluation.decision.demand == 25


@pytest.mark.parametrize(
    ("metrics", "extra", "counts", "planned"),
    [
        ([queue_metric()], {}, True, True),
        ([queue_metric()], {"ownPendingPods": False}, False, False),
        ([queue_metric(), {"type": "PendingPods"}], {}, False, True),  # it does so itself
    ],
)
def test_which_policies_count_their_own_pending_pods(
    metrics: list[dict[str, object]], extra: dict[str, object], counts: bool, planned: bool
) -> None:
    spec = {"minReplicas": 0, "maxReplicas": 10, "metrics": metrics, **extra}
    document = NodeGroupPolicy.model_validate({"metadata": {"name": "p"}, "spec": spec})
    assert document.counts_own_pending_pods is counts
    assert document.takes_pending_pods is planned


def test_given_own_pending_pods_not_a_flag_then_the_policy_is_refused_naming_the_field() -> None:
    spec = {"minReplicas": 0, "maxReplicas": 10, "metrics": [queue_metric()]}
    with pytest.raises(ValidationError, match="ownPendingPods"):
        NodeGroupPolicy.model_validate(
            {"metadata": {"name": "p"}, "spec": {**spec, "ownPendingPods": "no"}}
        )


def test_given_the_queue_sheds_nodes_its_pods_still_need_then_they_stay() -> None:
    # Given 16 nodes all running workers a KEDA deployment keeps after its queue emptied
    # (the cluster's view: the group's pods need 16), and the queue asking for 4
    def need(nodes: int) -> MetricReading:
        return MetricReading(value=0, at=T0, empty_nodes=0, needed_nodes=nodes)

    held = _decide(FIRST_QUEUE, 16, readings(jobs=40), need(16))
    # Then no node goes: each would evict a worker into no room, which would ask for it again
    assert held.decision.desired == 16
    assert Limit.PODS_NEED_NODES in held.decision.limited_by
    assert "no scale-in below the nodes its pods need" in held.decision.reason
    # And as the workers go (10 nodes' worth left), the group follows them down
    assert _decide(FIRST_QUEUE, 16, readings(jobs=40), need(10)).decision.desired == 10
    # And where the pods need fewer than the queue asks, the queue decides
    assert _decide(FIRST_QUEUE, 16, readings(jobs=120), need(3)).decision.desired == 12
    # And the estimate never holds a node the view found empty: 3 of the 16 go
    empty = MetricReading(value=0, at=T0, empty_nodes=3, needed_nodes=16)
    assert _decide(FIRST_QUEUE, 16, readings(jobs=40), empty).decision.desired == 13
    # And with the cluster unread there is no such floor: the queue's 4
    unread = MetricUnavailable(reason="Kubernetes API unreachable")
    assert _decide(FIRST_QUEUE, 16, readings(jobs=40), unread).decision.desired == 4
