"""A group that sheds only empty nodes (`consolidation: WhenEmpty`) has its underused nodes,
whose pods would fit elsewhere, marked too: the scheduler then sends new pods elsewhere,
and those nodes empty as their pods finish, where they would be refilled (a CI job landing
on the least-allocated node). No pod is moved and no node with pods is shed for it."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from nodescaler.domain.cluster.snapshot import Snapshot
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import PendingPodsMetric
from nodescaler.domain.scaling.plan import plan
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_balance import CHAIN, NOW, Cluster, Groups, M5Xlarge, pods, web_node
from tests.unit.test_cluster_view import GROUP
from tests.unit.test_planning import NOW as AT
from tests.unit.test_planning import Chooser, idle_facts


def read(consolidation: str) -> MetricReading:
    """web-a's reading: node 0 runs two one-core pods, node 1 one, node 2 none."""
    metric = {"type": "PendingPods", "pendingPods": {"consolidation": consolidation}}
    nodes = [web_node("web-a", i) for i in range(3)]
    running = [
        replace(p, node_name=nodes[0 if i < 2 else 1].name, phase="Running", unschedulable=False)
        for i, p in enumerate(pods(3))
    ]
    book = PolicyBook({"web": policy(metric, name="web")}, TagNames())
    planner = PendingPodsPlanner(Groups([GROUP]), book, M5Xlarge(), CHAIN)
    view = KubernetesClusterView(
        Cluster(Snapshot(tuple(nodes), tuple(running), ())), pending=planner
    )
    spec = book.policies["web"].spec.metrics[0]
    assert isinstance(spec, PendingPodsMetric)
    reading = view.read(spec, GROUP, NOW)
    assert isinstance(reading, MetricReading)
    return reading


def test_a_when_empty_group_marks_its_underused_node_and_sheds_only_the_empty_one() -> None:
    reading = read("WhenEmpty")
    # the empty node is the one the group may shed, and is timed as unneeded
    assert (reading.candidates, reading.unneeded_nodes, reading.empty_nodes) == (("web-a-2",), 1, 1)
    # the node whose one pod would fit on node 0 is left to empty: marked, not shed
    assert reading.emptying == ("web-a-1",)


def test_a_consolidating_group_drains_that_node_instead() -> None:
    reading = read("WhenEmptyOrUnderutilized")
    # where pods may move, the underused node is a candidate like the empty one
    assert set(reading.candidates) == {"web-a-1", "web-a-2"}
    assert reading.emptying == ()


def test_the_plan_marks_the_nodes_left_to_empty_beside_the_unneeded() -> None:
    said = MetricReading(value=4, at=AT, candidates=("web-1",), emptying=("web-3",))
    assert plan(idle_facts(Chooser(), readings={"jobs": said})).candidates == {"web-1", "web-3"}


def test_no_more_nodes_are_left_to_empty_than_could_then_go() -> None:
    # Given a group of four (idle_facts) at a floor of three, one node unneeded and two
    # left to empty: only the unneeded one could go, so none is left to empty
    said = MetricReading(value=4, at=AT, candidates=("web-1",), emptying=("web-2", "web-3"))
    facts = idle_facts(Chooser(), readings={"jobs": said})
    floored = dataclasses.replace(facts, group=dataclasses.replace(facts.group, min_size=3))
    planned = plan(floored)
    assert planned.decision.desired == 3
    assert planned.candidates == {"web-1"}
