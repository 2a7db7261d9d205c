"""The drain's rules on their own: which pods move, how each eviction's answer is taken,
when a refused one is tried again, and what a drain that ends at any point reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.cluster.snapshot import DisruptionBudget
from nodescaler.domain.scale_down.drain import (
    DrainCause,
    DrainOutcome,
    DrainPod,
    DrainProgress,
    Eviction,
    EvictionOutcome,
    PodNote,
    Replacement,
    ReplacementOutcome,
    SpotWarning,
)
from nodescaler.domain.scale_down.pod_rules import NOT_REPLICATED, DrainRules, deletion_deadline

T0 = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
WEB = DrainPod("shop", "web-1", uid="u1", grace_seconds=45)
API = DrainPod("shop", "api-1", uid="u2")
LOGS = DrainPod("kube-system", "logs-x", uid="u3", daemon_set=True)
PROXY = DrainPod("kube-system", "proxy-n", uid="u4", mirror=True, daemon_set=True)
DONE = DrainPod("batch", "job-1", uid="u5", phase="Succeeded")
FAILED = DrainPod("batch", "job-2", uid="u6", phase="Failed")
EVICTED = Eviction(EvictionOutcome.EVICTED)
GONE = Eviction(EvictionOutcome.GONE)
BLOCKED = Eviction(EvictionOutcome.BLOCKED, "blocked by PodDisruptionBudget shop/web")


def progress(*pods: DrainPod) -> DrainProgress:
    drain = DrainProgress("i-0abc", "lifecycle-action", "web", started=T0, node="ip-10-0-1-5")
    drain.plan(pods)
    return drain


@pytest.mark.parametrize(
    ("pod", "cap", "grace"),
    [(WEB, 600, 45), (WEB, 30, 30), (WEB, 45, 45), (API, 600, 30), (API, 10, 10)],
)
def test_an_eviction_gives_the_pods_own_grace_or_thirty_seconds_capped(
    pod: DrainPod, cap: int, grace: int
) -> None:
    assert pod.grace(cap) == grace


def test_a_pod_with_no_grace_at_all_gets_none() -> None:
    assert DrainPod("a", "b", grace_seconds=0).grace(600) == 0


def test_mirror_daemonset_and_finished_pods_stay_and_say_why_the_rest_are_due_at_once() -> None:
    drain = progress(WEB, LOGS, PROXY, DONE, FAILED, API)
    assert drain.skipped == [
        PodNote("kube-system/logs-x", "DaemonSet pod"),
        PodNote("kube-system/proxy-n", "mirror pod of a static pod"),
        PodNote("batch/job-1", "finished (Succeeded)"),
        PodNote("batch/job-2", "finished (Failed)"),
    ]
    assert list(drain.to_evict) == ["shop/web-1", "shop/api-1"]
    assert drain.due(T0) == [WEB, API]
    assert drain.due(T0 - timedelta(seconds=1)) == []
    assert not drain.done


def test_an_evicted_pod_is_terminating_until_it_is_gone_from_the_node() -> None:
    drain = progress(WEB, API)
    drain.record(WEB, EVICTED, grace=45, now=T0)
    assert drain.to_evict == {"shop/api-1": API}
    assert drain.terminating == {"shop/web-1": WEB}
    assert drain.evicted == ["shop/web-1"]
    assert drain.reasons == {"shop/web-1": "evicted, still terminating (grace period 45 s)"}
    drain.forget_gone([WEB, API])  # still there
    assert drain.terminating == {"shop/web-1": WEB}
    drain.forget_gone([API, DrainPod("shop", "web-1", uid="u1", phase="Succeeded")])
    assert drain.terminating == {}
    drain.record(API, GONE, grace=30, now=T0)
    assert drain.done and drain.evicted == ["shop/web-1"]


def test_a_pod_recreated_under_the_same_name_is_another_pod() -> None:
    drain = progress(WEB)
    drain.record(WEB, EVICTED, grace=45, now=T0)
    drain.forget_gone([DrainPod("shop", "web-1", uid="new")])
    assert drain.done


def test_a_pod_already_deleted_is_forgotten_with_its_earlier_refusal() -> None:
    drain = progress(WEB)
    drain.record(WEB, BLOCKED, grace=45, now=T0)
    drain.record(WEB, GONE, grace=45, now=T0 + timedelta(seconds=5))
    assert drain.done and drain.reasons == {} and drain.evicted == []


def test_a_refused_eviction_is_tried_again_after_5_s_doubling_to_30_s() -> None:
    drain = progress(WEB, API)
    now, waits = T0, []
    for _ in range(6):
        drain.record(WEB, BLOCKED, grace=45, now=now)
        waits.append((drain.retry_at["shop/web-1"] - now).total_seconds())
        now = drain.retry_at["shop/web-1"]
    assert waits == [5, 10, 20, 30, 30, 30]
    assert drain.reasons == {"shop/web-1": "blocked by PodDisruptionBudget shop/web"}
    assert drain.due(now - timedelta(seconds=1)) == [API]  # the other pod's own clock
    assert drain.due(now) == [WEB, API]
    drain.record(API, Eviction(EvictionOutcome.FAILED, "500"), grace=30, now=now)
    assert drain.retry_at["shop/api-1"] == now + timedelta(seconds=5)


def test_a_drain_that_ends_reports_what_it_did_and_what_was_left_with_why() -> None:
    drain = progress(WEB, API, LOGS)
    drain.replacement = Replacement(ReplacementOutcome.QUEUED, "web", "re-evaluation queued")
    drain.record(WEB, EVICTED, grace=45, now=T0)
    drain.record(API, BLOCKED, grace=30, now=T0)

    result = drain.result(DrainOutcome.TIMED_OUT, T0 + timedelta(seconds=600), problem="late")

    assert (result.instance_id, result.cause, result.outcome) == (
        "i-0abc",
        "lifecycle-action",
        DrainOutcome.TIMED_OUT,
    )
    assert (result.node, result.node_group, result.seconds, result.problem) == (
        "ip-10-0-1-5",
        "web",
        600.0,
        "late",
    )
    assert result.evicted == ("shop/web-1",)
    assert result.skipped == (PodNote("kube-system/logs-x", "DaemonSet pod"),)
    assert result.remaining == (  # not yet evicted first, then evicted and still terminating
        PodNote("shop/api-1", "blocked by PodDisruptionBudget shop/web"),
        PodNote("shop/web-1", "evicted, still terminating (grace period 45 s)"),
    )
    assert result.replacement == drain.replacement
    assert (result.lifecycle_result, result.uncordoned) == (None, False)


def test_a_pod_never_tried_before_the_deadline_says_so() -> None:
    result = progress(WEB).result(DrainOutcome.FAILED, T0)
    assert result.remaining == (PodNote("shop/web-1", "not evicted before the deadline"),)
    assert (result.seconds, result.problem, result.replacement) == (0.0, None, None)


def test_given_pods_scale_in_would_not_move_then_they_are_refused_watched_and_hold_the_drain() -> (
    None
):
    # kubectl drain refuses a pod no controller manages without --force, one with an
    # emptyDir without --delete-emptydir-data; CA's rules add kube-system pods without a
    # budget (`domain.scale_down.pod_rules`); a pod deleted past its grace period is taken as gone
    bare = DrainPod("shop", "debug", uid="u7", controlled=False)
    cache = DrainPod("shop", "cache", uid="u8", local_storage=True)
    stuck = DrainPod("shop", "old", uid="u9", gone_after=T0 - timedelta(seconds=1))
    drain = DrainProgress("i-0abc", "lifecycle-action", "web", started=T0, node="ip-10-0-1-5")
    drain.plan([WEB, bare, cache, stuck], DrainRules(skip_nodes_with_local_storage=False))
    assert list(drain.to_evict) == ["shop/web-1", "shop/cache"]  # local storage switched off
    assert list(drain.refused) == ["shop/debug"]
    assert drain.skipped == [PodNote("shop/old", "deleted, past its grace period")]
    drain.record(WEB, EVICTED, 45, T0)
    drain.record(cache, EVICTED, 30, T0)
    drain.forget_gone([bare])
    assert not drain.done  # the refused pod is still there
    assert drain.result(DrainOutcome.TIMED_OUT, T0 + timedelta(minutes=10)).remaining == (
        PodNote("shop/debug", f"not evicted: {NOT_REPLICATED}"),
    )
    drain.forget_gone([])  # someone deleted it
    assert drain.done


def test_a_drain_planned_again_after_an_outage_evicts_a_terminating_pod_once() -> None:
    # Given a drain that evicted web-1, still terminating (the API server deleting it by
    # its grace period), when an outage cut the drain
    drain = progress(WEB, API)
    drain.record(WEB, EVICTED, grace=45, now=T0)
    terminating = DrainPod("shop", "web-1", uid="u1", gone_after=T0 + timedelta(seconds=45))

    # When the drain starts again and plans from the pods the node still lists
    drain.plan([terminating, API])

    # Then web-1 is not evicted a second time but watched till it is gone, and the drain
    # reports one pod evicted, not two
    assert list(drain.to_evict) == ["shop/api-1"]
    assert list(drain.terminating) == ["shop/web-1"]
    drain.record(API, EVICTED, grace=30, now=T0)
    result = drain.result(DrainOutcome.TIMED_OUT, T0 + timedelta(seconds=1))
    assert result.evicted == ("shop/web-1", "shop/api-1")


# A drain's plan and deadline at their edges: pods already being evicted, a pod deleted
# exactly when the drain started, a system pod its budget lets go, and how long a Spot
# warning leaves.


T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def fresh_drain() -> DrainProgress:
    return DrainProgress("i-1", "lifecycle-action", "ng-1", started=T)


def test_a_pod_already_terminating_is_watched_and_the_others_are_still_planned() -> None:
    drain = fresh_drain()
    old, new = DrainPod("web", "old"), DrainPod("web", "new")
    drain.terminating[old.key] = old
    drain.plan([old, new])
    assert list(drain.to_evict) == ["web/new"]


def test_a_pod_whose_grace_ends_as_the_drain_starts_is_still_evicted() -> None:
    drain = fresh_drain()
    drain.plan([DrainPod("web", "a", gone_after=T)])
    assert (list(drain.to_evict), drain.skipped) == (["web/a"], [])


def test_a_system_pod_its_budget_lets_go_is_evicted() -> None:
    dns = DrainPod("kube-system", "coredns", labels={"k8s-app": "kube-dns"})
    budget = DisruptionBudget(
        "kube-system", "coredns", {"k8s-app": "kube-dns"}, disruptions_allowed=1
    )
    drain = fresh_drain()
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


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


def test_a_pod_deleted_without_a_grace_period_gets_the_default() -> None:
    assert deletion_deadline(T, None) == T + timedelta(seconds=60)  # 30 s grace + 30 s


@pytest.mark.parametrize(
    ("age", "evicted"),
    [(timedelta(minutes=59), False), (timedelta(hours=1), False), (timedelta(minutes=61), True)],
)
def test_a_system_pod_no_budget_selects_is_evicted_only_past_its_hour_when_the_drain_began(
    age: timedelta, evicted: bool
) -> None:
    # Given a kube-system agent created `age` before the drain began, no budget selecting it
    agent = DrainPod("kube-system", "metrics-agent", created=T0 - age)
    drain = progress(agent)
    # Then it is evicted past the hour (--blocking-system-pod-distruption-timeout), else
    # refused until then, as scale-in judged its node
    assert list(drain.to_evict) == (["kube-system/metrics-agent"] if evicted else [])
    assert list(drain.refused) == ([] if evicted else ["kube-system/metrics-agent"])


def test_a_system_pod_with_no_creation_time_is_refused_and_says_why() -> None:
    drain = progress(DrainPod("kube-system", "metrics-agent"))
    assert "no creation time" in drain.reasons["kube-system/metrics-agent"]
