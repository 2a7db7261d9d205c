"""Which policy a node group uses: the one rule, read from its tags, for every service.

The dispatcher asks it which groups an alarm or a launch failure concerns, the
evaluator which policy to decide with (or why there is none), the pending-pods planner
which groups answer pending pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import PauseDirection, TagNames, read_opt_in
from nodescaler.domain.policy import NodeGroupPolicy

if TYPE_CHECKING:  # built by the functions' wiring, imported then (cold starts)
    from nodescaler.domain.policy.versions import PolicyVersion
    from nodescaler.service.stored_policies import StoredPolicies


@dataclass(frozen=True)
class PolicyChoice:
    """A group's policy and how it asked to be handled; `policy` None: leave it alone."""

    policy: NodeGroupPolicy | None
    dry_run: bool
    problems: tuple[str, ...] = ()  # what is wrong with its tags or policy name, if anything
    version: PolicyVersion = "deployed"  # the stored version used, or the deployed policy
    paused: PauseDirection | None = None  # what its paused tag holds
    note: str = ""  # why the deployed policy stands in for a stored one, for the decision


@dataclass(frozen=True)
class PolicyBook:
    policies: Mapping[str, NodeGroupPolicy]
    tag_names: TagNames = field(default_factory=TagNames)
    # Deployed documents that can't be used: only the groups that name them are rejected.
    broken: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name → problems
    unnamed: tuple[str, ...] = ()  # problems of documents whose name can't be read
    # Applied with `nodescaler apply`: a valid stored policy goes before the deployed one.
    stored: StoredPolicies | None = None

    def choose(self, group: NodeGroup) -> PolicyChoice:
        """The policy the group's tag names, with every problem found on the way."""
        opt_in = read_opt_in(group.name, group.tags, self.tag_names)
        name, problems = opt_in.policy, opt_in.problems
        if name is None:
            return PolicyChoice(None, opt_in.dry_run, problems)
        deployed = self.policies.get(name)
        note = ""
        if self.stored is not None:
            current = self.stored.current()
            if name in current.stale:
                note = f"{current.stale_note}: the deployed policy {name} is used"
            problems = (*problems, *current.problems)
            stored = current.by_name.get(name)
            if stored is not None and stored.policy is not None:
                return PolicyChoice(
                    stored.policy,
                    opt_in.dry_run,
                    problems,
                    version=stored.version,
                    paused=opt_in.paused,
                )
            if stored is not None:  # never used: the deployed one, if any, stands in
                then = f"the deployed policy {name} is used" if deployed else "not evaluated"
                problems = (*problems, f"node group {group.name}: {stored.problem}; {then}")
        if deployed is None:
            return PolicyChoice(
                None, opt_in.dry_run, (*problems, *self._why_none(group.name, name))
            )
        return PolicyChoice(deployed, opt_in.dry_run, problems, paused=opt_in.paused, note=note)

    def _why_none(self, group: str, name: str) -> tuple[str, ...]:
        said = f"node group {group}: tag {self.tag_names.policy}={name!r}"
        if name in self.broken:
            return (f"{said} names a deployed policy that can't be used", *self.broken[name])
        known = ", ".join(sorted(self.policies)) or "none"
        problem = f"{said} names no deployed policy (deployed: {known})"
        if self.unnamed:  # it may be one of them: say what is wrong with them
            return (f"{problem}; some policy files can't be read", *self.unnamed)
        return (problem,)

    def policy_of(self, group: NodeGroup) -> NodeGroupPolicy | None:
        return self.choose(group).policy

    def takes_pending_pods(self, group: NodeGroup) -> bool:
        """Whether the pending-pods plan may give the group pods: its policy reads them, or
        counts its own (`NodeGroupPolicy.takes_pending_pods`)."""
        policy = self.policy_of(group)
        return policy is not None and policy.takes_pending_pods
