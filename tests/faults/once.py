"""A fault file's run, made once a session even when xdist spreads the file's tests over
its workers: each worker would otherwise make its own 30-60 s run for the tests it got."""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[], T]) -> T:
    """`make()`'s result: under xdist, the first worker to ask makes it and leaves it pickled
    in the session's own temporary root (the workers' common parent: a new one each run);
    the others wait on its lock and read it. Without xdist, simply made."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make()
    kept = tmp_path_factory.getbasetemp().parent / f"{name}.pickle"
    with open(f"{kept}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.is_file():
            result: T = pickle.loads(kept.read_bytes())
            return result
        made = make()
        kept.write_bytes(pickle.dumps(made))
        return made
