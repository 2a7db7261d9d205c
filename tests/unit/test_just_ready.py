"""A node Ready for seconds has pending pods the scheduler is still to bind: they are
counted onto its free room, as onto a node on its way, not asked a new node for
(`service.pending_pods.JUST_READY`). Past that, a pod still pending there needs a node."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from nodescaler.domain.cluster.snapshot import Pod, Resources, Snapshot
from nodescaler.domain.groups.optin import TagNames
from nodescaler.service.pending_pods import JUST_READY, PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_balance import CHAIN, PENDING, Groups, M5Xlarge, web_node
from tests.unit.test_full_groups import GIB, NOW, web


@pytest.mark.parametrize(
    ("ready_for", "new_nodes"),
    [(timedelta(seconds=5), 0), (JUST_READY, 1), (timedelta(minutes=5), 1), (None, 1)],
)
def test_a_pod_pending_on_a_node_just_ready_waits_for_the_scheduler(
    ready_for: timedelta | None, new_nodes: int
) -> None:
    # (None: its Ready condition says no time: not taken as just Ready)
    # Given a group of two Ready nodes, one full and one Ready `ready_for` with room, and
    # two one-core pods pending since before it was
    group = web(2, 10)
    book = PolicyBook({"web": policy(PENDING, name="web")}, TagNames())
    planner = PendingPodsPlanner(Groups([group]), book, M5Xlarge(), CHAIN)
    full, fresh = web_node(group.name, 0), web_node(group.name, 1)
    full = dataclasses.replace(full, ready_since=NOW - timedelta(hours=1))
    since = None if ready_for is None else NOW - ready_for
    fresh = dataclasses.replace(fresh, ready_since=since)
    busy = Pod("default", "busy", full.name, Resources(3900, GIB, 1))
    pods = [
        Pod("default", f"web-{i}", None, Resources(1000, GIB, 1), unschedulable=True)
        for i in (0, 1)
    ]
    planned = planner.plan(Snapshot((full, fresh), (busy, *pods)), -10, NOW)
    # Then while it is just Ready they are counted onto its room; after, a node is asked
    assert planned.plan.nodes.get(group.name, 0) == new_nodes
    assert len(planned.arriving.get(group.name, ())) == (2 if new_nodes == 0 else 0)
