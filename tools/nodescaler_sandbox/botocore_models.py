"""botocore's service models read once a process, not once a session.

Each botocore session makes its own loader, which reads and parses the JSON model of every
service it makes a client of (EC2's alone is megabytes) and the endpoint rules; moto starts
each mock with a new default session, and the sandbox's functions make theirs per
invocation, so the same files were parsed again and again (a second of a short test's time).
One loader shared by every session reads each once: botocore already shares a loaded model
among all the clients of a session, read-only, so sharing it among sessions changes nothing
a client does. Each boto3 session adds its data folder to its loader's search paths: on the
shared one, a folder already there is not added again (or the list, walked by every lookup
of a file that is not there, would grow a session at a time). Never shipped: the functions'
one session a container reads each once anyway.
"""

from __future__ import annotations

import functools
from typing import Any

import botocore.loaders
import botocore.session


def loaded_once() -> None:
    """Every botocore session made from now on in this process shares one loader a data
    path (idempotent)."""
    if getattr(botocore.session.create_loader, "shared", False):
        return
    make = botocore.loaders.create_loader

    @functools.cache
    def create_loader(search_path_string: str | None = None) -> Any:
        loader = make(search_path_string)
        loader._search_paths = _Paths(loader.search_paths)
        return loader

    create_loader.shared = True  # type: ignore[attr-defined]
    botocore.session.create_loader = create_loader


class _Paths(list[str]):
    """A search path list that takes each folder once."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)

    def insert(self, index: Any, path: str) -> None:
        if path not in self:
            super().insert(index, path)
