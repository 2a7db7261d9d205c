"""Each node group's unused reserved capacity, from its launch template and EC2's
capacity reservations, for the `reserved-first` expander.

A launch template targets reservations through its CapacityReservationSpecification: a
reservation by id (a Capacity Block too: InstanceMarketOptions MarketType
"capacity-block" with the block's id), or, with the preference "open" or
"capacity-reservations-only" and no target, any open reservation of its instance type
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html).
The unused room is AvailableInstanceCount of the active ones
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html).
All of it is read once per batch of evaluations (kept `ttl` in the warm container); what
can't be read counts as no room, and says why, never as an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from random import Random
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws.instance_types import TtlCache
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.outside_text import outside
from nodescaler.domain.scale_up.expanders import ReservedRoom
from nodescaler.ports import Clock, NodeGroupDiscovery

OPEN_PREFERENCES = ("open", "capacity-reservations-only")
TEMPLATE_TTL = timedelta(minutes=5)


@dataclass(frozen=True)
class Target:
    """What a launch template's instances launch into: a reservation by id, or any open
    reservation of `instance_type`; `problem` when it can't be told."""

    reservation_id: str = ""
    instance_type: str = ""
    problem: str = ""


def _problem(error: Exception) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or error)
    return type(error).__name__


def target_of(data: Mapping[str, Any]) -> Target | None:
    """LaunchTemplateData's reservation target; None when it launches into none."""
    specification = data.get("CapacityReservationSpecification") or {}
    aimed = specification.get("CapacityReservationTarget") or {}
    capacity_block = (data.get("InstanceMarketOptions") or {}).get("MarketType") == "capacity-block"
    if aimed.get("CapacityReservationId"):
        return Target(reservation_id=outside(aimed["CapacityReservationId"]))
    if aimed.get("CapacityReservationResourceGroupArn"):
        arn = outside(aimed["CapacityReservationResourceGroupArn"])
        return Target(problem=f"the reservations of resource group {arn} are not read")
    if capacity_block:
        return Target(problem="its launch template asks for a Capacity Block but names none")
    if specification.get("CapacityReservationPreference") in OPEN_PREFERENCES:
        if not data.get("InstanceType"):
            return Target(problem="its launch template names no instance type to match")
        return Target(instance_type=outside(data["InstanceType"]))
    return None


def room_of(target: Target, listed: Sequence[Mapping[str, Any]] | str) -> ReservedRoom:
    """The room `target` has among the reservations `listed` (or why the listing failed)."""
    if target.problem:
        return ReservedRoom(why_none=target.problem)
    if isinstance(listed, str):
        return ReservedRoom(why_none=f"capacity reservations could not be read ({listed})")
    if target.reservation_id:
        found = [r for r in listed if r.get("CapacityReservationId") == target.reservation_id]
        if not found:
            return ReservedRoom(why_none=f"reservation {target.reservation_id} does not exist")
        if (state := found[0].get("State")) != "active":
            return ReservedRoom(why_none=f"reservation {target.reservation_id} is {state}")
    else:
        found = [
            r
            for r in listed
            if r.get("InstanceMatchCriteria") == "open"
            and r.get("InstanceType") == target.instance_type
            and r.get("State") == "active"
        ]
        if not found:
            return ReservedRoom(why_none=f"no active open reservation of {target.instance_type}")
    ids = tuple(outside(r.get("CapacityReservationId")) for r in found)
    counts = [r.get("AvailableInstanceCount", 0) for r in found]
    for reservation, count in zip(ids, counts, strict=True):
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            # no room rather than a guess: the group is ranked as one without a reservation
            return ReservedRoom(
                why_none=f"reservation {reservation} says {outside(repr(count))} instances "
                "available, not a count"
            )
    return ReservedRoom(sum(counts), ids)


class Ec2ReservedCapacity:
    """`ReservedRooms` over EC2: the managed groups' launch templates and the account's
    capacity reservations, read at most once per `ttl`."""

    def __init__(
        self,
        ec2: Any,
        node_groups: NodeGroupDiscovery,
        *,
        clock: Clock,
        ttl: timedelta = timedelta(seconds=15),
        rng: Random | None = None,
        on_read: Callable[[Mapping[str, ReservedRoom]], None] = lambda rooms: None,
    ) -> None:
        self._ec2 = ec2
        self._on_read = on_read  # each read's rooms, for their metric
        self._node_groups = node_groups
        rng = rng or Random()
        self._rooms: TtlCache[str, dict[str, ReservedRoom]] = TtlCache(
            clock, ttl, timedelta(0), rng
        )
        # what a launch template targets rarely changes: read once in TEMPLATE_TTL
        self._targets: TtlCache[tuple[str, str], Target | None] = TtlCache(
            clock, TEMPLATE_TTL, timedelta(seconds=30), rng
        )

    def __call__(self, groups: Sequence[str]) -> dict[str, ReservedRoom]:
        rooms = self._rooms.get("all", self._read)
        return {g: rooms[g] for g in groups if g in rooms}

    def _read(self) -> dict[str, ReservedRoom]:
        targets = {}
        for group in self._node_groups.discover():
            if (target := self._target(group)) is not None:
                targets[group.name] = target
        listed = self._list() if targets else []
        rooms = {name: room_of(target, listed) for name, target in targets.items()}
        self._on_read(rooms)
        return rooms

    def _target(self, group: NodeGroup) -> Target | None:
        if group.launch_template is None:
            return None
        key = group.launch_template
        return self._targets.get(key, lambda: self._read_target(*key))

    def _read_target(self, template: str, version: str) -> Target | None:
        by = "LaunchTemplateId" if template.startswith("lt-") else "LaunchTemplateName"
        try:
            described = self._ec2.describe_launch_template_versions(
                **{by: template}, Versions=[version]
            )["LaunchTemplateVersions"]
        except (BotoCoreError, ClientError) as error:
            return Target(problem=f"its launch template could not be read ({_problem(error)})")
        return target_of(described[0].get("LaunchTemplateData") or {}) if described else None

    def _list(self) -> list[dict[str, Any]] | str:
        try:
            pages = self._ec2.get_paginator("describe_capacity_reservations").paginate()
            return [r for page in pages for r in page.get("CapacityReservations", [])]
        except (BotoCoreError, ClientError) as error:
            return _problem(error)
