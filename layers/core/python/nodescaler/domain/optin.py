"""Opt-in by tags: which node groups nodescaler manages, with which policy, and how.

A group is managed if and only if it carries the opt-in tag set to "true" (and the
cluster tag, when a cluster is configured). Everything else about it is read from its
other tags here, with a problem that names the group and the tag for each bad value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class OptIn:
    """How a managed group asked to be handled. `problems` non-empty means: report, don't act."""

    group: str
    policy: str | None
    dry_run: bool
    problems: tuple[str, ...] = field(default=())


def _flag(value: str | None) -> bool | None:
    if value is None:
        return False
    return {"true": True, "false": False}.get(value.strip().lower())


def is_managed(tags: Mapping[str, str], names: TagNames, cluster: str) -> bool:
    """Opted in: the enabled tag says true (and the cluster tag matches, if a cluster is set).

    The same rule as the IAM conditions on every write (StringEqualsIgnoreCase "true",
    StringEquals the cluster): any case, nothing around it. " true" is not opted in here
    either, so nodescaler never decides for a group it would not be allowed to resize."""
    if (tags.get(names.enabled) or "").lower() != "true":
        return False
    return not cluster or tags.get(names.cluster) == cluster


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
    return OptIn(group=group, policy=policy, dry_run=dry_run, problems=tuple(problems))
