"""The baseline's scale-up rules: its backoff, how it ranks groups, and its first-fit
packing of pending pods on new nodes (`baseline` runs them)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from nodescaler_sandbox.baseline_flags import BACKOFF_RESET, INITIAL_BACKOFF, MAX_BACKOFF
from nodescaler_sandbox.cluster import Room, apart_keys, requests


@dataclass
class Backoff:
    """Cluster Autoscaler's exponential node-group backoff (utils/backoff,
    exponential_backoff.go): the first failure backs a group off for `initial`; a failure
    after that backoff ended doubles it, up to `longest`; failures while it lasts do not;
    `reset` after its last failure the group starts again from `initial`."""

    initial: timedelta = INITIAL_BACKOFF
    longest: timedelta = MAX_BACKOFF
    reset: timedelta = BACKOFF_RESET
    # group → (duration, until, last failure)
    groups: dict[str, tuple[timedelta, datetime, datetime]] = field(default_factory=dict)

    def fail(self, group: str, now: datetime) -> datetime:
        """A failed scale-up of `group`: until when it is backed off."""
        duration = self.initial
        if group in self.groups:
            last, until, _ = self.groups[group]
            duration = min(2 * last, self.longest) if until < now else last
        self.groups[group] = (duration, now + duration, now)
        return now + duration

    def active(self, group: str, now: datetime) -> bool:
        return group in self.groups and self.groups[group][1] > now

    def forget_stale(self, now: datetime) -> None:
        """RemoveStaleBackoffData: groups whose last failure is `reset` old start afresh."""
        self.groups = {g: b for g, b in self.groups.items() if b[2] + self.reset >= now}

    def succeeded(self, group: str) -> None:
        """A scale-up of the group completed: its backoff is removed (RemoveBackoff)."""
        self.groups.pop(group, None)


def launch_failed_since(activities: list[dict[str, Any]], since: datetime) -> bool:
    """Whether a scaling activity listed (newest first) since `since` failed, as the AWS
    provider's isNodeGroupAvailable reads them: it stops at the first one older."""
    for activity in activities:
        if activity["StartTime"] < since:
            return False
        if activity["StatusCode"] == "Failed":
            return True
    return False


def rank(group: str, ranked: list[list[str]]) -> int:
    """The index of the first tier with a pattern matching the group (last: none)."""
    matching = (
        i for i, patterns in enumerate(ranked) if any(re.fullmatch(p, group) for p in patterns)
    )
    return next(matching, len(ranked))


def first_fit(
    pods: list[dict[str, Any]], template: dict[str, Any], nodes: int | None
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """`pods` packed first-fit, largest first, on empty nodes like `template` (each pod
    checked against the node's labels, taints and extended resources): at most `nodes` of
    them (None: as many as it takes). How many it took, the pods placed and those left.
    A node that once had no room for a pod has none for a pod alike later (nodes only
    fill), so a pod's search starts where the last pod alike went: the same packing,
    without rescanning hundreds of full nodes for each of thousands of pods."""
    used: list[Room] = []
    placed, left = [], []
    first: dict[str, int] = {}  # a pod's likeness → the first node that may still fit it
    for found in sorted(pods, key=requests, reverse=True):
        cpu, memory = requests(found)
        alike = _likeness(found["spec"])
        start = first.get(alike, 0)
        index = next(
            (i for i in range(start, len(used)) if used[i].fits(cpu, memory, found["spec"])),
            None,
        )
        if index is None and (nodes is None or len(used) < nodes):
            new = Room.of(template)
            if new.fits(cpu, memory, found["spec"]):
                index = len(used)
                used.append(new)
        if index is None:
            first[alike] = len(used)
            left.append(found)
            continue
        first[alike] = index
        used[index].take(cpu, memory, found["spec"])
        placed.append(found)
    return len(used), placed, left


def _likeness(spec: dict[str, Any]) -> str:
    """What `Room.fits` reads of a pod: its requests, nodeSelector, tolerations and what it
    may share no node with (pods alike hold the same keys: a node one took takes no other)."""
    return json.dumps(
        [
            [(c.get("resources") or {}).get("requests") for c in spec.get("containers", [])],
            spec.get("nodeSelector"),
            spec.get("tolerations"),
            apart_keys(spec),
        ],
        sort_keys=True,
    )


def fill(pods: list[dict[str, Any]], template: dict[str, Any], nodes: int) -> list[dict[str, Any]]:
    """The pods that do not fit on `nodes` empty nodes like `template`."""
    return first_fit(pods, template, nodes)[2] if nodes else pods


@dataclass(frozen=True)
class Option:
    """A group the pending pods could grow: by how many nodes, for which pods."""

    group: str
    nodes: int
    pods: list[dict[str, Any]]
    waste: float  # the share of the new nodes' CPU and memory the pods leave unused
