"""Which node group grows when pending pods fit several: the expanders, chained.

As in Cluster Autoscaler, each expander narrows the options (groups that can take some
pending pods, with the new nodes they would need); the next one decides among what is
left, and a seeded random pick ends any tie. An expander that fails (a custom one that
errs, answers nonsense or runs out of time) is skipped: the next in the chain decides.
`reserved-first` keeps the groups whose capacity reservations (On-Demand Capacity
Reservations, Capacity Blocks: paid for whether used or not) have room for the nodes.
`balance`, last in the chain, chooses nothing: it spreads the chosen option's nodes over
the groups similar to its group (`nodescaler.domain.scale_up.balance`), as Cluster Autoscaler
balances after its expander's choice. The chain's choices make the pending-pods plan
(`nodescaler.domain.scale_up.pending_pods_plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from random import Random
from typing import Protocol

from nodescaler.domain.cluster.predicates import NodeTemplate, pack, why_not
from nodescaler.domain.cluster.snapshot import Pod
from nodescaler.domain.groups.name_patterns import matches
from nodescaler.domain.scale_up.balance import IGNORED_LABELS, even_split, similar
from nodescaler.errors import ExpanderError


@dataclass(frozen=True)
class Option:
    group: str
    node_count: int
    pods: tuple[Pod, ...]
    template: NodeTemplate

    @property
    def waste(self) -> float:
        """Cluster Autoscaler's least-waste score: unused CPU share plus unused memory share
        of the new nodes."""
        have = self.template.allocatable
        cpu = self.node_count * have.cpu_millis
        memory = self.node_count * have.memory_bytes
        used_cpu = sum(p.requests.cpu_millis for p in self.pods)
        used_memory = sum(p.requests.memory_bytes for p in self.pods)
        return (cpu - used_cpu) / max(cpu, 1) + (memory - used_memory) / max(memory, 1)


class Expander(Protocol):
    @property
    def name(self) -> str: ...

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        """The options it prefers (at least one, all of them if it has no opinion)."""
        ...


@dataclass(frozen=True)
class RandomExpander:
    name: str = "random"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        return [rng.choice(sorted(options, key=lambda o: o.group))]


@dataclass(frozen=True)
class MostPodsExpander:
    name: str = "most-pods"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        most = max(len(o.pods) for o in options)
        return [o for o in options if len(o.pods) == most]


@dataclass(frozen=True)
class LeastWasteExpander:
    name: str = "least-waste"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        least = min(o.waste for o in options)
        return [o for o in options if o.waste <= least + 1e-9]


def _matching(options: Sequence[Option], patterns: Sequence[str]) -> list[Option]:
    return [o for o in options if any(matches(p, o.group) for p in patterns)]


@dataclass(frozen=True)
class PriorityExpander:
    """priority → group-name patterns; the highest priority with a matching option wins."""

    priorities: Mapping[int, Sequence[str]]
    name: str = "priority"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        for priority in sorted(self.priorities, reverse=True):
            if matched := _matching(options, self.priorities[priority]):
                return matched
        return options


@dataclass(frozen=True)
class WeightedPriorityExpander:
    """Airbnb's example: tiers as in `priority`, and within a tier, patterns with weights
    (two groups at 80 and 20 grow 80 % and 20 % of the time)."""

    tiers: Mapping[int, Mapping[str, float]]
    name: str = "weighted-priority"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        for priority in sorted(self.tiers, reverse=True):
            weights = self.tiers[priority]
            weighted = [
                (o, max((w for p, w in weights.items() if matches(p, o.group)), default=0.0))
                for o in sorted(options, key=lambda o: o.group)
            ]
            weighted = [(o, w) for o, w in weighted if w > 0]
            if weighted:
                chosen = rng.choices([o for o, _ in weighted], [w for _, w in weighted])
                return chosen
        return options


@dataclass(frozen=True)
class ReservedRoom:
    """A group's reserved capacity no instance runs in: what its launch template's
    reservations still hold (AvailableInstanceCount of the active ones). None is counted
    when they can't be read, and `why_none` says why."""

    unused: int = 0
    reservations: tuple[str, ...] = ()  # their ids
    why_none: str = ""  # a reservation that does not exist, one that can't be read, ...

    def describe(self) -> str:
        if self.why_none:
            return f"no reserved room: {self.why_none}"
        return f"{self.unused} reserved instances unused ({', '.join(self.reservations)})"


