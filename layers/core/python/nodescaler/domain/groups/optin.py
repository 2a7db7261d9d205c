"""Opt-in by tags: which node groups nodescaler manages, with which policy, and how.

A group is managed if and only if it carries the opt-in tag set to "true", and its cluster
tag names the deployment's cluster (or, for a deployment of no cluster, names none); and
it is resized only if the deployment's allow-list, when there is one, names it. Everything
else about it is read from its other tags here, with a problem that names the group and
the tag for each bad value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

# A DNS label, like Kubernetes object names: it must also be a valid ASG tag value. Defined
# here, not with the policy models, so reading tags loads no pydantic (dispatch's cold start).
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_POLICY_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class TagNames:
    enabled: str = "nodescaler/enabled"
    policy: str = "nodescaler/policy"
    cluster: str = "nodescaler/cluster"
    dry_run: str = "nodescaler/dry-run"
    paused: str = "nodescaler/paused"


class PauseDirection(StrEnum):
    """Which way a pause holds a group (KEDA's paused, paused-scale-in, paused-scale-out)."""

    BOTH = "both"
    SCALE_IN = "scale-in"
    SCALE_OUT = "scale-out"

    def holds(self, change: int) -> bool:
        """Whether a change of this many nodes is one this pause holds."""
        if change == 0:
            return False
        return self is PauseDirection.BOTH or (self is PauseDirection.SCALE_IN) == (change < 0)


# The paused tag's values; "false" (or no tag) pauses nothing.
PAUSED_TAG_VALUES: dict[str, PauseDirection | None] = {
    "true": PauseDirection.BOTH,
    "scale-in": PauseDirection.SCALE_IN,
    "scale-out": PauseDirection.SCALE_OUT,
    "false": None,
}


@dataclass(frozen=True)
class OptIn:
    """How a managed group asked to be handled. `problems` non-empty means: report, don't act."""

    group: str
    policy: str | None
    dry_run: bool
    problems: tuple[str, ...] = field(default=())
    paused: PauseDirection | None = None  # what the paused tag holds


def _flag(value: str | None) -> bool | None:
    if value is None:
        return False
    return {"true": True, "false": False}.get(value.strip().lower())


def is_managed(tags: Mapping[str, str], names: TagNames, cluster: str) -> bool:
    """Opted in for this deployment: the enabled tag says true, and the cluster tag names
    `cluster`, or (a deployment of no cluster, `allGroups`) is absent: a group whose
    cluster tag names a cluster is that cluster's deployment's, never another's.

    The same rule as the IAM conditions on every write (StringEqualsIgnoreCase "true",
    StringEquals the cluster, or Null the cluster tag): any case, nothing around it. " true"
    is not opted in here either, so nodescaler never decides for a group it would not be
    allowed to resize."""
    if (tags.get(names.enabled) or "").lower() != "true":
        return False
    if cluster:
        return tags.get(names.cluster) == cluster
    return names.cluster not in tags


@dataclass(frozen=True)
class AllowedGroups:
    """cdk.json's `allowedGroups`: the groups this deployment may resize, each a name or a
    prefix ending in `*` (as an IAM resource ARN reads it); `*` alone, or none given (a
    function's default; synth requires the setting), every group."""

    entries: tuple[str, ...] = ()

    def allows(self, group: str) -> bool:
        return not self.entries or any(
            group.startswith(entry[:-1]) if entry.endswith("*") else group == entry
            for entry in self.entries
        )

    def refusal(self, group: str) -> str:
        return (
            f"node group {group}: opted in, but not in allowedGroups "
            f"({', '.join(self.entries)}); it is never resized"
        )


def read_opt_in(group: str, tags: Mapping[str, str], names: TagNames) -> OptIn:
    problems = []
    policy: str | None = (tags.get(names.policy) or "").strip()
    if not policy:
        problems.append(f"node group {group}: tag {names.policy} is missing or empty")
        policy = None
    elif not _POLICY_NAME.match(policy):
        problems.append(
            f"node group {group}: tag {names.policy}={policy!r} is not a policy name "
            "(lowercase letters, digits and '-')"
        )
        policy = None
    dry_run = _flag(tags.get(names.dry_run))
    if dry_run is None:
        problems.append(
            f"node group {group}: tag {names.dry_run}={tags.get(names.dry_run)!r} "
            "must be true or false; treating the group as dry-run"
        )
        dry_run = True  # the safe reading of a value we can't read
    paused, problem = _paused(group, names.paused, tags.get(names.paused))
    problems.extend([problem] if problem else [])
    return OptIn(
        group=group, policy=policy, dry_run=dry_run, problems=tuple(problems), paused=paused
    )


def _paused(group: str, tag: str, value: str | None) -> tuple[PauseDirection | None, str]:
    """The direction the paused tag asks for, and the problem with its value if any. A value
    nobody can read pauses both ways, as an unreadable dry-run tag means dry-run: whoever
    set it meant to pause something, and holding the size (inside its bounds) resizes
    nothing by surprise; the problem says so on the group until the tag is fixed."""
    if value is None:
        return None, ""
    key = value.strip().lower()
    if key in PAUSED_TAG_VALUES:
        return PAUSED_TAG_VALUES[key], ""
    problem = (
        f"node group {group}: tag {tag}={value!r} must be true, scale-in, scale-out or "
        "false; treating the group as paused both ways"
    )
    return PauseDirection.BOTH, problem
