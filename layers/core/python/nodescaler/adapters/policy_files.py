"""Reads the policy documents deployed with the stack: every `*.yaml`/`*.yml` file of a folder
(the functions' layer, synth, `nodescaler validate`)."""

from __future__ import annotations

from pathlib import Path

from nodescaler.domain.documents import index_by_name, parse_policy
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.errors import PolicyError

POLICY_SUFFIXES = (".yaml", ".yml")


def policy_paths(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise PolicyError(str(folder), [f"{folder}: (folder): no such policy folder"])
    return sorted(p for p in folder.iterdir() if p.suffix in POLICY_SUFFIXES and p.is_file())


def load_policy_file(path: Path) -> NodeGroupPolicy:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(path), [f"{path}: (file): cannot be read: {error}"]) from None
    return parse_policy(text, str(path))


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
