"""Which of a group's nodes nothing needs: empty ones, and those whose pods fit on the
other nodes by the pending pods' predicates; never one that must stay."""

from __future__ import annotations

from datetime import timedelta, timezone
from typing import Any

import pytest
from nodescaler.domain.cluster.snapshot import (
    DisruptionBudget,
    Node,
    Placement,
    Pod,
    Requirement,
    Resources,
    Snapshot,
    Taint,
    Toleration,
)
from nodescaler.domain.scale_down.pod_rules import (
    CA_DEFAULTS,
    LOCAL_STORAGE,
    NOT_REPLICATED,
    NOT_SAFE_TO_EVICT,
    SYSTEM_POD,
    SYSTEM_POD_UNDATED,
    SYSTEM_POD_UNREAD,
    DrainRules,
    blocking,
)
from nodescaler.domain.scale_down.unneeded import (
    BUDGETS_UNKNOWN,
    BUFFER,
    DISRUPTION_BUDGET,
    MAY_NOT_MOVE,
    WOULD_NOT_FIT,
    Kept,
    Unneeded,
    unneeded_nodes,
)

from tests.builders import T0

GIB = 2**30


def node(name: str, *, group: str = "web", cpu: int = 4000, **fields: object) -> Node:
    return Node(name, group, True, True, Resources(cpu, 16 * GIB, 110), **fields)  # type: ignore[arg-type]


def pod(name: str, on: str, cpu: int = 1000, **fields: object) -> Pod:
    return Pod("default", name, on, Resources(cpu, GIB, 1), **fields)  # type: ignore[arg-type]


def spare(
    nodes: list[Node], pods: list[Pod], group: str = "web", limit: int = 10
) -> tuple[str, ...]:
    snapshot = Snapshot(tuple(nodes), tuple(pods))
    mine = [n for n in nodes if n.group == group]
    return unneeded_nodes(mine, snapshot, limit=limit, now=T0).nodes


def test_an_empty_node_is_unneeded_whatever_its_daemon_sets_and_mirror_pods() -> None:
    nodes = [node("a"), node("b")]
    pods = [
        pod("agent", "a", daemon_set=True),
        pod("static", "a", mirror=True),
        pod("done", "a", phase="Succeeded"),
        pod("app", "b"),
    ]
    assert spare(nodes, pods) == ("a",)  # and b's pod has nowhere else to go


def test_a_node_whose_pods_fit_on_the_others_is_unneeded_and_its_pods_take_their_room() -> None:
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("a1", "a", 1500), pod("b1", "b", 1500), pod("c1", "c", 3000)]
    # a's pod moves to b; b's then has nowhere to go (a leaves, c has one core free), and c
    # is busy (75 % requested): not worth its evictions
    assert spare(nodes, pods) == ("a",)


def test_pods_moved_to_a_node_move_again_when_that_node_goes_too() -> None:
    # Given a's and b's pods (1.5 cores each) and c's (2.5 cores, too busy to go), on nodes
    # of 4 cores: a's pod moves to b, the roomiest
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("a1", "a", 1500), pod("b1", "b", 1500), pod("c1", "c", 2500)]
    # Then b stays: its own pod and a's would have 1.5 cores left on c for 3 (moving b's
    # own alone would fit, and lose a's pod on the way)
    assert spare(nodes, pods) == ("a",)


