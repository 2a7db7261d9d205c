"""Reads the policy documents deployed with the stack: every `*.yaml`/`*.yml` file of a folder.

Synth and `nodescaler validate` read it strictly (`load_policies`: any problem fails the
whole folder). The functions read it leniently (`read_policies`): a broken file is kept
aside with its problems, so only the groups that name its policy are rejected, by name,
and every other group goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.parsing import declared_name, index_by_name, parse_policy
from nodescaler.errors import PolicyError

POLICY_SUFFIXES = (".yaml", ".yml")


def policy_paths(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise PolicyError(str(folder), [f"{folder}: (folder): no such policy folder"])
    return sorted(p for p in folder.iterdir() if p.suffix in POLICY_SUFFIXES and p.is_file())


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(path), [f"{path}: (file): cannot be read: {error}"]) from None


def load_policy_file(path: Path) -> NodeGroupPolicy:
    return parse_policy(_read(path), str(path))


def load_policies(folder: Path) -> dict[str, NodeGroupPolicy]:
    """Every policy of `folder` by name; all problems of all files are reported together."""
    problems: list[str] = []
    loaded: list[tuple[str, NodeGroupPolicy]] = []
    for path in policy_paths(folder):
        try:
            loaded.append((str(path), load_policy_file(path)))
        except PolicyError as error:
            problems.extend(error.problems)
    if problems:
        raise PolicyError(str(folder), problems)
    return index_by_name(loaded)


@dataclass(frozen=True)
class PolicyFolder:
    """The usable policies by name, and what is wrong with the others."""

    policies: Mapping[str, NodeGroupPolicy] = field(default_factory=dict)
    broken: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name → problems
    unnamed: tuple[str, ...] = ()  # problems of files whose policy name can't be read


def read_policies(folder: Path) -> PolicyFolder:
    """Every policy of `folder` that can be used, and every broken one set aside. A folder
    that is not there is a broken deployment, not a broken file: that raises."""
    paths = policy_paths(folder)
    parsed: list[tuple[str, NodeGroupPolicy]] = []
    broken: dict[str, list[str]] = {}
    unnamed: list[str] = []
    for path in paths:
        try:
            parsed.append((str(path), load_policy_file(path)))
        except PolicyError as error:
            name = declared_name(_read(path)) if path.is_file() else None
            if name is None:
                unnamed.extend(error.problems)
            else:
                broken.setdefault(name, []).extend(error.problems)
    by_name: dict[str, list[tuple[str, NodeGroupPolicy]]] = {}
    for source, policy in parsed:
        by_name.setdefault(policy.name, []).append((source, policy))
    usable: dict[str, NodeGroupPolicy] = {}
    for name, same in by_name.items():
        if len(same) > 1:  # which one is meant can't be told: neither is used
            try:
                index_by_name(same)
            except PolicyError as error:
                broken.setdefault(name, []).extend(error.problems)
        elif name not in broken:  # a broken file declaring the same name: ambiguous too
            usable[name] = same[0][1]
    return PolicyFolder(
        usable, {name: tuple(problems) for name, problems in broken.items()}, tuple(unnamed)
    )
