"""The expanders' edges: what the plan's trace says, how balance splits and orders the
groups it tells, a random tie that can fall either way yet repeats for the same pods, the
custom and reserved-first expanders at their edges, and what a decision says of the plan."""

from __future__ import annotations

from random import Random

from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.scale_up.balance import IGNORED_LABELS
from nodescaler.domain.scale_up.expanders import (
    BalanceSimilarGroups,
    CustomExpander,
    Option,
    Plan,
    PriorityExpander,
    ReservedFirstExpander,
    ReservedRoom,
    WeightedPriorityExpander,
    plan,
)

GIB = 2**30


def pods(count: int, prefix: str = "p") -> list[Pod]:
    return [
        Pod("default", f"{prefix}{i}", None, Resources(1000, GIB, 1), unschedulable=True)
        for i in range(count)
    ]


def template(group: str, **labels: str) -> NodeTemplate:
    return NodeTemplate(group, Resources(4000, 64 * GIB, 110), labels=labels)


SIMILAR = {g: template(g) for g in ("web-a", "web-b")}


def test_the_trace_says_each_choice_of_how_many_options() -> None:
    result = plan(pods(4), {"ng": template("ng")}, [])
    assert result.trace == ["ng: +1 for 4 pods (of 1 options)"]


def test_a_balanced_choice_tells_the_chosen_group_first_with_its_larger_share() -> None:
    # Given two similar groups, the chain choosing web-b for three nodes of pods
    chain = [PriorityExpander({1: ["web-b"]}), BalanceSimilarGroups()]
    # When planned
    result = plan(pods(12), SIMILAR, chain)
    # Then web-b, chosen, wins the tie for the third node and is told first
    assert dict(result.nodes) == {"web-b": 2, "web-a": 1}
    assert result.trace == [
        "web-b: +2 for 8 pods (of 2 options, balanced with 1 similar groups)",
        "web-a: +1 for 4 pods (of 2 options, balanced with 1 similar groups)",
    ]


def test_balance_gives_the_node_to_the_group_with_fewer_nodes_already() -> None:
    chain = [PriorityExpander({1: ["web-a"]}), BalanceSimilarGroups()]
    result = plan(pods(4), SIMILAR, chain, sizes={"web-a": 1})  # web-b's size: none said
    assert dict(result.nodes) == {"web-b": 1}


def test_spread_counts_a_group_of_no_known_size_as_empty() -> None:
    chosen = Option("web-a", 1, tuple(pods(4)), SIMILAR["web-a"])
    options = [chosen, Option("web-b", 1, tuple(pods(4)), SIMILAR["web-b"])]
    spread = BalanceSimilarGroups().spread(chosen, options, {"web-a": 1}, {})
    assert spread == [Option("web-b", 1, tuple(pods(4)), SIMILAR["web-b"])]


def test_balance_ignores_the_labels_it_is_told_to_ignore() -> None:
    templates = {"web-a": template("web-a", team="x"), "web-b": template("web-b", team="y")}
    chain = [PriorityExpander({1: ["web-a"]})]
    strict = plan(pods(8), templates, [*chain, BalanceSimilarGroups()])
    lenient = plan(pods(8), templates, [*chain, BalanceSimilarGroups(IGNORED_LABELS | {"team"})])
    assert dict(strict.nodes) == {"web-a": 2}
    assert dict(lenient.nodes) == {"web-a": 1, "web-b": 1}


def test_a_tie_the_chain_leaves_falls_either_way_over_seeds() -> None:
    chosen = {next(iter(plan(pods(1), SIMILAR, [], rng=Random(s)).nodes)) for s in range(30)}
    assert chosen == {"web-a", "web-b"}


def test_the_same_pending_pods_break_a_tie_the_same_way_every_time() -> None:
    for n in range(20):
        first = plan(pods(1, prefix=f"set{n}-"), SIMILAR, [])
        again = plan(pods(1, prefix=f"set{n}-"), SIMILAR, [])
        assert first.nodes == again.nodes


def test_a_custom_expander_is_shown_the_options() -> None:
    def only_b(options: object) -> list[str]:
        return [o.group for o in options if o.group.endswith("b")]  # type: ignore[attr-defined]

    chain = [CustomExpander(only_b), PriorityExpander({1: ["web-a"]})]
    assert dict(plan(pods(4), SIMILAR, chain).nodes) == {"web-b": 1}


def test_a_custom_expander_choosing_no_option_is_named_in_the_trace() -> None:
    chain = [CustomExpander(lambda options: ["zzz"]), PriorityExpander({1: ["web-a"]})]
    result = plan(pods(4), SIMILAR, chain)
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
    options = [Option(g, n, (), template(g)) for g, n in counts.items()]
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
    assert Plan().why_waiting(pods(1)[0]) == "no group reads pending pods"


def test_reserved_rooms_that_cannot_be_read_silence_no_later_expanders_notes() -> None:
    def unreadable(groups: object) -> dict[str, ReservedRoom]:
        raise RuntimeError("DescribeCapacityReservations throttled")

    def read(groups: object) -> dict[str, ReservedRoom]:
        return {"web-a": ReservedRoom(2, ("cr-1",))}

    chain = [ReservedFirstExpander(unreadable), ReservedFirstExpander(read)]
    result = plan(pods(4), SIMILAR, chain)
    assert result.notes == {"web-a": "reserved-first: 2 reserved instances unused (cr-1)"}