def test_pods_that_may_not_go_elsewhere_keep_their_node() -> None:
    tainted = node("other", group="gpu", taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"),))
    labelled = node("labelled", group="db", labels={"tier": "db"})
    busy = node("a")
    selects_web = Placement(node_selector={"tier": "web"})
    assert spare([busy, tainted], [pod("p", "a")]) == ()  # the only room is tainted
    assert spare([busy, labelled], [pod("p", "a", placement=selects_web)]) == ()  # selector
    tolerates = Placement(tolerations=(Toleration("nvidia.com/gpu", "Exists"),))
    assert spare([busy, tainted], [pod("p", "a", placement=tolerates)]) == ("a",)


def test_a_gpu_pod_needs_a_gpu_left_on_the_node_it_moves_to() -> None:
    gpus = {"nvidia.com/gpu": 1}
    nodes = [node("a", extended=gpus), node("b", extended=gpus)]
    trainer = Placement(extended_resources=gpus)
    pods = [pod("t1", "a", placement=trainer), pod("t2", "b", placement=trainer)]
    assert spare(nodes, pods) == ()  # each GPU is taken
    assert spare(nodes, pods[:1]) == ("b",)  # the empty GPU node; t1 has no GPU to go to


def test_a_pod_spread_one_a_node_moves_only_to_a_node_without_one_of_its_own() -> None:
    # Given three roomy nodes, each with one replica of a workload spread one a node
    spread = Placement(apart=frozenset({"anti-affinity default/zk"}))
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod(f"zk-{n.name}", n.name, 500, placement=spread) for n in nodes]
    # Then none can go: each replica would land beside another (Cluster Autoscaler's
    # simulation refuses the move too)
    assert spare(nodes, pods) == ()
    # and beside a node holding another workload's pod, a replica moves there
    other = pod("cache", "d", 500, local_storage=True)  # which keeps d
    assert spare([*nodes, node("d")], [*pods, other]) == ("a",)


def test_kept_cordoned_and_not_ready_nodes_are_never_unneeded() -> None:
    kept = node("kept", scale_down_disabled=True)
    cordoned = Node("cordoned", "web", True, False, Resources(4000, 16 * GIB, 110))
    not_ready = Node("booting", "web", False, True, Resources(4000, 16 * GIB, 110))
    pinned = node("pinned")
    room = node("room", group="other")
    pods = [pod("must-stay", "pinned", not_safe_to_evict=True)]
    assert spare([kept, cordoned, not_ready, pinned, room], pods) == ()


def test_a_pod_whose_requests_could_not_be_read_keeps_its_node() -> None:
    nodes = [node("a"), node("b")]
    pods = [pod("odd", "a", problem="resources.requests: bad"), pod("b1", "b", 3500)]
    assert spare(nodes, pods) == ()


def test_only_a_few_busy_nodes_are_simulated_a_call() -> None:
    nodes = [node(f"n{i}") for i in range(6)] + [node("big", group="spare", cpu=64000)]
    pods = [pod(f"p{i}", f"n{i}") for i in range(6)]
    assert len(spare(nodes, pods, limit=2)) == 2
    assert len(spare(nodes, pods)) == 6


def budget(allowed: int, app: str = "web") -> DisruptionBudget:
    return DisruptionBudget("default", f"{app}-pdb", {"app": app}, disruptions_allowed=allowed)


def web(name: str, on: str) -> Pod:
    return pod(name, on, 500, labels={"app": "web"})


def test_a_budget_allowing_no_disruption_keeps_the_nodes_of_its_pods() -> None:
    nodes = [node("a"), node("b"), node("room", group="other")]
    pods = [web("w1", "a"), web("w2", "b")]
    snapshot = Snapshot(tuple(nodes), tuple(pods), (budget(0),))
    found = unneeded_nodes(nodes[:2], snapshot, now=T0)
    assert found.nodes == ()
    assert [(k.node, k.why, k.pods) for k in found.kept] == [
        ("a", "disruption-budget", ("default/w1",)),
        ("b", "disruption-budget", ("default/w2",)),
    ]
    assert "a kept: disruption-budget (default/w1)" in found.describe()


def test_a_budget_allowing_one_disruption_lets_one_node_go_not_two() -> None:
    nodes = [node("a"), node("b"), node("room", group="other")]
    pods = [web("w1", "a"), web("w2", "b"), pod("other", "b", labels={"app": "db"})]
    snapshot = Snapshot(tuple(nodes), tuple(pods), (budget(1),))
    assert unneeded_nodes(nodes[:2], snapshot, now=T0).nodes == (
        "a",
    )  # b's web pod: the budget's spent


