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
- A pod trace's pod (`traces.pod_rows`, its window, shift and scales applied): from the
  step it is created at plus its settle, until it could be gone at the earliest: a job
  bound at once, Ready after its `readyAfterSeconds` and done after its run time; a
  service at its deletion time. Expendable pods (priority below -10) are left out: no
  controller need make room for them.
- A request trace's workers, as KEDA makes them (`traces.RequestQueue.wanted`): the
  messages at a step are at least the requests sent by then less those the trace's
  `maxWorkers` workers could have done, taking them in order from the first second a
  worker could be Ready (`first_task` plus the worker's `readyAfterSeconds`); a
  recommendation holds for KEDA's 5-minute stabilization, and a worker counts once its
  node could have booted (the fewest over the boot before).
Overprovisioning placeholders and CapacityBuffers are room held, not demand: left out.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from nodescaler_sandbox import traces
from nodescaler_sandbox.baseline_flags import EXPENDABLE_BELOW
from nodescaler_sandbox.oracle import Shape, Step, step_of
from nodescaler_sandbox.scenario_file import DeploymentSpec, PodShape, RequestTraceSpec, Scenario
from nodescaler_sandbox.workloads import keda_poll, pod, replicas_at

MINUTE = 60


def shape_of(shape: PodShape) -> Shape:
    """The oracle's shape of a scenario's pod shape (a deployment's spread one a node is
    kept apart from its own, as its pods are)."""
    spread = shape.name if isinstance(shape, DeploymentSpec) and shape.one_per_node else ""
    return Shape.of(
        pod(
            "demand",
            spread or "demand",
            shape.cpu,
            shape.memory,
            extended=dict(shape.extended),
            node_selector=dict(shape.node_selector),
            tolerations=[t.model_dump() for t in shape.tolerations],
            one_per_node=bool(spread),
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
    trace_pods = _TracePods.of(scenario, settle)
    request_workers = [
        (shape_of(t.worker), _request_workers(scenario, t, first_task, settle))
        for t in scenario.request_traces
    ]
    for second in range(0, scenario.minutes * MINUTE, step):
        counts: list[Shape] = []
        for shape, replicas in deployments:  # replicas[m + 1]: minute m's
            since = int(max(second - settle.get(shape, 0.0), 0) // MINUTE)
            counts += [shape] * min(replicas[since : second // MINUTE + 2])
        for shape, workers in queues:  # from the tasks, not the pods: no settling
            counts += [shape] * workers.at(second)
        counts += trace_pods.at(second)
        for shape, workers_at in request_workers:
            counts += [shape] * workers_at[second // step]
        yield step_of(counts)


# --- traces ------------------------------------------------------------------------------


def trace_shapes(scenario: Scenario) -> set[Shape]:
    """The shapes of the pods the scenario's traces make: their rows', their workers'."""
    return {
        trace_shape(row)
        for trace in scenario.pod_traces
        for row in traces.pod_rows(trace, scenario.path.parent)
    } | {shape_of(t.worker) for t in scenario.request_traces}


def trace_shape(row: traces.PodRow) -> Shape:
    """The oracle's shape of a pod trace's row."""
    return Shape.of(
        pod(
            "demand",
            "demand",
            row.requests["cpu"],
            row.requests["memory"],
            extended={k: int(v) for k, v in row.requests.items() if "/" in k},
            node_selector=row.node_selector,
            tolerations=row.tolerations,
        )
    )


@dataclass
class _TracePods:
    """The pod traces' pods, each counted over [from, until) (see the module's docstring),
    followed step by step in time order."""

    spans: list[tuple[float, float, Shape]]  # sorted by their start
    _next: int = 0
    _alive: list[tuple[float, int, Shape]] = field(default_factory=list)  # heap by until
    _counted: Counter[Shape] = field(default_factory=Counter)

    @classmethod
    def of(cls, scenario: Scenario, settle: Mapping[Shape, float]) -> _TracePods:
        step, spans = scenario.step_seconds, []
        shapes: dict[tuple[str, ...], Shape] = {}
        for trace in scenario.pod_traces:
            for row in traces.pod_rows(trace, scenario.path.parent):
                if row.priority < EXPENDABLE_BELOW:
                    continue
                key = (repr(row.requests), repr(row.node_selector), repr(row.tolerations))
                shape = shapes.get(key) or shapes.setdefault(key, trace_shape(row))
                created = math.ceil(row.arrival_s / step) * step  # the step that makes it
                if row.run_s is not None:
                    until = created + trace.ready_after_seconds + row.run_s
                else:
                    until = math.inf if row.delete_s is None else row.delete_s
                start = created + settle.get(shape, 0.0)
                if until > start:
                    spans.append((start, until, shape))
        return cls(sorted(spans, key=lambda span: span[0]))

    def at(self, second: int) -> list[Shape]:
        """The pods surely on a node at `second` (seconds asked for in increasing order)."""
        while self._next < len(self.spans) and self.spans[self._next][0] <= second:
            _, until, shape = self.spans[self._next]
            heapq.heappush(self._alive, (until, self._next, shape))
            self._counted[shape] += 1
            self._next += 1
        while self._alive and self._alive[0][0] <= second:
            self._counted[heapq.heappop(self._alive)[2]] -= 1
        return list(self._counted.elements())


def _request_workers(
    scenario: Scenario,
    trace: RequestTraceSpec,
    first_task: Mapping[str, float],
    settle: Mapping[Shape, float],
) -> list[int]:
    """A request trace's workers at least, at each of the scenario's steps (see the module's
    docstring)."""
    step = scenario.step_seconds
    rows = list(traces.request_rows(trace, scenario.path.parent))
    first = first_task.get(trace.name, 0.0) + trace.worker.ready_after_seconds
    free = [first] * trace.max_workers  # when each worker is free, taking requests in order
    done = []
    for row in rows:
        begin = max(row.arrival_s, heapq.heappop(free))
        heapq.heappush(free, begin + row.service_s)
        done.append(begin + row.service_s)
    arrivals, done = [row.arrival_s for row in rows], sorted(done)
    recommended = []
    for second in range(0, scenario.minutes * MINUTE, step):
        messages = bisect_right(arrivals, second) - bisect_right(done, second)
        recommended.append(min(math.ceil(max(messages, 0) / trace.queue_length), trace.max_workers))
    held = math.floor(traces.STABILIZATION_S / step)  # steps a recommendation holds for
    wanted = [max(recommended[max(0, i - held) : i + 1]) for i in range(len(recommended))]
    booting = math.ceil(settle.get(shape_of(trace.worker), 0.0) / step)
    held_from = first_task.get(trace.name, 0.0)  # no node could hold a worker before
    return [
        min(wanted[max(0, i - booting) : i + 1]) if i * step >= held_from else 0
        for i in range(len(wanted))
    ]
