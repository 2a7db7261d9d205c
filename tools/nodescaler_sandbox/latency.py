"""Seconds the step does not see: when each side's scale request really takes effect.

The world moves in steps (10 s by default) and, within a step, the fast path looks,
evaluate runs and Cluster Autoscaler scans at the step's time: seen from the step both
answer a pod in 0 s. Here each side is charged the latencies it really has, each a
component with its source (the table in docs/sandbox.md), and a reaction is measured
from the pod's arrival second to the second its scale request takes effect.

- A pod's *arrival second*: the step only says that it came in the step ending at the
  step's time; within it, it arrived `arrival_offset` seconds earlier, drawn from its
  name (the same pod arrives at the same second in every run, whichever side runs).
- An *effective* second: the first look of the side's cadence at or after the arrival,
  then each component after it (`Nodescaler.effective`, `ClusterAutoscaler.effective`).
  A request the run made at a later step (the side answered later, for its own reasons)
  takes effect no earlier than a look in that step would.

Pure: seconds in, seconds out; the runner picks the side and the request's path.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

FAST_PATH = "fast path"  # a request's path: the fast path's look
TICK = "tick"  # the schedule's tick: evaluate from the minute's event
EVENT = "event"  # an alarm's or a launch failure's event, charged as the tick is
SCAN = "scan"  # a Cluster Autoscaler loop

# nodescaler (docs/sandbox.md, "Latencies", says where each comes from)
POLL_S = 5.0  # functions/fast_path: it looks every 5 s within its minute-long invocation
LOOK_S = 0.5  # one look, listing what changed (make bench: fast_path_look_ms, rounded up)
SQS_FIFO_S = 1.0  # SQS FIFO to Lambda's event source mapping, long polling, no batch window
COLD_START_S = 0.45  # evaluate's cold import, 343 ms, and its first event's 110 ms (bench)
READS_S = 0.25  # evaluate's own work and reads, p99 with moto 233 ms (make bench)
TICK_S = 60.0  # the EventBridge schedule's rate (the stack's tickMinutes, 1)

# Cluster Autoscaler 1.37 (core/static_autoscaler.go; loop/trigger.go)
SCAN_S = 10.0  # --scan-interval
LOOP_S = 1.0  # one RunOnce (its FAQ's SLO: about 5 s on average on < 100 nodes, phase incl.)
TOO_NEW_S = 2.0  # unschedulablePodTimeBuffer: all pods younger → wait one iteration
TOO_NEW_GPU_S = 30.0  # unschedulablePodWithGpuTimeBuffer: a pod asking for a GPU


def arrival_offset(name: str, step: int) -> int:
    """How many seconds before its step's time the pod arrived: 0 to step-1, from its
    name (stable across runs and processes, unlike `hash`)."""
    return zlib.crc32(name.encode()) % max(step, 1)


def _next(at: float, every: float) -> float:
    """The first time of a cadence of `every` seconds (from 0) at or after `at`."""
    return math.ceil(round(at / every, 9)) * every


@dataclass(frozen=True)
class Nodescaler:
    """nodescaler's chain: the fast path's next look (or the minute's tick when the
    request came from it), the look, SQS FIFO to evaluate, a cold start (charged on every
    request: the sandbox does not track a container's warmth, which leans CA's way), and
    evaluate's reads before SetDesiredCapacity.

    The tick and the fast path run side by side, and the first to ask for a pod makes the
    request. In a step the tick acts before the fast path looks, so a tick's request for
    a pod that arrived within the step is charged the fast path's chain when that comes
    sooner (`fast_path`: it runs, as it does unless the stack turns it off): with steps of
    a minute, the look 5 s after the pod came, not the next minute's tick."""

    poll: float = POLL_S
    look: float = LOOK_S
    sqs: float = SQS_FIFO_S
    cold_start: float = COLD_START_S
    reads: float = READS_S
    tick: float = TICK_S
    fast_path: bool = True

    def after_look(self, path: str) -> float:
        """The seconds from the look (or the tick) to the request taking effect."""
        looked = self.look if path == FAST_PATH else 0.0
        return looked + self.sqs + self.cold_start + self.reads

    def effective(
        self, arrival: float, path: str, requested: float, step: int, *, pod: bool = False
    ) -> float:
        """The second a request made at the step ending `requested` takes effect, for a pod
        (`pod`) or a task that arrived at `arrival`."""
        every = self.poll if path == FAST_PATH else self.tick
        looked = _next(max(arrival, requested - step + 1), every)
        at = looked + self.after_look(path)
        new_in_step = arrival > requested - step
        if path == TICK and pod and new_in_step and self.fast_path:  # the look saw it too
            return min(at, self.effective(arrival, FAST_PATH, requested, step))
        return at