def test_an_empty_selector_selects_every_pod_of_its_namespace() -> None:
    everything = DisruptionBudget("default", "all", disruptions_allowed=0)
    assert everything.selects(pod("x", "a", labels={"app": "anything"}))
    assert not everything.selects(Pod("other-ns", "y", "a", Resources(1, 1, 1)))
    by_expression = DisruptionBudget(
        "default", "tiers", match_expressions=(Requirement("tier", "In", ("web", "api")),)
    )
    assert by_expression.selects(pod("x", "a", labels={"tier": "api"}))
    assert not by_expression.selects(pod("x", "a", labels={"tier": "db"}))


def test_budgets_that_could_not_be_read_leave_only_empty_nodes_unneeded() -> None:
    nodes = [node("a"), node("b"), node("room", group="other")]
    snapshot = Snapshot(tuple(nodes), (pod("p", "a"),), None)
    found = unneeded_nodes(nodes[:2], snapshot, now=T0)
    assert found.nodes == ("b",)
    assert [(k.node, k.why) for k in found.kept] == [("a", "disruption-budgets-unread")]


def test_a_pod_that_fits_nowhere_is_named() -> None:
    nodes = [node("a"), node("b")]
    pods = (pod("big", "a", 1900), pod("b1", "b", 1900), pod("b2", "b", 1500))
    found = unneeded_nodes(nodes, Snapshot(tuple(nodes), pods), now=T0)
    # b (85 % requested) is no candidate; a's pod has 600 millicores to go to on b
    assert [(k.node, k.why, k.pods) for k in found.kept] == [
        ("a", "pods-would-not-fit", ("default/big",)),
    ]


def test_a_busy_node_is_no_candidate_even_when_its_pods_would_fit_elsewhere() -> None:
    nodes = [node("a"), node("b", cpu=16_000)]
    busy_b = pod("b1", "b", 9000)  # 9 of 16 cores: b is no candidate either way
    over = [pod("a1", "a", 1100), pod("a2", "a", 1000), busy_b]  # a: 2.1 of 4 cores
    assert spare(nodes, over) == ()  # b has room for a's pods, but a is over half
    half = [pod("a1", "a", 1000), pod("a2", "a", 1000), busy_b]  # a: 2 of 4 cores
    assert spare(nodes, half) == ("a",)  # at half: a goes, its pods onto b


def test_a_node_with_several_pods_of_a_budget_allowing_one_goes_its_drain_takes_them_in_turn() -> (
    None
):
    nodes = [node("a"), node("room", group="other")]
    pods = [web("w1", "a"), web("w2", "a"), web("w3", "a")]
    snapshot = Snapshot(tuple(nodes), tuple(pods), (budget(1),))
    assert unneeded_nodes(nodes[:1], snapshot, now=T0).nodes == ("a",)


def test_only_the_nodes_whose_mark_is_wrong_are_marked_or_cleared() -> None:
    from nodescaler.domain.scale_down.marks import CANDIDATE_TAINT, candidate_marks

    marked = node("b", taints=(CANDIDATE_TAINT,))
    stale = node("c", taints=(CANDIDATE_TAINT, Taint("gpu", "yes")))
    nodes = [node("a"), marked, stale, node("d")]
    assert candidate_marks(nodes, frozenset({"a", "b"})) == {"a": True, "c": False}
    assert candidate_marks(nodes, frozenset()) == {"b": False, "c": False}


# Cluster Autoscaler's FAQ, "What types of pods can prevent CA from removing a node?", as
# its drainability rules apply them (simulator/drainability/rules/: replicated, system,
# notsafetoevict, localstorage; safetoevict lets the others go; utils/drain/drain.go).
SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
SYSTEM_BUDGET = DisruptionBudget("kube-system", "dns", {"app": "dns"}, disruptions_allowed=1)


