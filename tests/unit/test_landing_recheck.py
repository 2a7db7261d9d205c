"""Pending pods counted onto a group's coming nodes are looked at again once those nodes
should be Ready (`domain.scaling.plan_recheck`): the count is an estimate of packing, and a
pod the scheduler then finds no room for is no longer new to the fast path, so it would
wait for the tick. The fast path reads those times while pods wait
(`service.fast_path`)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.scale_up.backoff import Provisioning
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.plan import plan
from nodescaler.domain.scaling.plan_recheck import LANDED
from nodescaler.domain.scaling.readings import MetricReading

from tests.unit.test_buffer_recheck import T0, Clock, Times, fast_path
from tests.unit.test_planning import GROUP, NOW, facts

BOOT = timedelta(minutes=5)  # the default until the group's launches are measured
BOOTING = dataclasses.replace(GROUP, in_service=2)  # two of its four nodes on their way


def planned_recheck(
    jobs: float, counted: int | None, asked_ago: timedelta | None, **changes: object
) -> datetime | None:
    """The recheck of a plan that counts `counted` pending pods onto the group's coming
    nodes, its scale-up in flight asked `asked_ago` (None: none)."""
    since = None if asked_ago is None else Provisioning(since=NOW - asked_ago, target=4)
    readings = {
        "jobs": MetricReading(value=jobs, at=NOW),
        "pending-pods": MetricReading(value=0, at=NOW, pending_pods=counted),
    }
    state = GroupState("web", provisioning=since)
    changes = {"group": BOOTING, **changes}
    return plan(facts(state=state, readings=readings, **changes)).state.recheck


def test_pods_counted_onto_nodes_on_their_way_are_looked_at_once_those_are_ready() -> None:
    # Given a scale-up asked a minute ago, and 3 pending pods counted onto its nodes
    # Then the group is looked at again 10 s after its nodes should be Ready
    due = NOW - timedelta(minutes=1) + BOOT + LANDED
    assert planned_recheck(16, 3, timedelta(minutes=1)) == due


def test_a_plan_that_grows_looks_again_a_boot_after_it() -> None:
    # 32 jobs, 4 a node: 4 → 8 now, with pods counted onto the new nodes
    assert planned_recheck(32, 3, None) == NOW + BOOT + LANDED


def test_no_pod_counted_onto_coming_nodes_asks_nothing() -> None:
    assert planned_recheck(16, 0, timedelta(minutes=1)) is None
    assert planned_recheck(16, None, timedelta(minutes=1)) is None


def test_nodes_overdue_or_nothing_in_flight_leave_it_to_the_tick() -> None:
    assert planned_recheck(16, 3, BOOT + LANDED) is None  # due now: the tick stands in
    assert planned_recheck(16, 3, None) is None  # nothing asked: no time to count from


def test_a_group_that_could_buy_nothing_is_not_asked() -> None:
    full = dataclasses.replace(BOOTING, max_size=GROUP.desired)
    assert planned_recheck(16, 3, timedelta(minutes=1), group=full) is None
    assert planned_recheck(16, 3, timedelta(minutes=1), dry_run=True) is None


class Pending:
    """One unschedulable pod, which any group could take (no live node to tell)."""

    def unschedulable_pods(self) -> dict[str, Pod]:
        pod = Pod("default", "p-1", None, Resources(cpu_millis=1000), "Pending", unschedulable=True)
        return {"p-1": pod}

    def nodes(self) -> list[object]:
        return []


def test_while_pods_wait_the_fast_path_reads_every_pending_groups_time() -> None:
    # Given a group without a buffer whose last evaluation asked for a look 2 s ago
    times = Times({"plain": T0 - timedelta(seconds=2)})
    quiet, _ = fast_path(times, Clock())
    quiet.act(quiet.look(quiet.watch()))
    # When no pod waits, only the groups keeping a buffer are read: nothing asked
    assert times.asked == [("web-a", "web-b")]
    # When a pod waits, every pending-pods group's time is read, and the one due asked
    waiting, sent = fast_path(times, Clock())
    waiting.pods = Pending()  # type: ignore[assignment]
    waiting.debounce.asked = {"p-1": frozenset({"web-a", "web-b", "plain"})}  # asked before
    waiting.act(waiting.look(waiting.watch()))
    assert times.asked[-1] == ("web-a", "web-b", "plain")
    assert [(r.node_group, r.cause) for r in sent.requests] == [
        ("plain", "fast path: its last evaluation asked for a look by 08:59:58Z")
    ]
