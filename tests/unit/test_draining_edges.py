"""A drain's plan and deadline at their edges: pods already being evicted, a pod deleted
exactly when the drain started, a system pod its budget lets go, and how long a Spot
warning leaves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodescaler.domain.cluster.snapshot import DisruptionBudget
from nodescaler.domain.scale_down.drain import DrainCause, DrainPod, DrainProgress, SpotWarning

T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def progress() -> DrainProgress:
    return DrainProgress("i-1", "lifecycle-action", "ng-1", started=T)


def test_a_pod_already_terminating_is_watched_and_the_others_are_still_planned() -> None:
    drain = progress()
    old, new = DrainPod("web", "old"), DrainPod("web", "new")
    drain.terminating[old.key] = old
    drain.plan([old, new])
    assert list(drain.to_evict) == ["web/new"]


def test_a_pod_whose_grace_ends_as_the_drain_starts_is_still_evicted() -> None:
    drain = progress()
    drain.plan([DrainPod("web", "a", gone_after=T)])
    assert (list(drain.to_evict), drain.skipped) == (["web/a"], [])


def test_a_system_pod_its_budget_lets_go_is_evicted() -> None:
    dns = DrainPod("kube-system", "coredns", labels={"k8s-app": "kube-dns"})
    budget = DisruptionBudget(
        "kube-system", "coredns", {"k8s-app": "kube-dns"}, disruptions_allowed=1
    )
    drain = progress()
    drain.plan([dns], budgets=[budget])
    assert list(drain.to_evict) == ["kube-system/coredns"]


def test_a_spot_interruption_drains_until_110_seconds_after_its_warning_at_most() -> None:
    warning = SpotWarning("i-1", DrainCause.SPOT_INTERRUPTION, "e-1", at=T)
    started = T + timedelta(seconds=30)
    assert warning.drain_until(started, timedelta(minutes=10)) == T + timedelta(seconds=110)
    assert warning.drain_until(started, timedelta(seconds=60)) == T + timedelta(seconds=90)


def test_a_rebalance_recommendation_drains_for_the_whole_timeout() -> None:
    warning = SpotWarning("i-1", DrainCause.REBALANCE_RECOMMENDATION, "e-1", at=T)
    started = T + timedelta(seconds=30)
    assert warning.drain_until(started, timedelta(minutes=10)) == started + timedelta(minutes=10)
