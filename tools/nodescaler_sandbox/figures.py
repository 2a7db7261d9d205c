"""The figures a run is judged by, from what happened to each pod and each group.

Pure: the ledger of pods (`PodRecord`) and the scale requests in, numbers out, so each
figure can be checked on a hand-made timeline whose right answer is known. Times are
minutes from the start of the run.

- A pod *waited* when the scheduler once found no node for it. Its wait runs from its
  creation to its binding (or to its going, or to the end of the run, if it never bound).
- A group's *demand-to-scale-request* time runs from a pod the group could take turning
  unschedulable to a scale-up of a group that can take that pod (or to the pod finding room
  without one). Another group's scale-up answers nothing: a pod that needs a GPU is not
  helped by more CPU nodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

NEVER_SCHEDULED = "(never scheduled)"  # the group of a pod that never bound


@dataclass
class PodRecord:
    """One pod's life in a run."""

    name: str
    created: float
    unschedulable: float | None = None  # first found no node
    bound: float | None = None
    ready: float | None = None
    gone: float | None = None
    group: str | None = None  # of the node it was bound to
    takers: frozenset[str] = field(default_factory=frozenset)  # groups whose new node fits it

    def waited(self) -> bool:
        return self.unschedulable is not None

    def wait(self, end: float) -> float:
        """From creation to binding (or going, or the end of the run)."""
        ended = next((t for t in (self.bound, self.gone) if t is not None), end)
        return max(ended - self.created, 0.0)


@dataclass(frozen=True)
class ScaleUp:
    minute: float
    group: str


def as_row(pod: PodRecord) -> dict[str, Any]:
    """A pod's record for pods.json: its times in minutes, the group it bound to."""
    return {
        "pod": pod.name,
        "created": pod.created,
        "unschedulable": pod.unschedulable,
        "bound": pod.bound,
        "ready": pod.ready,
        "gone": pod.gone,
        "group": pod.group,
        "could_take_it": sorted(pod.takers),
    }


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with `share` of them at or below."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"pods": 0, "p50": None, "p99": None, "max": None}
    return {
        "pods": len(values),
        "p50": round(percentile(values, 0.5), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


def pod_waits(pods: Iterable[PodRecord], end: float) -> dict[str, dict[str, Any]]:
    """p50, p99 and max of the waits of pods that had to wait for a node: overall and by
    the group each bound to."""
    by_group: dict[str, list[float]] = {}
    overall = []
    for pod in pods:
        if not pod.waited():
            continue
        wait = pod.wait(end)
        overall.append(wait)
        by_group.setdefault(pod.group or NEVER_SCHEDULED, []).append(wait)
    return {"overall": spread(overall)} | {g: spread(w) for g, w in sorted(by_group.items())}


def demand_to_scale_request(
    pods: Iterable[PodRecord], scale_ups: Sequence[ScaleUp], groups: Sequence[str], end: float
) -> dict[str, float]:
    """Per group, the longest time from a pod it could take turning unschedulable to a
    scale-up of a group that can take that pod (or the pod bound or gone first)."""
    longest = dict.fromkeys(groups, 0.0)
    for pod in pods:
        if pod.unschedulable is None or not pod.takers:
            continue
        since = pod.unschedulable
        answers = [s.minute for s in scale_ups if s.minute >= since and s.group in pod.takers]
        answers += [t for t in (pod.bound, pod.gone) if t is not None and t >= since]
        waited = min(answers, default=end) - since
        for group in pod.takers & longest.keys():
            longest[group] = max(longest[group], round(waited, 1))
    return longest


def fit_no_group(pods: Iterable[PodRecord]) -> list[str]:
    """The pods that waited and that no group's new node would fit."""
    return sorted(p.name for p in pods if p.waited() and not p.takers)
