"""Opt-in by tags: managed iff tagged, and every bad tag value named with its group."""

from __future__ import annotations

import pytest
from nodescaler.domain.groups.optin import AllowedGroups, OptIn, TagNames, is_managed, read_opt_in

NAMES = TagNames()


@pytest.mark.parametrize(
    ("tags", "cluster", "managed"),
    [
        ({"nodescaler/enabled": "true"}, "", True),
        ({"nodescaler/enabled": "TRUE"}, "", True),
        # IAM's condition (StringEqualsIgnoreCase "true") would refuse every write to it
        ({"nodescaler/enabled": "True "}, "", False),
        ({"nodescaler/enabled": " true"}, "", False),
        ({"nodescaler/enabled": "false"}, "", False),
        ({"nodescaler/enabled": "yes"}, "", False),
        ({}, "", False),
        ({"nodescaler/enabled": "true"}, "prod", False),
        ({"nodescaler/enabled": "true", "nodescaler/cluster": "prod"}, "prod", True),
        ({"nodescaler/enabled": "true", "nodescaler/cluster": "dev"}, "prod", False),
        # no cluster (allGroups): a group naming one, even empty, is another deployment's
        ({"nodescaler/enabled": "true", "nodescaler/cluster": "prod"}, "", False),
        ({"nodescaler/enabled": "true", "nodescaler/cluster": ""}, "", False),
    ],
)
def test_managed_iff_opted_in_for_this_cluster(
    tags: dict[str, str], cluster: str, managed: bool
) -> None:
    assert is_managed(tags, NAMES, cluster) is managed


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({"nodescaler/policy": "batch"}, OptIn("ng-1", "batch", dry_run=False)),
        (
            {"nodescaler/policy": "batch", "nodescaler/dry-run": "TRUE"},
            OptIn("ng-1", "batch", dry_run=True),
        ),
        (
            {},
            OptIn(
                "ng-1",
                None,
                dry_run=False,
                problems=("node group ng-1: tag nodescaler/policy is missing or empty",),
            ),
        ),
        (
            {"nodescaler/policy": "Batch Jobs"},
            OptIn(
                "ng-1",
                None,
                dry_run=False,
                problems=(
                    "node group ng-1: tag nodescaler/policy='Batch Jobs' is not a policy name (lowercase letters, digits and '-')",
                ),
            ),
        ),
        (
            {"nodescaler/policy": "batch", "nodescaler/dry-run": "maybe"},
            OptIn(
                "ng-1",
                "batch",
                dry_run=True,
                problems=(
                    "node group ng-1: tag nodescaler/dry-run='maybe' must be true or false; treating the group as dry-run",
                ),
            ),
        ),
    ],
)
def test_reading_the_opt_in_tags(tags: dict[str, str], expected: OptIn) -> None:
    assert read_opt_in("ng-1", tags, NAMES) == expected


@pytest.mark.parametrize(
    ("entries", "group", "allowed"),
    [
        ((), "anything", True),  # no list: every group
        (("gpu-a",), "gpu-a", True),
        (("gpu-a",), "gpu-ab", False),  # a name is the whole name
        (("gpu-a",), "x-gpu-a", False),
        (("prod-web-*",), "prod-web-1", True),  # `*` at the end: a prefix, as in an IAM ARN
        (("prod-web-*",), "prod-web-", True),
        (("prod-web-*",), "staging-prod-web-1", False),
        (("prod-web-*", "gpu-a"), "gpu-a", True),
    ],
)
def test_given_an_allow_list_then_a_group_is_allowed_iff_named_or_prefixed(
    entries: tuple[str, ...], group: str, allowed: bool
) -> None:
    assert AllowedGroups(entries).allows(group) is allowed


# Opt-in at its edges: a dry-run tag's spelling, and an allowed prefix's star.


def test_a_dry_run_tag_of_false_acts_without_a_problem() -> None:
    tags = {"nodescaler/policy": "web", "nodescaler/dry-run": "False"}
    opt_in = read_opt_in("ng-1", tags, TagNames())
    assert (opt_in.dry_run, opt_in.problems) == (False, ())


def test_an_allowed_prefix_is_the_whole_text_before_its_star() -> None:
    allowed = AllowedGroups(("web-*", "batch"))
    assert [allowed.allows(g) for g in ("web-1", "webapp", "w", "batch", "batch-2")] == [
        True,
        False,
        False,
        True,
        False,
    ]
    assert allowed.refusal("api") == (
        "node group api: opted in, but not in allowedGroups (web-*, batch); it is never resized"
    )