@dataclass(frozen=True)
class ClusterAutoscaler:
    """Cluster Autoscaler's chain: its next loop (with --frequent-loops-enabled, one right
    after an unschedulable pod appears; else its scan's), loops skipped while the pod is
    too new (2 s, 30 s for a GPU), each loop's duration, the scale-up at the end of its
    loop. Per pod: the rule looks at the oldest unschedulable pod, so a pod arriving after
    an older one waiting is answered no sooner than this says."""

    frequent_loops: bool = True
    scan: float = SCAN_S
    loop: float = LOOP_S
    too_new: float = TOO_NEW_S
    too_new_gpu: float = TOO_NEW_GPU_S

    def first_loop(self, arrival: float, gpu: bool) -> float:
        """When the loop that scales up for a pod arriving at `arrival` starts."""
        wait = self.too_new_gpu if gpu else self.too_new
        if self.frequent_loops:  # triggered at once; each skipped loop then waits a scan
            every = self.loop + self.scan
            return arrival + math.ceil(round(wait / every, 9)) * every
        return _next(arrival + wait, self.scan)

    def effective(self, arrival: float, requested: float, step: int, *, gpu: bool) -> float:
        """The second a scale-up the run made at the step ending `requested` takes effect,
        for a pod that arrived at `arrival`."""
        started = max(self.first_loop(arrival, gpu), _next(requested - step + 1, self.scan))
        return started + self.loop


def always(group: str, at: float) -> bool:
    return True


@dataclass(frozen=True)
class Charged:
    """A side's latencies over a run of `step`-second steps (`figures.Charge`).
    `watched(group, at)`: whether nodescaler's fast path watched the group's pending pods
    and was looking at the second `at` (a tick's request races its look only then)."""

    side: Nodescaler | ClusterAutoscaler
    step: int
    watched: Callable[[str, float], bool] = always

    def reaction(
        self, since: float, name: str, answer: ScaleUpLike, *, gpu: bool, pod: bool = False
    ) -> float:
        """Seconds from the arrival of demand seen at the step of `since` (minutes), the
        pod (`pod`) or queue named `name`, to the second `answer` takes effect."""
        arrival = self.arrival(round(since * 60), name)
        requested = round(answer.minute * 60)
        pod = pod and self.watched(answer.group, requested)
        return self.effective(arrival, requested, answer.path, gpu=gpu, pod=pod) - arrival

    def arrival(self, seen: int, name: str) -> int:
        """The second demand named `name`, first seen at the step of `seen` (seconds),
        arrived."""
        return seen - arrival_offset(name, self.step)

    def effective(
        self, arrival: float, requested: int, path: str, *, gpu: bool, pod: bool = False
    ) -> float:
        """The second a request made at the step of `requested` (seconds), by `path`, for
        demand (a pod: `pod`) arrived at `arrival`, takes effect: when the world starts its
        instances."""
        if isinstance(self.side, Nodescaler):
            return self.side.effective(arrival, path or TICK, requested, self.step, pod=pod)
        return self.side.effective(arrival, requested, self.step, gpu=gpu)


class ScaleUpLike(Protocol):
    """A scale request as `figures.ScaleUp` gives it: its step (minutes), its path."""

    @property
    def minute(self) -> float: ...

    @property
    def path(self) -> str: ...

    @property
    def group(self) -> str: ...
