"""The pending-pods plan: which node group each pending pod's new node comes from. The
expanders' chain chooses among the options (groups that can take some of the pods, with
the nodes they would need); `plan` repeats until every pending pod that fits somewhere
has a group, and says why each other fits none.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from random import Random

from nodescaler.domain.cluster.predicates import NodeTemplate, pack, why_not
from nodescaler.domain.cluster.snapshot import Pod
from nodescaler.domain.scale_up.expanders import (
    BalanceSimilarGroups,
    Expander,
    Option,
    RandomExpander,
    ReservedFirstExpander,
)


@dataclass
class Plan:
    """New nodes per group for the pending pods, and how the expanders got there."""

    nodes: Counter[str] = field(default_factory=Counter)
    pods: dict[str, list[Pod]] = field(default_factory=dict)  # group → the pods it takes
    unplaced: list[Pod] = field(default_factory=list)  # fit no group
    trace: list[str] = field(default_factory=list)
    # Why each unplaced pod fits no group: pod → group → reason (Cluster Autoscaler's
    # NotTriggerScaleUp, in words: "at its maximum size", "nodeSelector ... does not match").
    waiting: dict[str, dict[str, str]] = field(default_factory=dict)
    # The groups each was balanced with, and their new nodes: web-a → {web-b: 3, web-c: 2}.
    balanced: dict[str, Counter[str]] = field(default_factory=dict)
    # What an expander saw of a group, for its decision: "reserved-first: 3 reserved ...".
    notes: dict[str, str] = field(default_factory=dict)
    # Groups no option at all, and why: "its zone use1-az1 is shifted away (...)".
    left_out: dict[str, str] = field(default_factory=dict)

    def balanced_with(self, group: str) -> str:
        """In a decision: 'balanced with web-b +3, web-c +2'; empty if it was not balanced."""
        peers = self.balanced.get(group)
        if not peers:
            return ""
        return "balanced with " + ", ".join(f"{g} +{n}" for g, n in sorted(peers.items()))

    def remarks(self, group: str) -> list[str]:
        """What a decision says of the plan for the group: with whom it was balanced, what
        an expander saw of it ("reserved-first: 3 reserved instances unused (cr-1)")."""
        left_out = "; ".join(f"{g}: {why}" for g, why in sorted(self.left_out.items()))
        said = (
            self.balanced_with(group),
            self.notes.get(group),
            left_out and f"left out {left_out}",
        )
        return [s for s in said if s]

    def why_waiting(self, pod: Pod) -> str:
        """One line: every group, and why the pod does not go there."""
        reasons = self.waiting.get(pod.key, {})
        return "; ".join(f"{group}: {why}" for group, why in sorted(reasons.items())) or (
            "no group reads pending pods"
        )


def seed_of(pods: Sequence[Pod]) -> int:
    """The same pending pods give the same random choices, in every group's evaluation."""
    keys = "\n".join(sorted(p.key for p in pods))
    return int.from_bytes(hashlib.sha256(keys.encode()).digest()[:8], "big")


def choose(
    options: Sequence[Option], chain: Sequence[Expander], rng: Random, trace: list[str]
) -> Option:
    remaining = list(options)
    for expander in chain:
        if len(remaining) == 1:
            break
        try:
            remaining = list(expander.narrow(remaining, rng)) or remaining
        except Exception as error:  # a failing expander must not stop the scale-up
            trace.append(f"expander {expander.name} failed ({error}); the next one decides")
    return remaining[0] if len(remaining) == 1 else RandomExpander().narrow(remaining, rng)[0]


