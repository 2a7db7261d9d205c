"""Which policy a node group uses: the one rule, read from its tags, for every service.

The dispatcher asks it which groups an alarm or a launch failure concerns, the
evaluator which policy to decide with (or why there is none), the pending-pods planner
which groups answer pending pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nodescaler.domain.node_group import NodeGroup
from nodescaler.domain.optin import TagNames, read_opt_in
from nodescaler.domain.policy import NodeGroupPolicy


@dataclass(frozen=True)
class PolicyChoice:
    """A group's policy and how it asked to be handled; `policy` None: leave it alone."""

    policy: NodeGroupPolicy | None
    dry_run: bool
    problems: tuple[str, ...] = ()  # what is wrong with its tags or policy name, if anything


@dataclass(frozen=True)
class PolicyBook:
    policies: Mapping[str, NodeGroupPolicy]
    tag_names: TagNames = field(default_factory=TagNames)

    def choose(self, group: NodeGroup) -> PolicyChoice:
        """The policy the group's tag names, with every problem found on the way."""
        opt_in = read_opt_in(group.name, group.tags, self.tag_names)
        if opt_in.policy is None:
            return PolicyChoice(None, opt_in.dry_run, opt_in.problems)
        policy = self.policies.get(opt_in.policy)
        if policy is None:
            known = ", ".join(sorted(self.policies)) or "none"
            problem = (
                f"node group {group.name}: tag {self.tag_names.policy}={opt_in.policy!r} names "
                f"no deployed policy (deployed: {known})"
            )
            return PolicyChoice(None, opt_in.dry_run, (*opt_in.problems, problem))
        return PolicyChoice(policy, opt_in.dry_run, opt_in.problems)

    def policy_of(self, group: NodeGroup) -> NodeGroupPolicy | None:
        return self.choose(group).policy

    def reads_pending_pods(self, group: NodeGroup) -> bool:
        policy = self.policy_of(group)
        return policy is not None and policy.reads_pending_pods