@pytest.mark.parametrize(
    ("fields", "rules", "why"),
    [
        ({"controlled": False}, DrainRules(), NOT_REPLICATED),
        ({"local_storage": True}, DrainRules(), LOCAL_STORAGE),
        ({"namespace": "kube-system"}, DrainRules(), SYSTEM_POD_UNDATED),
        ({"not_safe_to_evict": True}, DrainRules(), NOT_SAFE_TO_EVICT),
        # no controller and safe-to-evict "false" keep it whatever the flags
        ({"controlled": False}, DrainRules(False, False), NOT_REPLICATED),
        ({"not_safe_to_evict": True}, DrainRules(False, False), NOT_SAFE_TO_EVICT),
        # annotated safe-to-evict "true": any of the first three may go
        ({"controlled": False, "safe_to_evict": True}, DrainRules(), None),
        ({"local_storage": True, "safe_to_evict": True}, DrainRules(), None),
        ({"namespace": "kube-system", "safe_to_evict": True}, DrainRules(), None),
        # --skip-nodes-with-local-storage=false, --skip-nodes-with-system-pods=false
        ({"local_storage": True}, DrainRules(skip_nodes_with_local_storage=False), None),
        ({"namespace": "kube-system"}, DrainRules(skip_nodes_with_system_pods=False), None),
        # a kube-system pod a budget selects
        ({"namespace": "kube-system", "labels": {"app": "dns"}}, DrainRules(), None),
    ],
)
def test_given_a_pod_cluster_autoscaler_would_not_move_then_its_node_stays_and_says_why(
    fields: dict[str, Any], rules: DrainRules, why: str | None
) -> None:
    nodes = [node("a"), node("b")]
    # the case is read, never changed: mutmut runs each test twice in one process
    namespace = fields.get("namespace", "default")
    flags = {k: v for k, v in fields.items() if k != "namespace"}
    pods = [
        Pod(namespace, "x", "a", Resources(500, GIB, 1), **flags),
        pod("b1", "b"),
    ]
    snapshot = Snapshot(tuple(nodes), tuple(pods), (SYSTEM_BUDGET,))
    found = unneeded_nodes(nodes, snapshot, rules=rules, now=T0)
    if why is None:
        assert found.nodes == ("a",)
    else:
        assert found.nodes == ("b",)  # b's pod moves to a, which stays
        assert Kept("a", MAY_NOT_MOVE, (f"{namespace}/x: {why}",)) in found.kept
        assert f"a kept: pods-may-not-move ({namespace}/x: {why})" in found.describe()


# --blocking-system-pod-distruption-timeout (config/flags/flags.go, default 1h): a
# kube-system pod no budget selects keeps its node until strictly after its creation plus
# the timeout (simulator/drainability/rules/system/rule.go, isBspPassedDisruptionTimeout:
# `drainTime.After(creation + timeout)`), and for good with no creation time.
HOUR = timedelta(hours=1)
SECOND = timedelta(seconds=1)


def system_pod(created: Any = None, **fields: Any) -> Pod:
    return Pod("kube-system", "agent", "a", Resources(500, GIB, 1), created=created, **fields)


def kept_for(pod_on_a: Pod, rules: DrainRules = CA_DEFAULTS, budgets: Any = ()) -> Unneeded:
    nodes = [node("a"), node("b")]
    snapshot = Snapshot(tuple(nodes), (pod_on_a, pod("b1", "b")), tuple(budgets))
    return unneeded_nodes(nodes, snapshot, rules=rules, now=T0)


@pytest.mark.parametrize(
    ("age", "goes"),
    [
        (HOUR - SECOND, False),  # young: its node stays
        (HOUR, False),  # exactly the timeout: not yet after it, as Cluster Autoscaler
        (HOUR + SECOND, True),  # past it: the node goes, the pod moves
        (timedelta(days=30), True),
    ],
)
def test_given_a_kube_system_pod_no_budget_selects_then_it_keeps_its_node_for_its_first_hour(
    age: timedelta, goes: bool
) -> None:
    # Given a kube-system pod created `age` before now, no budget selecting it
    found = kept_for(system_pod(T0 - age))
    # Then its node goes once the hour is past, else stays and says until when
    if goes:
        assert found.nodes == ("a",)
        assert [k.why for k in found.kept] == [WOULD_NOT_FIT]  # b, as a's pod takes its room
    else:
        until = (T0 - age + HOUR).strftime("%Y-%m-%dT%H:%M:%SZ")
        why = f"{SYSTEM_POD}, for 1h after its creation: until {until}"
        assert found.nodes == ("b",)
        assert found.kept == (Kept("a", MAY_NOT_MOVE, (f"kube-system/agent: {why}",)),)


