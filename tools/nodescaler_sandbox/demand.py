"""A scenario's demand, step by step: the pods its workloads ask for with none waiting for
a node, read from the scenario alone (no run), at least as many as any run has then.

- A deployment's replicas: its curve's value; within a minute whose value changes, the
  lesser of the minute's two (the world spreads a change over the minute's steps, at
  steps drawn per seed: the lesser is what every seed has at every step of it).
- A queue's workers, one per task waiting or worked, up to its cap (a KEDA ScaledJob):
  the tasks sent by then, each counted from KEDA's first poll after the last step of its
  minute (`workloads.keda_poll`), less the tasks
  that could be done by then if each were sent at the start of its minute and worked at
  once (not before a node could hold its worker: `first_task`), first come first served
  on the cap's workers, for its task time. No run sends a task later or finishes one
  sooner, so none has fewer workers.
- A deployment's new pod counts once a node could have been booted for it (`settle`: the
  shortest boot of the groups it fits): at each step, the fewest of its shape over the
  boot before. Room held in advance serves a pod sooner, but that room is counted in the
  run's own node-hours; a controller answering each pod within a boot has at least these.
  A queue's workers are not settled: a controller reading the queue can ask for their
  nodes when the tasks come, before KEDA makes the pods (`first_task` holds the first).
Overprovisioning placeholders and CapacityBuffers are room held, not demand: left out.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from nodescaler_sandbox.oracle import Shape, Step, step_of
from nodescaler_sandbox.scenario_file import PodShape, Scenario
from nodescaler_sandbox.workloads import keda_poll, pod, replicas_at

MINUTE = 60


def shape_of(shape: PodShape) -> Shape:
    """The oracle's shape of a scenario's pod shape."""
    return Shape.of(
        pod(
            "demand",
            "demand",
            shape.cpu,
            shape.memory,
            extended=dict(shape.extended),
            node_selector=dict(shape.node_selector),
            tolerations=[t.model_dump() for t in shape.tolerations],
        )
    )


@dataclass(frozen=True)
class _Workers:
    """A queue's workers at least: tasks sent (each at its latest) less tasks done (each at
    its earliest)."""

    sent: list[tuple[int, int]]  # (second its minute starts, tasks), by time
    done: list[float]  # when each task is done at the earliest, sorted
    cap: int
    step: int

    @classmethod
    def of(
        cls, sent: list[tuple[int, int]], task_seconds: float, cap: int, step: int, first: float
    ) -> _Workers:
        free = [first] * cap  # when each of the cap's workers is free: none before `first`
        done = []
        for start, tasks in sent:
            for _ in range(tasks):
                begin = max(float(start), heapq.heappop(free))
                heapq.heappush(free, begin + task_seconds)
                done.append(begin + task_seconds)
        return cls(sent, sorted(done), cap, step)

    def at(self, second: int) -> int:
        latest = sum(n for start, n in self.sent if keda_poll(start + MINUTE - self.step) <= second)
        return max(min(latest - bisect_right(self.done, second), self.cap), 0)


def demand(
    scenario: Scenario,
    first_task: Mapping[str, float] | None = None,
    settle: Mapping[Shape, float] | None = None,
) -> Iterator[Step]:
    """The pods the scenario's workloads ask for at each of its steps (see the module's
    docstring), as the oracle counts them. `first_task`: a queue's earliest second a task
    can be worked (no node for its workers before: none at the start, none booted yet).
    `settle`: per shape, the seconds from a pod's arrival until a new node could hold it."""
    first_task, settle = first_task or {}, settle or {}
    step = scenario.step_seconds
    deployments = [  # each minute's replicas, from the minute before the first
        (shape_of(d), [replicas_at(curve, m) for m in range(-1, scenario.minutes)])
        for d in scenario.deployments
        for curve in [sorted((float(m), n) for m, n in d.replicas.items())]
    ]
    queues = [
        (
            shape_of(q.worker),
            _Workers.of(
                sorted((round(float(m) * MINUTE), n) for m, n in q.tasks.items()),
                q.task_minutes * MINUTE,
                q.max_workers,
                step,
                first_task.get(q.name, 0.0),
            ),
        )
        for q in scenario.queues
    ]
    for second in range(0, scenario.minutes * MINUTE, step):
        counts: list[Shape] = []
        for shape, replicas in deployments:  # replicas[m + 1]: minute m's
            since = int(max(second - settle.get(shape, 0.0), 0) // MINUTE)
            counts += [shape] * min(replicas[since : second // MINUTE + 2])
        for shape, workers in queues:  # from the tasks, not the pods: no settling
            counts += [shape] * workers.at(second)
        yield step_of(counts)
