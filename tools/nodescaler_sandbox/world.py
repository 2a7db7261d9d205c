"""The world a scenario runs in, whoever scales it: the simulated cluster
(`nodescaler_sandbox.cluster`) and the scenario's workloads (`workloads`) on the sandbox,
stepped every `stepSeconds` (`cadence`). Nodescaler and the reactive baseline scale the
same world; it only reads the groups and never decides anything. What the scenario has
before either controller runs (groups, queues, budgets, buffers, alarms) is made by
`world_setup`.

A scenario says its load by the minute: a deployment's replicas at each minute (its
curve), a queue's tasks sent at a minute. What changes at a minute arrives inside it,
each pod or task at a step of the minute drawn at random (`within_the_minute`), seeded
by the workload, the minute and the run's `seed` (0 unless `nodescaler simulate --seeds`
asks for more), so every run of a scenario with a seed sees the same arrivals and every
controller the same world: the change from minute m-1 to m arrives over the
steps from m to m+1, and with 60-second steps all at m, as the minute world had it.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import world_setup
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.cluster import (
    BOUND_AT,
    READY_AFTER,
    READY_AT,
    UNSCHEDULABLE_SINCE,
    Room,
    extended_requests,
    requests,
)
from nodescaler_sandbox.figures import PodRecord, dominant_share
from nodescaler_sandbox.provision import (
    fill_queue,
    group_sizes,
    moto_queue,
)
from nodescaler_sandbox.traces import PodTrace, RequestQueue, pod_rows, request_rows
from nodescaler_sandbox.workloads import Deployment, QueueWork, replicas_at

if TYPE_CHECKING:
    from nodescaler_sandbox.sandbox import Sandbox
    from nodescaler_sandbox.scenario_file import (
        PodShape,
        Scenario,
        ZonalShiftSpec,
    )


class World:
    """A scenario's workloads on the sandbox's cluster, stepped every `stepSeconds`."""

    def __init__(self, scenario: Scenario, box: Sandbox, *, hooks: bool, seed: int = 0) -> None:
        self.scenario = scenario
        self.box = box
        self.cluster = box.cluster
        self.seed = seed
        self.cluster.seed = seed  # the scheduler's placement ties
        self.minute = 0.0
        self.at = 0  # the step's time: seconds from the start
        self._drawn: dict[str, list[int]] = {}  # a workload's minute → its arrivals' steps
        self._scheduled = -1  # the store's version the last scheduling pass left
        self._recorded = -1  # the store's version at the last look at the pods
        self._next_ready = datetime.max.replace(tzinfo=UTC)  # a bound pod due to turn Ready
        self.deployments = [
            _deployment(d.name, d, sorted(d.replicas.items()), one_per_node=d.one_per_node)
            for d in scenario.deployments
        ]
        self.queues = [
            QueueWork(
                q.name,
                dict(q.tasks),
                q.task_minutes,
                _deployment(f"{q.name}-worker", q.worker, [(0, 0)], jobs=True),
                q.max_workers,
            )
            for q in scenario.queues
        ]
        # demand streamed from trace files, a row at a time (`traces`)
        folder = scenario.path.parent
        self.pod_traces = [
            PodTrace(t.name, pod_rows(t, folder), t.ready_after_seconds)
            for t in scenario.pod_traces
        ]
        self.request_queues = [
            RequestQueue(
                t.name,
                request_rows(t, folder),
                _deployment(f"{t.name}-worker", t.worker, [(0, 0)]),
                t.max_workers,
                t.queue_length,
            )
            for t in scenario.request_traces
        ]
        # each budget, each time the cluster reacted: (minute, budget, enough healthy pods)
        self.budget_looks: list[tuple[float, str, int, int]] = []
        self.start = box.clock.now()
        self.tasks_lost = 0  # sent while their queue was deleted
        self.pods: dict[str, PodRecord] = {}  # uid → what happened to the pod
        self._alive: set[str] = set()
        self._shifted: list[ZonalShiftSpec] = []  # the zonal shifts started
        world_setup.create(scenario, box, self.queue_names, hooks=hooks)
        self._new_node = {g.name: self.cluster.empty_node(g.name) for g in scenario.groups}
        self.cluster.store.scale_of = self._scale_of

    def _scale_of(self, budget: dict[str, Any]) -> int | None:
        """The replicas of the deployment a budget selects, as the disruption controller
        reads them from its scale."""
        selected = budget["spec"].get("selector", {}).get("matchLabels", {}).get("app")
        return next((self.replicas(d) for d in self.deployments if d.name == selected), None)

    def _shift_zones(self) -> None:
        """The zonal shifts due by now, started as an operator starts one (StartZonalShift),
        each expiring at its `until`: ARC names the zone by its ID."""
        for shift in self.scenario.zonal_shifts:
            if shift in self._shifted or shift.start * MINUTE > self.at:
                continue
            self._shifted.append(shift)
            zones = self.box.client("ec2").describe_availability_zones()["AvailabilityZones"]
            zone_id = next(z["ZoneId"] for z in zones if z["ZoneName"] == shift.zone)
            expires = timedelta(minutes=shift.until - shift.start)
            self.box.arc.start_zonal_shift(zone_id, expires)

    def _fill_reservations(self) -> None:
        """The instances running in each group fill the open reservations of their type
        in their zone, as EC2 matches them."""
        if not self.box.reservations.reservations:
            return
        running: dict[tuple[str, str], int] = {}
        sizes = group_sizes(self.cluster.region)
        for group in self.scenario.groups:
            key = (group.instance_type, group.zone or f"{self.cluster.region}a")
            running[key] = running.get(key, 0) + len(sizes[group.name][1])
        self.box.reservations.follow(running)

    def step(self, at: int) -> None:
        """The workloads' step ending `at` seconds from the start: tasks arrive and are
        worked, deployments follow their curves, nodes follow the instances, the
        scheduler binds."""
        self.at, self.minute = at, at / MINUTE
        self._shift_zones()
        self._fill_reservations()
        for queue in self.queues:
            arrived = self._arrived(queue)
            if arrived and _store(queue.queue, self.cluster.region) is not None:
                fill_queue(self.box.client("sqs"), queue.queue, arrived, region=self.cluster.region)
            elif arrived:  # sent to a deleted queue: lost
                self.tasks_lost += arrived
            done = queue.finish(self.cluster.store, self.box.clock.now())
            _consume(queue.queue, done, self.cluster.region)
            working = queue.take_stock(self.cluster.store, self.box.clock.now())
            _in_flight(queue.queue, working, self.cluster.region)
        self._replay(at)
        self.react()

    def _replay(self, at: int) -> None:
        """The traces' rows arrived by now: pods created, requests sent and worked."""
        store, now = self.cluster.store, self.box.clock.now()
        with store.lock:
            for trace in self.pod_traces:
                trace.arrive(store, at, now)
            for served in self.request_queues:
                arrived = served.arrive(at)
                if arrived:
                    sqs = self.box.client("sqs")
                    fill_queue(sqs, served.queue, arrived, region=self.cluster.region)
                _consume(served.queue, served.work(store, at), self.cluster.region)
                _in_flight(served.queue, served.busy, self.cluster.region)

    def replicas(self, deployment: Deployment) -> int:
        """The deployment's replicas at this step: its curve's change from the last minute
        to this one, arrived at the steps drawn for it (see the module's docstring)."""
        minute = self.at // MINUTE
        before, after = (replicas_at(deployment.curve, m) for m in (minute - 1, minute))
        if before == after:
            return after
        drawn = self._within(f"{deployment.name}@{minute}", abs(after - before))
        arrived = bisect_right(drawn, (self.at - minute * MINUTE) // self._step)
        return before + arrived if after > before else before - arrived

    def _arrived(self, queue: QueueWork) -> int:
        """The queue's tasks sent in this step: each minute's (`arrivals`) over its steps."""
        arrived = 0
        for when, tasks in queue.arrivals.items():
            start = when * MINUTE
            if not start <= self.at < start + MINUTE + self._step:
                continue
            drawn = self._within(f"{queue.queue}@{when:g}", tasks)
            since = (self.at - start) / self._step  # steps since the minute began
            arrived += bisect_right(drawn, math.floor(since)) - bisect_right(
                drawn, math.floor(since - 1)
            )
        return arrived

    def _within(self, seed: str, count: int) -> list[int]:
        if self.seed:  # seed 0 draws as the sandbox always has
            seed = f"{seed}#{self.seed}"
        if seed not in self._drawn:
            self._drawn[seed] = within_the_minute(seed, count, MINUTE // self._step)
        return self._drawn[seed]

    @property
    def _step(self) -> int:
        return self.scenario.step_seconds

    def react(self) -> None:
        """What the cluster's controllers do at once: replace lost pods, follow the
        instances, bind pending pods, look at the disruption budgets."""
        for deployment in self.deployments:
            deployment.resize(self.cluster.store, self.replicas(deployment), self.box.clock.now())
        for queue in self.queues:  # KEDA makes workers at its polls (`QueueWork.wanted`)
            waiting = _messages(queue.queue, self.cluster.region)
            queue.workers.resize(
                self.cluster.store, queue.wanted(self.at, waiting), self.box.clock.now()
            )
        with self.cluster.store.lock:
            for trace in self.pod_traces:
                trace.follow(self.cluster.store, self.at, self.box.clock.now())
        for served in self.request_queues:
            served.workers.resize(self.cluster.store, served.wanted(self.at), self.box.clock.now())
        self.box.sync(self.react)
        self._schedule()
        self._check_budgets()

    def _schedule(self) -> None:
        """The scheduler's pass, unless it would change nothing: the store is as the last
        pass left it (no pod or node put or deleted since) and no bound pod is due to
        turn Ready. A pass binds or marks only what changed since the last, so skipping
        it then changes no result; in a world of 10-second steps most steps are such."""
        store, now = self.cluster.store, self.box.clock.now()
        if store.resource_version == self._scheduled and now < self._next_ready:
            return
        self.cluster.schedule(now)
        self._scheduled = store.resource_version
        self._next_ready = _next_ready(store.objects["pods"].values())

    def _check_budgets(self) -> None:
        for (_, name), budget in self.cluster.store.objects["poddisruptionbudgets"].items():
            status = self.cluster.store.budget_status(budget)
            healthy, desired = status["currentHealthy"], status["desiredHealthy"]
            self.budget_looks.append((self.minute, name, healthy, desired))  # figures

    def record_pods(self) -> None:
        """What each pod went through since the last look: created, found no node (and
        which groups' new nodes would fit it), bound (to a node of which group), Ready,
        gone. Nothing to look at while the store is as the last look left it."""
        if self.cluster.store.resource_version == self._recorded:
            return
        self._recorded = self.cluster.store.resource_version
        alive = set()
        for found in self.cluster.store.objects["pods"].values():
            metadata = found["metadata"]
            uid = metadata["uid"]
            alive.add(uid)
            record = self.pods.get(uid)
            if record is None:
                created = metadata["creationTimestamp"].replace("Z", "+00:00")
                record = self.pods[uid] = PodRecord(metadata["name"], self._minutes(created))
            annotations = metadata.get("annotations", {})
            if record.unschedulable is None and UNSCHEDULABLE_SINCE in annotations:
                record.unschedulable = self._minutes(annotations[UNSCHEDULABLE_SINCE])
                asked, spec = requests(found), found["spec"]
                record.takers = frozenset(
                    g for g, n in self._new_node.items() if n.fits(*asked, spec)
                )
                record.gpu = asks_for_gpu(spec)
                record.shares = {g: self._share(g, found) for g in record.takers}
            if record.bound is None and BOUND_AT in annotations:
                record.bound = self._minutes(annotations[BOUND_AT])
                record.node = found["spec"]["nodeName"]
                instance = self.cluster.instance_of_node(record.node)
                if instance is not None:
                    record.group = instance.group
                    record.node_launched = (instance.launched - self.start).total_seconds() / 60
            if record.ready is None and READY_AT in annotations:
                record.ready = self._minutes(annotations[READY_AT])
        for uid in self._alive - alive:
            self.pods[uid].gone = self.minute
        self._alive = alive

    def _share(self, group: str, found: dict[str, Any]) -> float:
        """The pod's dominant share of a new node of the group (`figures.dominant_share`)."""
        room, (cpu, memory) = self._new_node[group], requests(found)
        asked = {"cpu": cpu, "memory": memory} | extended_requests(found["spec"])
        offered = {"cpu": room.cpu, "memory": room.memory} | room.extended
        return dominant_share(asked, offered)

    def _minutes(self, at: str) -> float:
        return (datetime.fromisoformat(at) - self.start).total_seconds() / 60

    def queue_depths(self, *, visible_only: bool = False) -> dict[str, int]:
        """Each queue's messages, or those no worker has received (`visible_only`: what
        SQS publishes as ApproximateNumberOfMessagesVisible); a queue a fault deleted is
        not there."""
        return {
            name: _messages(name, self.cluster.region, visible_only=visible_only)
            for name in self.queue_names
            if _store(name, self.cluster.region) is not None
        }

    @property
    def queue_names(self) -> list[str]:
        """The scenario's queues and its request traces' queues."""
        return [q.queue for q in self.queues] + [r.queue for r in self.request_queues]

    def gauges(self) -> dict[str, float]:
        """The scenario's Prometheus gauges now: queues' messages, deployments' replicas."""
        spec = self.scenario.prometheus
        if spec is None:
            return {}
        depths = self.queue_depths()
        deployments = {d.name: d for d in self.deployments}
        return {
            g.name: depths.get(g.queue, 0)
            if g.queue is not None
            else self.replicas(deployments[str(g.deployment)])
            for g in spec.gauges
        }

    def waiting_for(self, group: str) -> list[tuple[str, int, bool]]:
        """The pods found unschedulable and still without a node that a new node of the
        group would hold: each one's name, the second it was first found so (its step's,
        from the start) and whether it asks for a GPU."""
        new_node, waiting = self._new_node[group], []
        for found in self.cluster.store.objects["pods"].values():
            spec, annotations = found["spec"], found["metadata"].get("annotations", {})
            if spec.get("nodeName") or UNSCHEDULABLE_SINCE not in annotations:
                continue
            if new_node.fits(*requests(found), spec):
                seen = round(self._minutes(annotations[UNSCHEDULABLE_SINCE]) * MINUTE)
                waiting.append((found["metadata"]["name"], seen, asks_for_gpu(spec)))
        return waiting

    def pending(self) -> int:
        return sum(
            1 for p in self.cluster.store.objects["pods"].values() if not p["spec"].get("nodeName")
        )

    def reservation(self, group: str) -> tuple[float, float]:
        """The share of the group's Ready nodes' CPU and memory that pods request, in %."""
        nodes = {n["metadata"]["name"]: n for n in self.cluster.group_nodes(group)}
        if not nodes:
            return 0.0, 0.0
        used = [
            requests(p)
            for p in self.cluster.store.objects["pods"].values()
            if p["spec"].get("nodeName") in nodes
        ]
        rooms = [Room.of(n) for n in nodes.values()]
        return (
            100 * sum(c for c, _ in used) / sum(r.cpu for r in rooms),
            100 * sum(m for _, m in used) / sum(r.memory for r in rooms),
        )


def _next_ready(pods: Iterable[dict[str, Any]]) -> datetime:
    """When the first bound pod not yet Ready is due to turn Ready (the scheduler's
    `_maybe_ready`); the end of time when none is."""
    due = [
        datetime.fromisoformat(annotations[BOUND_AT])
        + timedelta(seconds=float(annotations.get(READY_AFTER, 0)))
        for found in pods
        if BOUND_AT in (annotations := found["metadata"].get("annotations", {}))
        and READY_AT not in annotations
    ]
    return min(due, default=datetime.max.replace(tzinfo=UTC))


def within_the_minute(seed: str, count: int, steps: int) -> list[int]:
    """At which of a minute's `steps` steps (0 to steps-1) each of `count` arrivals comes,
    sorted: drawn uniformly by a generator seeded with `seed` (a string seeds the same
    in every process), so every run draws the same."""
    draw = random.Random(seed)
    return sorted(draw.randrange(steps) for _ in range(count))


def _deployment(
    name: str,
    shape: PodShape,
    curve: list[tuple[float, int]],
    *,
    one_per_node: bool = False,
    jobs: bool = False,
) -> Deployment:
    return Deployment(
        name,
        shape.cpu,
        shape.memory,
        curve,
        shape.ready_after_seconds,
        dict(shape.node_selector),
        [t.model_dump() for t in shape.tolerations],
        dict(shape.extended),
        shape.priority,
        shape.namespace,
        shape.bare,
        shape.local_storage,
        dict(shape.annotations),
        one_per_node=one_per_node,
        jobs=jobs,
    )


def _store(queue: str, region: str) -> Any:
    """moto's queue, read and worked directly: the workers are the simulated workload, not
    the product, and through moto's server each receive rescans the whole queue. None
    while a fault has deleted it."""
    from moto.sqs.exceptions import QueueDoesNotExist

    try:
        return moto_queue(queue, region=region)
    except QueueDoesNotExist:
        return None


def _messages(queue: str, region: str, *, visible_only: bool = False) -> int:
    store = _store(queue, region)
    if store is None:
        return 0
    return len(store.messages) if visible_only else len(store._messages)


# A received message is in flight until deleted or its visibility timeout ends (SQS:
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html).
# moto times that on the wall clock, not the sandbox's: a worker's message is hidden for
# good, and shown again as the worker's count falls (its task goes back, as the
# timeout would give it to the next worker).
HIDDEN_FOR_GOOD = float("inf")


def _in_flight(queue: str, working: int, region: str) -> None:
    """The first `working` messages received by the workers at work (in flight: counted in
    ApproximateNumberOfMessagesNotVisible), the rest visible. Tasks done delete the
    first messages (`_consume`): those in flight."""
    store = _store(queue, region)
    if store is None:
        return
    for index, message in enumerate(store._messages):
        message.visible_at = HIDDEN_FOR_GOOD if index < working else 0.0


def _consume(queue: str, tasks: int, region: str) -> None:
    store = _store(queue, region)
    if store is not None:
        del store._messages[: min(tasks, len(store._messages))]


def asks_for_gpu(spec: dict[str, Any]) -> bool:
    """Whether a pod asks for an NVIDIA GPU, as Cluster Autoscaler tells (utils/gpu/gpu.go,
    PodRequestsGpu: a container's requests name nvidia.com/gpu, whatever the amount)."""
    return any(
        "nvidia.com/gpu" in ((c.get("resources") or {}).get("requests") or {})
        for c in spec.get("containers") or []
    )