def test_given_a_kube_system_pod_with_no_creation_time_then_it_keeps_its_node_and_says_why() -> (
    None
):
    found = kept_for(system_pod(None))
    assert found.nodes == ("b",)
    assert found.kept[0].pods == (f"kube-system/agent: {SYSTEM_POD_UNDATED}",)
    assert "no creation time" in found.describe()


@pytest.mark.parametrize(
    ("timeout", "age", "goes"),
    [
        (timedelta(minutes=10), timedelta(minutes=10), False),
        (timedelta(minutes=10), timedelta(minutes=10) + SECOND, True),
        (timedelta(hours=2), HOUR + SECOND, False),
    ],
)
def test_the_timeout_is_the_setting_given(timeout: timedelta, age: timedelta, goes: bool) -> None:
    found = kept_for(system_pod(T0 - age), DrainRules(system_pod_timeout=timeout))
    assert found.nodes == (("a",) if goes else ("b",))


def test_a_young_pods_reason_names_its_timeout_as_an_operator_writes_it() -> None:
    for timeout, written in [(timedelta(minutes=90), "90m"), (timedelta(seconds=45), "45s")]:
        why = blocking(system_pod(T0), DrainRules(system_pod_timeout=timeout), (), T0)
        assert why is not None and f"for {written} after its creation" in why


def test_a_young_pods_reason_says_until_when_in_utc_whatever_the_zone_it_was_written_in() -> None:
    created = (T0 - timedelta(minutes=10)).astimezone(timezone(timedelta(hours=2)))
    why = blocking(system_pod(created), CA_DEFAULTS, (), T0)
    until = T0 + timedelta(minutes=50)
    assert why is not None and why.endswith(f"until {until:%Y-%m-%dT%H:%M:%SZ}")


@pytest.mark.parametrize("age", [timedelta(minutes=5), timedelta(days=3)])
def test_given_a_kube_system_pod_a_budget_selects_then_the_budget_decides_whatever_its_age(
    age: timedelta,
) -> None:
    # Given the pod a budget selects: young or old, it moves while the budget allows one
    pod_on_a = system_pod(T0 - age, labels={"app": "dns"})
    assert kept_for(pod_on_a, budgets=[SYSTEM_BUDGET]).nodes == ("a",)
    # and stays, for the budget, while the budget allows none
    spent = DisruptionBudget("kube-system", "dns", {"app": "dns"}, disruptions_allowed=0)
    found = kept_for(pod_on_a, budgets=[spent])
    assert found.kept == (Kept("a", DISRUPTION_BUDGET, ("kube-system/agent",)),)


@pytest.mark.parametrize(
    ("fields", "why"),
    [({"not_safe_to_evict": True}, NOT_SAFE_TO_EVICT), ({"local_storage": True}, LOCAL_STORAGE)],
)
def test_given_an_old_kube_system_pod_its_owner_asked_to_keep_then_it_still_keeps_its_node(
    fields: dict[str, Any], why: str
) -> None:
    # Past the hour Cluster Autoscaler's system rule answers "drainable" before any later
    # rule; nodescaler still heeds safe-to-evict "false" and local storage (never looser).
    found = kept_for(system_pod(T0 - 2 * HOUR, **fields))
    assert found.kept == (Kept("a", MAY_NOT_MOVE, (f"kube-system/agent: {why}",)),)


def test_with_system_pods_not_skipped_a_kube_system_pod_moves_whatever_its_age() -> None:
    assert kept_for(system_pod(None), DrainRules(skip_nodes_with_system_pods=False)).nodes == ("a",)


def test_given_budgets_that_cannot_be_read_then_a_kube_system_pod_keeps_its_node() -> None:
    nodes = [node("a"), node("b")]
    pods = [Pod("kube-system", "agent", "a", Resources(500, GIB, 1))]
    found = unneeded_nodes(nodes, Snapshot(tuple(nodes), tuple(pods), None), now=T0)
    assert found.nodes == ("b",)
    assert found.kept[0].pods == (f"kube-system/agent: {SYSTEM_POD_UNREAD}",)


