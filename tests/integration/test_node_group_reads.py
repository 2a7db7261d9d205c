"""AsgNodeGroups' reads within one evaluate invocation: the opted-in groups read once and
served to every discover and get of the invocation until it writes to a group; never from
one invocation to the next, nor without an invocation started."""

from __future__ import annotations

from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.deadline import Deadline
from nodescaler.domain.groups.optin import TagNames

from tests.aws import CallCounter, client, make_asg

OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}
DESCRIBE = "DescribeAutoScalingGroups"


def node_groups(calls: CallCounter, deadline: Deadline | None) -> AsgNodeGroups:
    autoscaling = calls.watch(client("autoscaling"))
    return AsgNodeGroups(autoscaling, client("eks"), tag_names=TagNames(), invocation=deadline)


def two_groups_in_an_invocation(calls: CallCounter) -> AsgNodeGroups:
    """Groups a (1 node) and b (2), read within an evaluate invocation just started."""
    make_asg("a", tags=OPTED_IN, desired=1)
    make_asg("b", tags=OPTED_IN, desired=2)
    deadline = Deadline()
    groups = node_groups(calls, deadline)
    deadline.start(60_000)
    return groups


def resized_outside(name: str, desired: int) -> None:
    """Another writer (an operator, Auto Scaling itself) changes the group."""
    client("autoscaling").set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=desired)


def test_an_invocation_reads_the_groups_once_for_its_discovery_and_each_group_it_gets(
    calls: CallCounter,
) -> None:
    groups = two_groups_in_an_invocation(calls)
    got = groups.get("a"), groups.discover(), groups.get("b"), groups.get("a")
    assert calls.calls[DESCRIBE] == 1
    # and what it serves is what a fresh read gives
    fresh = AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames())
    assert got == (fresh.get("a"), fresh.discover(), fresh.get("b"), fresh.get("a"))


def test_a_write_within_the_invocation_has_the_next_read_made_afresh(
    calls: CallCounter,
) -> None:
    groups = two_groups_in_an_invocation(calls)
    a = groups.get("a")
    assert a is not None
    groups.set_desired(a, 3)
    resized_outside("b", 4)  # seen too: the read after the write is a new one
    assert [(g.name, g.desired) for g in groups.discover()] == [("a", 3), ("b", 4)]
    assert calls.calls[DESCRIBE] == 2
    for write in (
        lambda g: groups.protect(g, frozenset(g.instance_ids), True),
        lambda g: groups.remove_instances(g, sorted(g.instance_ids)[:1]),
        lambda g: groups.size_warm_pool(g, 1),
    ):
        before = calls.calls[DESCRIBE]
        write(groups.get("a"))
        groups.get("a")
        assert calls.calls[DESCRIBE] == before + 1, write
    assert groups.get("a").protected_ids  # type: ignore[union-attr]


def test_a_new_invocation_never_gets_the_last_ones_read(calls: CallCounter) -> None:
    make_asg("a", tags=OPTED_IN, desired=1)
    deadline = Deadline()
    groups = node_groups(calls, deadline)
    deadline.start(60_000)
    assert groups.get("a").desired == 1  # type: ignore[union-attr]
    resized_outside("a", 5)  # between the two invocations
    deadline.start(60_000)
    assert groups.get("a").desired == 5  # type: ignore[union-attr]
    assert [g.desired for g in groups.discover()] == [5]
    assert calls.calls[DESCRIBE] == 2


def test_without_an_invocation_started_every_read_is_made_afresh(calls: CallCounter) -> None:
    make_asg("a", tags=OPTED_IN, desired=1)
    for deadline in (None, Deadline()):  # a tool's or a test's: no invocation
        groups = node_groups(calls, deadline)
        before = calls.calls[DESCRIBE]
        assert groups.get("a").desired == 1  # type: ignore[union-attr]
        resized_outside("a", 2)
        assert groups.get("a").desired == 2  # type: ignore[union-attr]
        assert [g.desired for g in groups.discover()] == [2]
        assert calls.calls[DESCRIBE] == before + 3
        resized_outside("a", 1)


def test_a_group_not_opted_in_is_read_by_its_name_within_an_invocation(
    calls: CallCounter,
) -> None:
    make_asg("a", tags=OPTED_IN, desired=1)
    make_asg("untagged", desired=2)
    deadline = Deadline()
    groups = node_groups(calls, deadline)
    deadline.start(60_000)
    untagged = groups.get("untagged")
    assert untagged is not None and (untagged.name, untagged.desired) == ("untagged", 2)
    assert groups.get("nope") is None
    assert calls.calls[DESCRIBE] == 3  # the opted-in groups once, then each by its name
