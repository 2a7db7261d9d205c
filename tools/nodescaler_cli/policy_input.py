"""Policy files as the CLI takes them, kubectl's way: several files and folders, a file
named outright may hold several documents separated by `---`, a path that is not there is
named as missing, and a folder without a policy file is refused.

A file may hold several documents separated by `---`, named outright or in a folder, as
synth and the functions read a folder (`nodescaler.domain.policy.parsing.parse_policies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nodescaler.adapters.deployed_policies import POLICY_SUFFIXES, policy_paths
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.parsing import index_by_name, parse_policies
from nodescaler.errors import PolicyError


@dataclass(frozen=True)
class Document:
    """A policy as read: its policy, its document's text, and where it came from."""

    policy: NodeGroupPolicy
    text: str
    source: str


def read_documents(paths: Sequence[Path]) -> list[Document]:
    """Every policy of these files and folders: every problem of every file, and a name
    defined twice, reported together before anything is done with them."""
    problems: list[str] = []
    documents: list[Document] = []
    for given in paths:
        try:
            files = files_in(given)
        except PolicyError as error:
            problems.extend(error.problems)
            continue
        for file in files:
            try:
                documents.extend(documents_of(file))
            except PolicyError as error:
                problems.extend(error.problems)
    if problems:
        raise PolicyError("policies", problems)
    index_by_name((d.source, d.policy) for d in documents)  # a name given twice
    return documents


def files_in(path: Path) -> list[Path]:
    """The file, or a folder's policy files; a path that is not there, or a folder with
    none, is a problem named with the path."""
    if path.is_file():
        return [path]
    if not path.exists():
        raise PolicyError(str(path), [f"{path}: no such file or folder"])
    files = policy_paths(path)
    if not files:
        suffixes = ", ".join(f"*{suffix}" for suffix in POLICY_SUFFIXES)
        raise PolicyError(str(path), [f"{path}: (folder): no policy files ({suffixes}) in it"])
    return files


def documents_of(file: Path) -> list[Document]:
    """Each of the file's `---`-separated documents, each named `file (document N)` in its
    problems when there are several; a folder's files as a file named outright."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(file), [f"{file}: (file): cannot be read: {error}"]) from None
    return [
        Document(policy, piece, source) for source, policy, piece in parse_policies(text, str(file))
    ]
