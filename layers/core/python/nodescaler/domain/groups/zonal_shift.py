"""Impaired zones: Amazon Application Recovery Controller's zonal shifts and autoshifts in
force, and what they hold of a node group.

During a zonal shift or autoshift away from a zone, Karpenter stops launching into it and
stops voluntarily disrupting nodes there; nodescaler does the same for a group confined to
it (all of its zones shifted away): no scale-up (its pending pods go to a group elsewhere)
and no voluntary scale-in. A group only partly in the zone keeps both: Auto Scaling
launches into its other zones. When the shifts can't be read, no group can be cleared: a
scale-in is held on that doubt, but a scale-up still goes ahead (a refused read must not
stop capacity from coming).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from nodescaler.domain.scaling.decision import Decision, Limit


@dataclass(frozen=True)
class ZonalShift:
    """One shift away from a zone: an operator's zonal shift (or practice run, or FIS
    experiment), or an AWS autoshift."""

    away_from: str  # the Availability Zone ID, e.g. use1-az1
    name: str  # "zonal shift <id>" or "autoshift"
    expires: datetime | None = None  # None: until AWS ends it (an autoshift)

    def in_force(self, now: datetime) -> bool:
        return self.expires is None or now < self.expires

    def describe(self) -> str:
        until = "" if self.expires is None else f", expires {self.expires:%Y-%m-%d %H:%M:%S}Z"
        return f"{self.name}{until}"


@dataclass(frozen=True)
class ZonalShifts:
    """The shifts in force as read, and each zone name's ID; `unreadable` says why they
    could not be read (then none is known)."""

    shifts: tuple[ZonalShift, ...] = ()
    zone_ids: Mapping[str, str] | None = None  # zone name (us-east-1a) → ID (use1-az1)
    unreadable: str = ""


@dataclass(frozen=True)
class ZoneHold:
    """What the zones hold of a group's scaling, and why."""

    why: str
    scale_up: bool  # confined to shifted zones: no new nodes there
    scale_in: bool  # no voluntary scale-in: in a shifted zone, or can't tell

    def holds(self, change: int) -> bool:
        return (change > 0 and self.scale_up) or (change < 0 and self.scale_in)


def zone_hold(zones: Iterable[str], known: ZonalShifts, now: datetime) -> ZoneHold | None:
    """What the shifts in force hold of a group in `zones` (zone names); None: nothing."""
    names = sorted(set(zones))
    if known.unreadable:
        why = f"zonal shifts could not be read ({known.unreadable}): its zones may be impaired"
        return ZoneHold(why, scale_up=False, scale_in=True)
    if not names:
        return None
    ids = known.zone_ids or {}
    shifted: dict[str, ZonalShift] = {}
    for shift in known.shifts:
        if shift.in_force(now):
            shifted.setdefault(shift.away_from, shift)
    away = {ids.get(name, name): shifted.get(ids.get(name, name)) for name in names}
    said = [f"{zone} ({s.describe()})" for zone, s in away.items() if s is not None]
    if len(said) < len(away):
        return None  # not confined: Auto Scaling launches into its other zones
    if len(said) == 1:
        return ZoneHold(f"its zone {said[0].replace(' (', ' is shifted away (', 1)}", True, True)
    return ZoneHold(f"all its zones are shifted away: {', '.join(said)}", True, True)


def confined(
    groups: Sequence[tuple[str, Iterable[str]]], known: ZonalShifts, now: datetime
) -> dict[str, str]:
    """The groups no scale-up may go to, by name, and why (for the expanders' options)."""
    held = {name: zone_hold(zones, known, now) for name, zones in groups}
    return {name: h.why for name, h in held.items() if h is not None and h.scale_up}


def hold_for_zones(decision: Decision, hold: ZoneHold | None) -> Decision:
    """The decision held at the current size where the zones hold its direction, named as
    a limit; a group outside its bounds still goes back inside them, as with a pause."""
    if hold is None or not hold.holds(decision.change):
        return decision
    if not decision.min_replicas <= decision.current <= decision.max_replicas:
        return decision
    return decision.held(hold.why, Limit.ZONAL_SHIFT)