# Group names → the reserved room of those whose launch template targets a reservation.
ReservedRooms = Callable[[Sequence[str]], Mapping[str, ReservedRoom]]


@dataclass(frozen=True)
class ReservedFirstExpander:
    """Reserved capacity first (before price or waste), as Karpenter prefers it: the options
    whose group's unused reservations hold all the nodes they would add, else the one(s)
    with the most unused; no opinion when no group has any."""

    rooms: ReservedRooms
    name: str = "reserved-first"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        rooms = self.rooms([o.group for o in options])
        free = {o.group: rooms.get(o.group, ReservedRoom()).unused for o in options}
        if room_for_all := [o for o in options if free[o.group] >= o.node_count]:
            return room_for_all
        most = max(free.values())
        return [o for o in options if free[o.group] == most] if most > 0 else options

    def notes(self, groups: Sequence[str]) -> dict[str, str]:
        """For a decision: each group's reserved room, or why it counts none."""
        return {g: f"{self.name}: {r.describe()}" for g, r in self.rooms(groups).items()}


CustomChoice = Callable[[Sequence[Option]], Sequence[str]]


@dataclass(frozen=True)
class CustomExpander:
    """Asks an outside service (a Lambda, in AWS) which groups to keep."""

    choose: CustomChoice
    name: str = "custom"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        chosen = set(self.choose(options))
        kept = [o for o in options if o.group in chosen]
        if not kept:
            raise ExpanderError(f"custom expander chose none of the options: {sorted(chosen)}")
        return kept


@dataclass(frozen=True)
class BalanceSimilarGroups:
    """Cluster Autoscaler's --balance-similar-node-groups, as the chain's last step: the
    chosen option's nodes are split over the options of similar groups (backed-off groups
    and those with no room are no option) that take all of its pods, the smallest group
    first, so their sizes stay within one of each other."""

    ignored_labels: frozenset[str] = IGNORED_LABELS
    name: str = "balance"

    def narrow(self, options: Sequence[Option], rng: Random) -> Sequence[Option]:
        return options  # it chooses nothing: it spreads the choice (`spread`)

    def spread(
        self,
        chosen: Option,
        options: Sequence[Option],
        sizes: Mapping[str, int],
        room: Mapping[str, int],
    ) -> list[Option]:
        """The chosen option split over its similar groups: each with the nodes its share
        holds of the pods (a pod a slightly smaller node can't hold is planned next).
        `sizes`: each group's nodes, upcoming and already planned included; `room`: how
        many more each may add (absent: no limit)."""
        peers = [chosen] + [
            o
            for o in options
            if o.group != chosen.group
            and similar(chosen.template, o.template, self.ignored_labels)
            and all(why_not(p, o.template) is None for p in chosen.pods)
        ]
        if len(peers) == 1:
            return [chosen]
        shares = even_split(
            chosen.node_count,
            {o.group: sizes.get(o.group, 0) for o in peers},
            {o.group: room.get(o.group) for o in peers},
            first=chosen.group,
        )
        left = list(chosen.pods)
        spread = []
        for option in sorted(peers, key=lambda o: (-shares[o.group], o.group)):
            if not shares[option.group]:
                continue  # as Cluster Autoscaler, only the groups that grow are told
            count, taken = pack(left, option.template, shares[option.group])
            spread.append(Option(option.group, count, taken, option.template))
            placed = {p.key for p in taken}
            left = [p for p in left if p.key not in placed]
        return spread
