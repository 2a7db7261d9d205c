"""A node group's size as its provider reports it: the autoscaling function's input besides
the readings, the policy and the history."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupSize:
    """The node group as its provider reports it: desired and in-service counts, its own limits."""

    current: int
    min_size: int = 0
    max_size: int = 2**31 - 1
    ready: int | None = None  # in-service nodes; None means all of `current`
    launched: int | None = None  # instances that exist (launching or running); None: `current`
    protected: int = 0  # instances protected from scale-in: the group can't go below them
    bounds_from: str = ""  # where min_size and max_size come from (an EKS scalingConfig)
