"""A pod no node group can take is told why, on itself, as Cluster Autoscaler does: a
NotTriggerScaleUp Event, at most once every 10 minutes a pod and 20 pods a plan."""

from __future__ import annotations

from datetime import datetime, timedelta

from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.scale_up.pending_pods_plan import Plan
from nodescaler.errors import KubernetesUnavailableError
from nodescaler.service.unplaced_pod_events import UnplacedPodEvents

T0 = datetime.fromisoformat("2026-11-23T09:00:00+00:00")


class Events:
    def __init__(self, refuse_after: int | None = None) -> None:
        self.sent: list[tuple[str, str, str, datetime]] = []
        self.refuse_after = refuse_after

    def not_trigger_scale_up(self, namespace: str, pod: str, message: str, at: datetime) -> None:
        if self.refuse_after is not None and len(self.sent) >= self.refuse_after:
            raise KubernetesUnavailableError("connection refused")
        self.sent.append((namespace, pod, message, at))


def pods(count: int) -> list[Pod]:
    return [Pod("ml", f"trainer-{n}", None, Resources(1000, 1, 1)) for n in range(count)]


def plan_for(waiting: list[Pod]) -> Plan:
    plan = Plan(unplaced=waiting)
    for pod in waiting:
        plan.waiting[pod.key] = {
            "cpu-ng": "needs more nvidia.com/gpu than a node of the group has",
            "gpu-ng": "at its maximum size or the cluster's limit",
        }
    return plan


def test_each_pod_is_told_why_no_group_takes_it() -> None:
    events = Events()
    waiting = pods(2)
    assert UnplacedPodEvents(events).report(plan_for(waiting), waiting, T0) == [
        "ml/trainer-0",
        "ml/trainer-1",
    ]
    namespace, pod, message, at = events.sent[0]
    assert (namespace, pod, at) == ("ml", "trainer-0", T0)
    assert message == (
        "pod didn't trigger scale-up: cpu-ng: needs more nvidia.com/gpu than a node of the "
        "group has; gpu-ng: at its maximum size or the cluster's limit"
    )


def test_a_pod_is_told_again_only_after_ten_minutes() -> None:
    events = Events()
    reporter = UnplacedPodEvents(events)
    waiting = pods(1)
    reporter.report(plan_for(waiting), waiting, T0)
    assert reporter.report(plan_for(waiting), waiting, T0 + timedelta(minutes=9)) == []
    assert reporter.report(plan_for(waiting), waiting, T0 + timedelta(minutes=10)) == [
        "ml/trainer-0"
    ]


def test_at_most_twenty_pods_a_plan_the_rest_the_next_time() -> None:
    events = Events()
    reporter = UnplacedPodEvents(events)
    waiting = pods(25)
    assert len(reporter.report(plan_for(waiting), waiting, T0)) == 20
    assert len(reporter.report(plan_for(waiting), waiting, T0 + timedelta(seconds=60))) == 5


def test_an_api_server_that_refuses_stops_the_round_and_the_pod_is_told_later() -> None:
    events = Events(refuse_after=1)
    reporter = UnplacedPodEvents(events)
    waiting = pods(3)
    assert reporter.report(plan_for(waiting), waiting, T0) == ["ml/trainer-0"]
    events.refuse_after = None
    assert reporter.report(plan_for(waiting), waiting, T0 + timedelta(seconds=60)) == [
        "ml/trainer-1",
        "ml/trainer-2",
    ]
