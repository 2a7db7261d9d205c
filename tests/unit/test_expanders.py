"""Expanders and the plan: which group grows when pending pods fit several."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from random import Random

import pytest
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Placement, Pod, Resources
from nodescaler.domain.scale_up.balance import IGNORED_LABELS
from nodescaler.domain.scale_up.expanders import (
    BalanceSimilarGroups,
    CustomExpander,
    LeastWasteExpander,
    MostPodsExpander,
    Option,
    PriorityExpander,
    RandomExpander,
    ReservedFirstExpander,
    ReservedRoom,
    WeightedPriorityExpander,
)
from nodescaler.domain.scale_up.pending_pods_plan import Plan, plan

GIB = 2**30


def pods(count: int, cpu: int = 1000, prefix: str = "p") -> list[Pod]:
    return [
        Pod("default", f"{prefix}{i}", None, Resources(cpu, GIB, 1), unschedulable=True)
        for i in range(count)
    ]


def template(group: str, cores: int = 4) -> NodeTemplate:
    return NodeTemplate(group, Resources(cores * 1000, 64 * GIB, 110))


TEMPLATES = {g: template(g) for g in ("spot-a", "spot-b", "on-demand")}


def test_with_one_option_it_gets_the_nodes_the_pods_need() -> None:
    result = plan(pods(10), {"ng": template("ng")}, [])
    assert (dict(result.nodes), result.unplaced) == ({"ng": 3}, [])


def test_priority_expands_the_highest_tier_that_can_take_the_pods() -> None:
    chain = [PriorityExpander({10: ["spot-.*"], 1: ["on-demand"]})]
    result = plan(pods(4), TEMPLATES, chain, rng=Random(1))
    assert set(result.nodes) <= {"spot-a", "spot-b"} and sum(result.nodes.values()) == 1
    only_on_demand = plan(pods(4), {"on-demand": template("on-demand")}, chain)
    assert dict(only_on_demand.nodes) == {"on-demand": 1}


def test_a_group_in_backoff_is_never_chosen() -> None:
    chain = [PriorityExpander({10: ["spot-a"], 1: [".*"]})]
    for seed in range(50):
        result = plan(pods(4), TEMPLATES, chain, backed_off=frozenset({"spot-a"}), rng=Random(seed))
        assert "spot-a" not in result.nodes


def test_weighted_priority_splits_80_20_over_many_decisions() -> None:
    chain = [WeightedPriorityExpander({10: {"spot-a": 80, "spot-b": 20}, 1: {"on-demand": 1}})]
    rng = Random(42)
    chosen = Counter(
        next(iter(plan(pods(1), TEMPLATES, chain, rng=rng).nodes)) for _ in range(5000)
    )
    assert set(chosen) == {"spot-a", "spot-b"}
    assert 0.78 < chosen["spot-a"] / 5000 < 0.82


def test_least_waste_prefers_the_group_the_pods_fill_best() -> None:
    templates = {"big": template("big", cores=16), "small": template("small", cores=4)}
    result = plan(pods(4), templates, [LeastWasteExpander()])
    assert dict(result.nodes) == {"small": 1}


def test_most_pods_prefers_the_group_that_takes_the_most() -> None:
    big_pods = [*pods(2, cpu=6000, prefix="big"), *pods(3, prefix="small")]
    templates = {"large": template("large", cores=8), "medium": template("medium", cores=4)}
    result = plan(big_pods, templates, [MostPodsExpander()])
    assert dict(result.nodes) == {"large": 2}  # 6 cores + 1 + 1 per 8-core node, 5 pods


def test_pods_that_fit_only_one_group_go_there_and_the_rest_are_planned_next() -> None:
    mixed = [*pods(2, cpu=6000, prefix="big"), *pods(4, prefix="small")]
    templates = {"large": template("large", cores=8), "medium": template("medium", cores=4)}
    result = plan(mixed, templates, [PriorityExpander({10: ["medium"], 1: ["large"]})])
    assert dict(result.nodes) == {"medium": 1, "large": 2}
    huge = plan(pods(1, cpu=32000), templates, [])
    assert (dict(huge.nodes), len(huge.unplaced)) == ({}, 1)


def test_random_is_repeatable_for_the_same_pending_pods() -> None:
    first = plan(pods(4), TEMPLATES, [RandomExpander()])
    again = plan(pods(4), TEMPLATES, [RandomExpander()])
    assert first.nodes == again.nodes  # seeded by the pods: every group's evaluation agrees


class Custom:
    def __init__(self, answer: Sequence[str] | Exception, delay: float = 0) -> None:
        self.answer, self.delay, self.calls = answer, delay, 0

    def __call__(self, options: Sequence[Option]) -> Sequence[str]:
        self.calls += 1
        time.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_custom_expander_decides_when_it_answers() -> None:
    custom = Custom(["spot-b"])
    result = plan(pods(4), TEMPLATES, [CustomExpander(custom), PriorityExpander({1: ["spot-a"]})])
    assert dict(result.nodes) == {"spot-b": 1}


@pytest.mark.parametrize(
    "answer",
    [
        TimeoutError("custom expander exceeded its 2 s budget"),
        RuntimeError("500"),
        ["no-such-group"],
        [],
    ],
    ids=["timeout", "error", "unknown-group", "empty"],
)
def test_a_failing_custom_expander_falls_back_to_the_next_in_the_chain(
    answer: Sequence[str] | Exception,
) -> None:
    chain = [CustomExpander(Custom(answer)), PriorityExpander({10: ["on-demand"]})]
    result = plan(pods(4), TEMPLATES, chain)
    assert dict(result.nodes) == {"on-demand": 1}
    assert result.trace[0].startswith("expander custom failed (")


# --- room to grow: no plan onto a full group --------------------------------------------

SPOT_FIRST = [PriorityExpander({10: ["spot-a"], 1: ["on-demand"]})]
TWO = {g: template(g) for g in ("spot-a", "on-demand")}


def test_given_the_preferred_group_at_its_maximum_then_the_next_one_takes_the_pods() -> None:
    result = plan(pods(18), TWO, SPOT_FIRST, room={"spot-a": 0, "on-demand": 100})
    assert (dict(result.nodes), result.unplaced) == ({"on-demand": 5}, [])


def test_given_room_for_part_of_the_pods_then_the_rest_go_to_the_next_group() -> None:
    # 18 one-core pods, four a node: the preferred group can add 3 nodes (12 pods) only
    result = plan(pods(18), TWO, SPOT_FIRST, room={"spot-a": 3, "on-demand": 100})
    assert (dict(result.nodes), result.unplaced) == ({"spot-a": 3, "on-demand": 2}, [])


def test_given_no_group_with_room_then_each_waiting_pod_says_why_per_group() -> None:
    gpu = Pod(
        "default",
        "train",
        None,
        Resources(1000, GIB, 1),
        unschedulable=True,
        placement=Placement(node_selector={"accelerator": "a10"}),
    )
    result = plan(
        [*pods(1), gpu],
        TWO,
        SPOT_FIRST,
        backed_off=frozenset({"on-demand"}),
        room={"spot-a": 0, "on-demand": 100},
    )
    assert result.nodes == Counter()
    assert result.why_waiting(pods(1)[0]) == (
        "on-demand: backed off after a failed scale-up; "
        "spot-a: at its maximum size or the cluster's limit"
    )
    assert result.why_waiting(gpu) == (
        "on-demand: nodeSelector accelerator=a10 does not match; "
        "spot-a: nodeSelector accelerator=a10 does not match"
    )


# The expanders' edges: what the plan's trace says, how balance splits and orders the groups
# it tells, a random tie that can fall either way yet repeats for the same pods, the custom
# and reserved-first expanders at their edges, and what a decision says of the plan.


def small_pods(count: int, prefix: str = "p") -> list[Pod]:
    return [
        Pod("default", f"{prefix}{i}", None, Resources(1000, GIB, 1), unschedulable=True)
        for i in range(count)
    ]


def labelled(group: str, **labels: str) -> NodeTemplate:
    return NodeTemplate(group, Resources(4000, 64 * GIB, 110), labels=labels)


SIMILAR = {g: labelled(g) for g in ("web-a", "web-b")}


def test_the_trace_says_each_choice_of_how_many_options() -> None:
    result = plan(small_pods(4), {"ng": labelled("ng")}, [])
    assert result.trace == ["ng: +1 for 4 pods (of 1 options)"]


def test_a_balanced_choice_tells_the_chosen_group_first_with_its_larger_share() -> None:
    # Given two similar groups, the chain choosing web-b for three nodes of pods
    chain = [PriorityExpander({1: ["web-b"]}), BalanceSimilarGroups()]
    # When planned
    result = plan(small_pods(12), SIMILAR, chain)
    # Then web-b, chosen, wins the tie for the third node and is told first
    assert dict(result.nodes) == {"web-b": 2, "web-a": 1}
    assert result.trace == [
        "web-b: +2 for 8 pods (of 2 options, balanced with 1 similar groups)",
        "web-a: +1 for 4 pods (of 2 options, balanced with 1 similar groups)",
    ]


def test_balance_gives_the_node_to_the_group_with_fewer_nodes_already() -> None:
    chain = [PriorityExpander({1: ["web-a"]}), BalanceSimilarGroups()]
    result = plan(small_pods(4), SIMILAR, chain, sizes={"web-a": 1})  # web-b's size: none said
    assert dict(result.nodes) == {"web-b": 1}


def test_spread_counts_a_group_of_no_known_size_as_empty() -> None:
    chosen = Option("web-a", 1, tuple(small_pods(4)), SIMILAR["web-a"])
    options = [chosen, Option("web-b", 1, tuple(small_pods(4)), SIMILAR["web-b"])]
    spread = BalanceSimilarGroups().spread(chosen, options, {"web-a": 1}, {})
    assert spread == [Option("web-b", 1, tuple(small_pods(4)), SIMILAR["web-b"])]


def test_balance_ignores_the_labels_it_is_told_to_ignore() -> None:
    templates = {"web-a": labelled("web-a", team="x"), "web-b": labelled("web-b", team="y")}
    chain = [PriorityExpander({1: ["web-a"]})]
    strict = plan(small_pods(8), templates, [*chain, BalanceSimilarGroups()])
    lenient = plan(
        small_pods(8), templates, [*chain, BalanceSimilarGroups(IGNORED_LABELS | {"team"})]
    )
    assert dict(strict.nodes) == {"web-a": 2}
    assert dict(lenient.nodes) == {"web-a": 1, "web-b": 1}


def test_a_tie_the_chain_leaves_falls_either_way_over_seeds() -> None:
    chosen = {next(iter(plan(small_pods(1), SIMILAR, [], rng=Random(s)).nodes)) for s in range(30)}
    assert chosen == {"web-a", "web-b"}


def test_the_same_pending_pods_break_a_tie_the_same_way_every_time() -> None:
    for n in range(20):
        first = plan(small_pods(1, prefix=f"set{n}-"), SIMILAR, [])
        again = plan(small_pods(1, prefix=f"set{n}-"), SIMILAR, [])
        assert first.nodes == again.nodes


def test_a_custom_expander_is_shown_the_options() -> None:
    def only_b(options: object) -> list[str]:
        return [o.group for o in options if o.group.endswith("b")]  # type: ignore[attr-defined]

    chain = [CustomExpander(only_b), PriorityExpander({1: ["web-a"]})]
    assert dict(plan(small_pods(4), SIMILAR, chain).nodes) == {"web-b": 1}


def test_a_custom_expander_choosing_no_option_is_named_in_the_trace() -> None:
    chain = [CustomExpander(lambda options: ["zzz"]), PriorityExpander({1: ["web-a"]})]
    result = plan(small_pods(4), SIMILAR, chain)
    assert result.trace[0] == (
        "expander custom failed (custom expander chose none of the options: ['zzz']); "
        "the next one decides"
    )


def test_weighted_priority_passes_a_tier_no_option_matches() -> None:
    options = [Option(g, 1, (), SIMILAR[g]) for g in SIMILAR]
    expander = WeightedPriorityExpander({10: {"gpu-.*": 1}, 5: {"web-b": 1}})
    assert [o.group for o in expander.narrow(options, Random(1))] == ["web-b"]


def reserved(unused: dict[str, int], counts: dict[str, int]) -> list[str]:
    expander = ReservedFirstExpander(lambda groups: {g: ReservedRoom(n) for g, n in unused.items()})
    options = [Option(g, n, (), labelled(g)) for g, n in counts.items()]
    return [o.group for o in expander.narrow(options, Random(1))]


def test_reserved_first_keeps_a_group_whose_room_holds_exactly_its_nodes() -> None:
    assert reserved({"a": 2, "b": 5}, {"a": 2, "b": 10}) == ["a"]


def test_reserved_first_keeps_the_group_with_one_unused_over_one_with_none() -> None:
    assert reserved({"a": 1, "b": 0}, {"a": 2, "b": 2}) == ["a"]


def test_reserved_room_names_each_reservation() -> None:
    room = ReservedRoom(3, ("cr-1", "cr-2"))
    assert room.describe() == "3 reserved instances unused (cr-1, cr-2)"


def test_a_decision_says_what_the_plan_noted_of_its_group_and_who_was_left_out() -> None:
    result = Plan(
        notes={"web-a": "reserved-first: 3 reserved instances unused (cr-1)", "web-b": "other"},
        left_out={"web-c": "zone shifted", "web-d": "zone shifted"},
    )
    assert result.remarks("web-a") == [
        "reserved-first: 3 reserved instances unused (cr-1)",
        "left out web-c: zone shifted; web-d: zone shifted",
    ]


def test_a_pod_no_group_reads_says_so() -> None:
    assert Plan().why_waiting(small_pods(1)[0]) == "no group reads pending pods"


def test_reserved_rooms_that_cannot_be_read_silence_no_later_expanders_notes() -> None:
    def unreadable(groups: object) -> dict[str, ReservedRoom]:
        raise RuntimeError("DescribeCapacityReservations throttled")

    def read(groups: object) -> dict[str, ReservedRoom]:
        return {"web-a": ReservedRoom(2, ("cr-1",))}

    chain = [ReservedFirstExpander(unreadable), ReservedFirstExpander(read)]
    result = plan(small_pods(4), SIMILAR, chain)
    assert result.notes == {"web-a": "reserved-first: 2 reserved instances unused (cr-1)"}