def plan(
    pods: Sequence[Pod],
    templates: Mapping[str, NodeTemplate],
    chain: Sequence[Expander],
    *,
    backed_off: frozenset[str] = frozenset(),
    room: Mapping[str, int] | None = None,
    sizes: Mapping[str, int] | None = None,
    rng: Random | None = None,
    left_out: Mapping[str, str] | None = None,
    full: Mapping[str, str] | None = None,
) -> Plan:
    """Give each pending pod a group: build the options, let the chain choose one, repeat.

    A group backed off, or with no `room` left (at its maximum size, or at a cluster
    limit), is no option: its pods go to the next group the chain prefers, in this same
    plan. An option takes only the pods its room holds; the rest are planned next. With
    `balance` in the chain, the choice is spread over similar groups by their `sizes`
    (desired nodes) and what this plan has given them. A group `left_out` (confined to a
    shifted zone) is no option either, and the plan says why; a group whose room is
    spent says which limit it is (`full`: its maximum size, a cluster limit)."""
    result = Plan(left_out=dict(left_out or {}))
    unavailable = backed_off | frozenset(result.left_out)
    rng = rng or Random(seed_of(pods))
    left = dict(room) if room is not None else {}
    balance = next((e for e in chain if isinstance(e, BalanceSimilarGroups)), None)
    remaining = list(pods)
    while options := _options(remaining, templates, unavailable, left):
        chosen = choose(options, chain, rng, result.trace)
        result.notes.update(_notes(chain, options))
        shares = [chosen]
        if balance is not None:
            planned = {g: (sizes or {}).get(g, 0) + result.nodes[g] for g in templates}
            shares = balance.spread(chosen, options, planned, left)
        _take(result, shares, len(options), left)
        placed = {p.key for s in shares for p in s.pods}
        remaining = [p for p in remaining if p.key not in placed]
    result.unplaced = remaining
    result.waiting = {
        pod.key: {
            group: result.left_out.get(group)
            or _why_not_here(pod, templates[group], group in backed_off, (full or {}).get(group))
            for group in sorted(templates)
        }
        for pod in remaining
    }
    return result


def _options(
    pods: Sequence[Pod],
    templates: Mapping[str, NodeTemplate],
    backed_off: frozenset[str],
    left: Mapping[str, int],
) -> list[Option]:
    """Each group that may grow and fits some of the pods, with the nodes and pods it
    would take (no more than its room holds); none once no group can take any."""
    options = []
    for group in sorted(templates):
        if group in backed_off or left.get(group, 1) <= 0:
            continue
        template = templates[group]
        fitting = tuple(p for p in pods if why_not(p, template) is None)
        if fitting:
            count, taken = pack(fitting, template, left.get(group))
            options.append(Option(group, count, taken, template))
    return options


def _notes(chain: Sequence[Expander], options: Sequence[Option]) -> dict[str, str]:
    """The options' notes from the expanders that keep some (`reserved-first`)."""
    found: dict[str, str] = {}
    for expander in chain:
        if isinstance(expander, ReservedFirstExpander):
            try:
                found.update(expander.notes([o.group for o in options]))
            except Exception:  # a note is never a reason to stop the plan
                continue
    return found


def _take(result: Plan, shares: Sequence[Option], options: int, left: dict[str, int]) -> None:
    """Add the chosen shares to the plan, out of their groups' room."""
    for share in shares:
        result.nodes[share.group] += share.node_count
        result.pods.setdefault(share.group, []).extend(share.pods)
        if share.group in left:
            left[share.group] -= share.node_count
        if len(shares) > 1:
            peers = result.balanced.setdefault(share.group, Counter())
            peers.update({o.group: o.node_count for o in shares if o is not share})
        result.trace.append(
            f"{share.group}: +{share.node_count} for {len(share.pods)} pods "
            f"(of {options} options"
            + (f", balanced with {len(shares) - 1} similar groups)" if len(shares) > 1 else ")")
        )


def _why_not_here(pod: Pod, template: NodeTemplate, backed_off: bool, full: str | None) -> str:
    if (why := why_not(pod, template)) is not None:
        return why
    if backed_off:
        return "backed off after a failed scale-up"
    # it fits, but there is no room: which limit, where the planner said
    return full or "at its maximum size or the cluster's limit"