def test_given_a_daemon_set_or_mirror_pod_with_local_storage_then_the_node_is_empty() -> None:
    # daemonset and mirror rules come before every blocking one (rules.go, Default)
    nodes = [node("a")]
    pods = [
        Pod(
            "kube-system",
            "agent",
            "a",
            Resources(100, GIB, 1),
            daemon_set=True,
            local_storage=True,
            controlled=True,
        ),
        Pod("kube-system", "static", "a", Resources(100, GIB, 1), mirror=True, controlled=False),
    ]
    found = unneeded_nodes(nodes, Snapshot(tuple(nodes), tuple(pods)), now=T0)
    assert (found.nodes, found.empty) == (("a",), 1)


def room_for(cpu: int, count: int = 1) -> tuple[Pod, ...]:
    """A capacity buffer's virtual pods (`domain.ahead.group_buffers`): `count` of `cpu` millicores."""
    return tuple(
        Pod("nodescaler-buffer", f"buffer-0-{n}", None, Resources(cpu, GIB, 1))
        for n in range(count)
    )


def test_the_summary_counts_moved_nodes_and_shows_three_kept_nodes_and_three_pods_each() -> None:
    # Given 3 unneeded nodes (1 empty) and 4 kept ones, one naming 5 pods, one 3, one none
    five = tuple(f"default/p{n}" for n in range(5))
    three = ("default/q0", "default/q1", "default/q2")
    kept = (
        Kept("d", "disruption-budget", five),
        Kept("e", "pods-would-not-fit", three),
        Kept("f", "capacity-buffer", ()),
        Kept("g", "capacity-buffer", ()),
    )
    # When described, Then the line a user reads says exactly this
    text = Unneeded(("a", "b", "c"), 1, kept).describe()
    assert text == (
        "3 of its nodes unneeded (1 empty, 2 whose pods fit elsewhere)"
        "; d kept: disruption-budget (default/p0, default/p1, default/p2, ...)"
        "; e kept: pods-would-not-fit (default/q0, default/q1, default/q2)"
        "; f kept: capacity-buffer"
    )


def test_a_node_whose_pods_request_exactly_half_its_memory_is_underutilized() -> None:
    # Given node a whose one pod requests little cpu but exactly half its memory
    nodes = [node("a"), node("b", group="batch")]
    pods = [Pod("default", "big", "a", Resources(100, 8 * GIB, 1))]
    # When the unneeded nodes are found, Then a goes, its pod onto the other group's b: at
    # half is eligible, as Cluster Autoscaler's isNodeAtOrBelowUtilizationThreshold has it
    assert spare(nodes, pods) == ("a",)
    # a byte over half of its memory, and it stays
    over = [Pod("default", "big", "a", Resources(100, 8 * GIB + 1, 1))]
    assert spare(nodes, over) == ()


def test_empty_nodes_of_equal_cost_go_in_the_order_of_their_names() -> None:
    # Given empty nodes listed b before a, When found unneeded, Then a comes first
    assert spare([node("b"), node("a")], []) == ("a", "b")


def test_a_cordoned_node_is_no_room_for_the_pods_of_a_node_that_would_go() -> None:
    # Given node a with one pod and, besides it, only a cordoned node
    nodes = [node("a"), Node("c", "other", True, False, Resources(4000, 16 * GIB, 110))]
    # When found unneeded, Then a stays: its pod would have nowhere to go
    result = unneeded_nodes(nodes[:1], Snapshot(tuple(nodes), (pod("a1", "a"),)), now=T0)
    assert (result.nodes, [k.why for k in result.kept]) == ((), [WOULD_NOT_FIT])


def test_a_node_kept_for_the_buffer_does_not_stop_the_next_node_from_going() -> None:
    # Given an other group's empty node o (listed first, where moved pods land), and the
    # group's g1 (one 1-core pod) and g2 (two 0.6-core pods); the buffer wants 3 free cores
    nodes = [node("o", group="batch"), node("g2"), node("g1")]
    pods = [pod("one", "g1"), pod("two-a", "g2", 600), pod("two-b", "g2", 600)]
    snapshot = Snapshot(tuple(nodes), tuple(pods))
    # When found unneeded
    result = unneeded_nodes(nodes[1:], snapshot, buffer=room_for(3000), now=T0)
    # Then g1 (cheapest) stays, as without it only g2's 2.8 cores stay free; g2 goes,
    # as g1's 3 free cores then hold the buffer
    assert result.kept == (Kept("g1", BUFFER, ()),)
    assert result.nodes == ("g2",)


