"""The reference workload `make bench` times beside each timed figure, so it judges ratios:
on a machine twice as slow (or twice as busy) both take twice as long and the ratio holds,
while code that got slower moves the ratio alone.

The workload is fixed pure Python of the kind the autoscaler's own time goes to (building
records, sorting them by several keys, formatting names), about 20 ms on a laptop core;
it never changes, or every ratio's target would have to be measured again.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

SIZE = 20_000


def workload() -> int:
    """The fixed work: 20,000 pod-like records built, sorted and summed."""
    pods: list[dict[str, Any]] = [
        {"name": f"pod-{n:06d}", "cpu": (n * 7919) % 4000, "zone": f"zone-{n % 3}"}
        for n in range(SIZE)
    ]
    pods.sort(key=lambda pod: (pod["zone"], -pod["cpu"], pod["name"]))
    return sum(int(pod["cpu"]) for pod in pods[::7])


def timed() -> float:
    """One run of the workload, in seconds."""
    started = time.perf_counter()
    workload()
    return time.perf_counter() - started


def seconds(repetitions: int = 5) -> float:
    """The median of a few runs: the reference time beside a figure measured once."""
    return statistics.median(timed() for _ in range(repetitions))


def ratio(figure: float, reference: float) -> float:
    """How many reference workloads the figure took."""
    if reference <= 0:
        raise ValueError(f"the reference workload took {reference} s: nothing to judge by")
    return round(figure / reference, 2)
