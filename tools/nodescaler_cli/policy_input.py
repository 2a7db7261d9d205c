"""Policy files as the CLI takes them, kubectl's way: several files and folders, a file
named outright may hold several documents separated by `---`, a path that is not there is
named as missing, and a folder without a policy file is refused.

A folder's files hold one policy each, as synth and the functions read a folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from nodescaler.adapters.deployed_policies import POLICY_SUFFIXES, policy_paths
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.parsing import index_by_name, parse_policy
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
                documents.extend(documents_of(file, several=file == given))
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


def documents_of(file: Path, *, several: bool) -> list[Document]:
    """The file's policy, or with `several` each of its `---`-separated documents, each
    named `file (document N)` in its problems."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(file), [f"{file}: (file): cannot be read: {error}"]) from None
    pieces = split_documents(text) if several else [text]
    if len(pieces) == 1:
        return [Document(parse_policy(text, str(file)), text, str(file))]
    problems: list[str] = []
    documents: list[Document] = []
    for number, piece in enumerate(pieces, start=1):
        source = f"{file} (document {number})"
        try:
            documents.append(Document(parse_policy(piece, source), piece.lstrip("\n"), source))
        except PolicyError as error:
            problems.extend(error.problems)
    if problems:
        raise PolicyError(str(file), problems)
    return documents


def split_documents(text: str) -> list[str]:
    """Each non-empty YAML document of `text`, after as many blank lines as come before
    it, so a problem keeps the file's line number; the text whole when it is one document
    or not YAML (whose parser then says where)."""
    try:
        events = list(yaml.parse(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return [text]
    # each document from where the one before it ends: its comments and `---` with it
    ends = [e.end_mark.index for e in events if isinstance(e, yaml.DocumentEndEvent) and e.end_mark]
    pieces = [
        "\n" * text.count("\n", 0, start) + text[start:end]
        for start, end in zip([0, *ends], ends, strict=False)
    ]
    filled = [piece for piece in pieces if yaml.safe_load(piece) is not None]
    return filled if len(filled) > 1 else [text]