def test_pods_moved_onto_the_groups_own_nodes_take_room_the_buffer_needed() -> None:
    # Given the group's g1 (one 1-core pod) and g2 (two 0.6-core pods), no other node,
    # and a buffer of 3 free cores
    nodes = [node("g2"), node("g1")]
    pods = [pod("one", "g1"), pod("two-a", "g2", 600), pod("two-b", "g2", 600)]
    snapshot = Snapshot(tuple(nodes), tuple(pods))
    # When found unneeded
    result = unneeded_nodes(nodes, snapshot, buffer=room_for(3000), now=T0)
    # Then both stay: the pods of either, moved to the other, leave it under 3 cores free
    assert result.nodes == ()
    assert result.kept == (Kept("g1", BUFFER, ()), Kept("g2", BUFFER, ()))


def test_an_empty_node_kept_for_the_buffer_does_not_stop_a_busier_node_from_going() -> None:
    # Given an other group's empty node o (listed first), the group's empty e and its g1
    # with one 1-core pod that runs on o's pool only; the buffer wants a whole free node
    nodes = [node("o", group="batch", labels={"pool": "batch"}), node("e"), node("g1")]
    batch_only = Placement(node_selector={"pool": "batch"})
    snapshot = Snapshot(tuple(nodes), (pod("one", "g1", placement=batch_only),))
    # When found unneeded
    result = unneeded_nodes(nodes[1:], snapshot, buffer=room_for(4000), now=T0)
    # Then e stays for the buffer, and g1 goes, its pod moving to o
    assert result.kept == (Kept("e", BUFFER, ()),)
    assert result.nodes == ("g1",)


def test_a_node_whose_pods_may_not_move_does_not_stop_the_next_from_going() -> None:
    # Given a with one pinned pod (cheapest), b with two pods, and an empty c
    nodes = [node("a"), node("b"), node("c")]
    pods = [
        pod("pinned", "a", 100, not_safe_to_evict=True),
        pod("b1", "b", 500),
        pod("b2", "b", 500),
    ]
    result = unneeded_nodes(nodes, Snapshot(tuple(nodes), tuple(pods)), now=T0)
    # When found unneeded, Then c and b go, a is kept for its pod
    assert result.nodes == ("c", "b")
    assert [k.node for k in result.kept] == ["a"]


def test_a_node_a_job_runs_on_comes_after_one_with_more_pods_of_a_deployment() -> None:
    # Given a with one Job's worker (moved, it starts its task again), b with two pods
    # of a Deployment, and another group's empty c to move them to
    nodes = [node("a"), node("b"), node("c", group="batch")]
    pods = [pod("worker", "a", 100, job=True), pod("b1", "b", 100), pod("b2", "b", 100)]
    # When found unneeded, Then b is the first to go, though it has more pods to move
    assert spare(nodes, pods) == ("b", "a")


def test_a_busy_node_passed_over_does_not_stop_the_next_from_going() -> None:
    # Given a with one 3-core pod (over half its cpu) and b with two small pods
    nodes = [node("a"), node("b"), node("c", group="batch")]
    pods = [pod("a1", "a", 3000), pod("b1", "b", 100), pod("b2", "b", 100)]
    # When found unneeded, Then b goes although a, cheaper by its pod count, may not
    assert spare(nodes, pods) == ("b",)


def test_with_budgets_unread_every_node_with_pods_is_kept_naming_its_pods() -> None:
    # Given two nodes with pods and disruption budgets that could not be read
    nodes = [node("a"), node("b")]
    pods = [pod("a1", "a"), pod("b1", "b"), pod("b2", "b")]
    result = unneeded_nodes(nodes, Snapshot(tuple(nodes), tuple(pods), None), now=T0)
    # When found unneeded, Then both stay, each naming the pods that wait on a budget
    assert result.kept == (
        Kept("a", BUDGETS_UNKNOWN, ("default/a1",)),
        Kept("b", BUDGETS_UNKNOWN, ("default/b1", "default/b2")),
    )


