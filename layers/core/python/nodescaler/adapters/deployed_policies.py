"""Reads the policy documents deployed with the stack: every `*.yaml`/`*.yml` file of a folder,
each holding one policy or several documents separated by `---`.

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
from nodescaler.domain.policy.parsing import (
    declared_name,
    documents,
    index_by_name,
    parse_policies,
    parse_policy,
)
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


def load_policy_file(path: Path) -> list[tuple[str, NodeGroupPolicy]]:
    """The file's policies, each with its source (`file (document N)` for several)."""
    return [(source, policy) for source, policy, _ in parse_policies(_read(path), str(path))]


def load_policies(folder: Path) -> dict[str, NodeGroupPolicy]:
    """Every policy of `folder` by name; all problems of all files are reported together."""
    problems: list[str] = []
    loaded: list[tuple[str, NodeGroupPolicy]] = []
    for path in policy_paths(folder):
        try:
            loaded.extend(load_policy_file(path))
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


def _read_one(
    source: str,
    piece: str,
    parsed: list[tuple[str, NodeGroupPolicy]],
    broken: dict[str, list[str]],
    unnamed: list[str],
) -> None:
    """One document: its policy into `parsed`, else its problems under the name it declares
    (`broken`), or `unnamed` when even that can't be read."""
    try:
        parsed.append((source, parse_policy(piece, source)))
    except PolicyError as error:
        name = declared_name(piece)
        if name is None:
            unnamed.extend(error.problems)
        else:
            broken.setdefault(name, []).extend(error.problems)


def read_policies(folder: Path) -> PolicyFolder:
    """Every policy of `folder` that can be used, and every broken one set aside. A folder
    that is not there is a broken deployment, not a broken file: that raises."""
    parsed: list[tuple[str, NodeGroupPolicy]] = []
    broken: dict[str, list[str]] = {}
    unnamed: list[str] = []
    for path in policy_paths(folder):
        try:
            pieces = documents(_read(path), str(path))
        except PolicyError as error:
            unnamed.extend(error.problems)
            continue
        for source, piece in pieces:  # a broken document sets aside its own policy alone
            _read_one(source, piece, parsed, broken, unnamed)
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
