"""Expanders and the plan: which group grows when pending pods fit several."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from random import Random

import pytest
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Placement, Pod, Resources
from nodescaler.domain.scale_up.expanders import (
    CustomExpander,
    LeastWasteExpander,
    MostPodsExpander,
    Option,
    PriorityExpander,
    RandomExpander,
    WeightedPriorityExpander,
    plan,
)

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