def test_a_kept_node_naming_four_pods_shows_three_and_says_there_are_more() -> None:
    four = ("default/p0", "default/p1", "default/p2", "default/p3")
    text = Unneeded((), 0, (Kept("a", "pods-would-not-fit", four),)).describe()
    assert text.endswith("; a kept: pods-would-not-fit (default/p0, default/p1, default/p2, ...)")


def test_a_node_whose_pods_would_not_fit_does_not_stop_the_next_from_going() -> None:
    # Given a whose one pod runs on a's pool only, and b with two small pods
    nodes = [node("a", labels={"pool": "a"}), node("b")]
    only_a = Placement(node_selector={"pool": "a"})
    pods = [pod("a1", "a", placement=only_a), pod("b1", "b", 100), pod("b2", "b", 100)]
    result = unneeded_nodes(nodes, Snapshot(tuple(nodes), tuple(pods)), now=T0)
    # When found unneeded, Then a stays for its pod, and b goes, its pods moving to a
    assert [(k.node, k.why) for k in result.kept] == [("a", WOULD_NOT_FIT)]
    assert result.nodes == ("b",)


# Cluster Autoscaler: kubernetes/autoscaler cluster-autoscaler/simulator/utilization/info.go,
# CalculateUtilizationOfResource (called by Calculate): with DaemonSet and mirror pods left
# out of the requests, their requests leave the node's allocatable too.
@pytest.mark.parametrize(
    ("system", "app", "goes"),
    [
        # 2 cores of DaemonSets and a static pod: the app's 1.2 cores are 60 % of the 2 left
        ({"daemon_set": True}, 1200, False),
        ({"mirror": True}, 1200, False),
        # 0.9 of the 2 left: 45 %, under half; it goes
        ({"daemon_set": True}, 900, True),
        # a finished DaemonSet pod holds nothing: 1.2 of 4 cores, 30 %; it goes
        ({"daemon_set": True, "phase": "Succeeded"}, 1200, True),
    ],
)
def test_a_nodes_utilization_leaves_its_daemon_set_and_mirror_pods_out_of_both_sides(
    system: dict[str, bool], app: int, goes: bool
) -> None:
    # Given node a of 4 cores whose DaemonSet (or mirror) pod requests 2, and an app pod,
    # besides another group's node b with room for the app pod
    nodes = [node("a"), node("b", group="batch")]
    pods = [pod("agent", "a", 2000, **system), pod("app", "a", app)]
    # When the unneeded nodes are found, Then a goes only if its app pod requests under half
    # of what the DaemonSets leave (once: 1.2 of 4 cores, 30 %, and a went sooner than CA)
    assert spare(nodes, pods) == (("a",) if goes else ())


def test_a_node_its_daemon_sets_fill_is_not_underutilized() -> None:
    # Given node a whose DaemonSet pod requests all 4 cores, and an app pod of 10m
    nodes = [node("a"), node("b", group="batch")]
    pods = [pod("agent", "a", 4000, daemon_set=True), pod("app", "a", 10)]
    # Then a stays: no room left for pods, so no share of it is "under half"
    assert spare(nodes, pods) == ()


# Scale-down candidates at their edges: a node with no pods at all, and memory its
# DaemonSets take judged as Cluster Autoscaler judges it.


def test_a_node_without_a_single_pod_is_unneeded() -> None:
    assert spare([node("a"), node("b")], [pod("app", "b")]) == ("a",)


def test_memory_its_daemon_sets_take_is_no_room_to_call_a_node_underused() -> None:
    agent = Pod("kube-system", "agent", "a", Resources(100, 8 * GIB, 1), daemon_set=True)
    app = Pod("default", "app", "a", Resources(100, 5 * GIB, 1))  # 5 of the 8 GiB left
    busy = pod("busy", "b", 9000)  # b: 9 of 16 cores, room for the app but no candidate
    assert spare([node("a"), node("b", cpu=16_000)], [agent, app, busy]) == ()
