"""Trace files: demand read from a CSV beside the scenario, a row at a time, in time order.

- A *pod trace* has a row a pod: `arrival_s` (seconds from the trace's start), `cpu`,
  `memory`, extended resources as columns of their own (`nvidia.com/gpu`), and optional
  `namespace`, `labels` and `node_selector` (`key=value;key=value`), `tolerations`
  (`key=value:Effect;...`, each tolerating that taint), `priority`, and either
  `run_s` (a job: its clock starts when it is Ready; evicted or lost with its node before
  it is done, it starts again from nothing, its work lost) or `delete_s` (a service pod,
  gone at that time of the trace, waited or not; evicted before then, it is replaced).
  A row with neither is a service pod that stays to the end.
- A *request trace* has a row a request: `arrival_s` and `service_s`, sent to an SQS queue
  whose worker pods (scaled as KEDA scales them) take the requests one after another.

A trace can be cut to a window of its own time (`from`, `until`, in minutes), shifted
(`shift`: minutes added), stretched (`timeScale`: every time and duration multiplied) and
thinned or thickened (`volumeScale`: row i is replayed floor((i+1)k) - floor(ik) times,
the same rows every run). The file is checked whole when the scenario loads, without
holding it: a bad row is named by file, line and column, and nothing is dropped silently.
The replay holds only the rows already arrived and still alive, so days of a trace replay
in bounded memory.
"""

from __future__ import annotations

import csv
import heapq
import math
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from nodescaler.domain.cluster.quantity import parse_quantity
from nodescaler.errors import QuantityError
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from nodescaler_sandbox.cluster import READY_AT
from nodescaler_sandbox.workloads import Deployment, pod

if TYPE_CHECKING:
    from nodescaler_sandbox.kube.apiserver import Cluster

POD_COLUMNS = ("arrival_s", "cpu", "memory")
POD_OPTIONAL = (
    "namespace",
    "labels",
    "node_selector",
    "tolerations",
    "priority",
    "run_s",
    "delete_s",
)
REQUEST_COLUMNS = ("arrival_s", "service_s")
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
EXTENDED = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# KEDA's HPA scales down only to the highest recommendation of the last 5 minutes (the
# HPA's default scale-down stabilization), and KEDA's aws-sqs-queue scaler's target is
# 5 messages a replica unless `queueLength` says otherwise, counting in-flight messages
# (https://keda.sh/docs/2.16/scalers/aws-sqs/).
STABILIZATION_S = 300
KEDA_QUEUE_LENGTH = 5


class TraceError(ValueError):
    """A trace row that cannot be replayed: the message names file, line and column."""


class Spec(BaseModel):
    """A trace's (or its prices') settings as a scenario writes them: camelCase, checked."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class TraceWindow(Spec):
    """Which part of a trace is replayed, and how: its minutes [from, until), shifted,
    stretched in time, thinned or thickened in volume."""

    file: str
    start: Annotated[float, Field(ge=0, alias="from")] = 0
    until: Annotated[float, Field(gt=0)] | None = None
    shift: Annotated[float, Field(ge=0)] = 0
    time_scale: Annotated[float, Field(gt=0)] = 1
    volume_scale: Annotated[float, Field(gt=0)] = 1

    def described(self) -> dict[str, Any]:
        """How the trace was replayed, for the output."""
        return self.model_dump(by_alias=True, include=set(TraceWindow.model_fields))

    def when(self, trace_s: float) -> float:
        """A time of the trace → seconds from the run's start."""
        return (trace_s - self.start * 60) * self.time_scale + self.shift * 60

    def inside(self, trace_s: float) -> bool:
        return self.start * 60 <= trace_s and (self.until is None or trace_s < self.until * 60)


@dataclass(frozen=True)
class PodRow:
    line: int
    arrival_s: float  # seconds from the run's start
    requests: dict[str, str]  # cpu, memory and extended resources
    namespace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    priority: int = 0
    run_s: float | None = None
    delete_s: float | None = None  # seconds from the run's start


@dataclass(frozen=True)
class RequestRow:
    line: int
    arrival_s: float
    service_s: float


# --- reading -----------------------------------------------------------------------------


class _Reader:
    """A trace's rows as dicts, each with its line; errors name file, line and column."""

    def __init__(self, path: Path, required: tuple[str, ...], known: tuple[str, ...]) -> None:
        self.path = path
        self.required = required
        self.known = known

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        try:
            handle = self.path.open(newline="")
        except OSError as error:
            raise TraceError(f"{self.path}: cannot read it ({error.strerror})") from None
        with handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise TraceError(f"{self.path}:1: empty: a trace starts with its header")
            self.header = [h.strip() for h in header]
            self._check_header()
            for row in reader:
                if not row or all(not cell.strip() for cell in row):
                    continue
                if len(row) != len(self.header):
                    raise TraceError(
                        f"{self.path}:{reader.line_num}: {len(row)} columns, the header has "
                        f"{len(self.header)}"
                    )
                yield reader.line_num, dict(zip(self.header, (c.strip() for c in row), strict=True))

    def _check_header(self) -> None:
        missing = [c for c in self.required if c not in self.header]
        if missing:
            raise TraceError(f"{self.path}:1: no column {', '.join(missing)} in the header")
        for index, name in enumerate(self.header, 1):
            if name not in self.known and not EXTENDED.match(name):
                raise TraceError(
                    f"{self.path}:1:{index}: unknown column {name!r} (known: "
                    f"{', '.join(self.known)}, or an extended resource like nvidia.com/gpu)"
                )

    def where(self, line: int, column: str) -> str:
        return f"{self.path}:{line}:{self.header.index(column) + 1} ({column})"

    def number(self, line: int, row: dict[str, str], column: str, *, low: float = 0) -> float:
        try:
            value = float(row[column])
        except ValueError:
            raise TraceError(
                f"{self.where(line, column)}: {row[column]!r} is not a number"
            ) from None
        if not math.isfinite(value) or value < low:
            raise TraceError(f"{self.where(line, column)}: {value:g} is below {low:g}")
        return value

    def ordered(
        self, rows: Iterator[tuple[int, dict[str, str]]]
    ) -> Iterator[tuple[int, dict[str, str], float]]:
        """The rows with their arrival, which never goes back (a trace is replayed as it
        streams)."""
        last = 0.0
        for line, row in rows:
            arrival = self.number(line, row, "arrival_s")
            if arrival < last:
                raise TraceError(
                    f"{self.where(line, 'arrival_s')}: {arrival:g} is before the row above "
                    f"({last:g}): sort the trace by arrival"
                )
            last = arrival
            yield line, row, arrival


def _pairs(reader: _Reader, line: int, row: dict[str, str], column: str) -> dict[str, str]:
    text = row.get(column, "")
    pairs = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, equals, value = part.partition("=")
        if not equals or not key:
            raise TraceError(f"{reader.where(line, column)}: {part!r} is not key=value")
        pairs[key] = value
    return pairs


def _tolerations(reader: _Reader, line: int, row: dict[str, str]) -> list[dict[str, str]]:
    tolerated = []
    for key, written in _pairs(reader, line, row, "tolerations").items():
        value, colon, effect = written.rpartition(":")
        if not colon or effect not in ("NoSchedule", "NoExecute", "PreferNoSchedule"):
            raise TraceError(
                f"{reader.where(line, 'tolerations')}: {key}={written} is not "
                "key=value:NoSchedule (or NoExecute, PreferNoSchedule)"
            )
        tolerated.append({"key": key, "value": value, "effect": effect})
    return tolerated


def _quantity(reader: _Reader, line: int, row: dict[str, str], column: str) -> str:
    try:
        if parse_quantity(row[column]) < 0:
            raise ValueError
    except (ValueError, ArithmeticError, QuantityError):
        raise TraceError(
            f"{reader.where(line, column)}: {row[column]!r} is not a quantity (e.g. 500m, 2Gi)"
        ) from None
    return row[column]


def _pod_row(
    reader: _Reader, window: TraceWindow, line: int, row: dict[str, str], arrival: float
) -> PodRow:
    requests = {c: _quantity(reader, line, row, c) for c in ("cpu", "memory")}
    for column in reader.header:
        if "/" in column and row[column]:
            requests[column] = str(int(reader.number(line, row, column)))
    namespace = row.get("namespace") or "default"
    if not NAMESPACE.match(namespace):
        raise TraceError(f"{reader.where(line, 'namespace')}: {namespace!r} is not a namespace")
    run = reader.number(line, row, "run_s") if row.get("run_s") else None
    delete = reader.number(line, row, "delete_s") if row.get("delete_s") else None
    if run is not None and delete is not None:
        raise TraceError(f"{reader.where(line, 'delete_s')}: a pod has run_s or delete_s, not both")
    if delete is not None and delete < arrival:
        raise TraceError(f"{reader.where(line, 'delete_s')}: {delete:g} is before its arrival")
    priority = 0
    if row.get("priority"):
        try:
            priority = int(row["priority"])
        except ValueError:
            raise TraceError(
                f"{reader.where(line, 'priority')}: {row['priority']!r} is not an integer"
            ) from None
    return PodRow(
        line,
        window.when(arrival),
        requests,
        namespace,
        _pairs(reader, line, row, "labels"),
        _pairs(reader, line, row, "node_selector"),
        _tolerations(reader, line, row),
        priority,
        None if run is None else run * window.time_scale,
        None if delete is None else window.when(delete),
    )


def _copies(window: TraceWindow, index: int) -> int:
    """How many times the window's row `index` is replayed (volumeScale)."""
    scale = window.volume_scale
    return math.floor((index + 1) * scale + 1e-9) - math.floor(index * scale + 1e-9)


def pod_rows(window: TraceWindow, folder: Path) -> Iterator[PodRow]:
    """The pod trace's rows in the window, in time order, each as often as its volume says."""
    reader = _Reader(folder / window.file, POD_COLUMNS, POD_COLUMNS + POD_OPTIONAL)
    index = 0
    for line, row, arrival in reader.ordered(reader.rows()):
        parsed = _pod_row(reader, window, line, row, arrival)  # a bad row fails wherever it is
        if not window.inside(arrival):
            continue
        for _ in range(_copies(window, index)):
            yield parsed
        index += 1


def request_rows(window: TraceWindow, folder: Path) -> Iterator[RequestRow]:
    """The request trace's rows in the window, in time order, each as often as its volume says."""
    reader = _Reader(folder / window.file, REQUEST_COLUMNS, REQUEST_COLUMNS)
    index = 0
    for line, row, arrival in reader.ordered(reader.rows()):
        service = reader.number(line, row, "service_s")
        if not window.inside(arrival):
            continue
        for _ in range(_copies(window, index)):
            yield RequestRow(line, window.when(arrival), service * window.time_scale)
        index += 1


def check(window: TraceWindow, folder: Path, *, requests: bool = False) -> int:
    """Reads the whole trace (holding no row): how many rows the window replays."""
    rows = request_rows(window, folder) if requests else pod_rows(window, folder)
    return sum(1 for _ in rows)


# --- replaying ---------------------------------------------------------------------------


@dataclass
class _Live:
    row: PodRow
    name: str
    attempt: int = 1
    ran_s: float = 0.0  # a job's seconds since Ready, at the last look


@dataclass
class PodTrace:
    """A pod trace replayed: pods created at their arrival, jobs done `run_s` after Ready,
    services deleted at their time; a pod gone before then (evicted, lost with its node)
    made again, a job from nothing."""

    name: str
    rows: Iterator[PodRow]
    ready_after_seconds: float = 0
    lost_job_minutes: float = 0.0
    jobs_restarted: int = 0
    created: int = 0
    # pod name → its row's `workload` (or `app`) label, for waits by workload
    workloads: dict[str, str] = field(default_factory=dict)
    _next: PodRow | None = None
    _live: dict[tuple[str, str], _Live] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._next = next(self.rows, None)

    def arrive(self, store: Cluster, at: float, now: datetime) -> None:
        """The rows arrived by `at` seconds from the start, created as pods."""
        while self._next is not None and self._next.arrival_s <= at:
            row, self._next = self._next, next(self.rows, None)
            if row.delete_s is not None and row.delete_s <= at:
                continue  # deleted within the step it arrived in
            self.created += 1
            name = f"{self.name}-{self.created}"
            if workload := row.labels.get("workload") or row.labels.get("app"):
                self.workloads[name] = workload
            self._put(store, _Live(row, name), now)

    def _put(self, store: Cluster, live: _Live, now: datetime) -> None:
        row = live.row
        made = pod(
            live.name if live.attempt == 1 else f"{live.name}-{live.attempt}",
            self.name,
            row.requests["cpu"],
            row.requests["memory"],
            created=now,
            extended={k: int(v) for k, v in row.requests.items() if "/" in k},
            priority=row.priority,
            ready_after_seconds=self.ready_after_seconds,
            node_selector=row.node_selector,
            tolerations=row.tolerations,
            namespace=row.namespace,
        )
        made["metadata"]["labels"] = row.labels | {"app": self.name}
        if row.run_s is not None:  # a Job's pod, which its controller makes again
            made["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": live.name,
                    "uid": f"job-{live.name}",
                    "controller": True,
                }
            ]
        key = (row.namespace, made["metadata"]["name"])
        store.put("pods", made)
        self._live[key] = live

    def follow(self, store: Cluster, at: float, now: datetime) -> None:
        """Jobs done and services due deleted; pods gone before then made again (a job's
        work so far lost)."""
        pods = store.objects["pods"]
        for key, live in list(self._live.items()):
            found, row = pods.get(key), live.row
            if found is None or (row.delete_s is not None and row.delete_s <= at):
                del self._live[key]
                if found is not None:  # a service's time is up
                    store.delete("pods", key)
                elif row.delete_s is None or row.delete_s > at:  # evicted, or lost
                    self._again(store, live, now)
                continue
            ready = found["metadata"].get("annotations", {}).get(READY_AT)
            if ready is None or row.run_s is None:
                continue
            live.ran_s = (now - datetime.fromisoformat(ready)).total_seconds()
            if live.ran_s >= row.run_s:
                store.delete("pods", key)
                del self._live[key]

    def _again(self, store: Cluster, live: _Live, now: datetime) -> None:
        if live.row.run_s is not None:
            self.jobs_restarted += 1
            self.lost_job_minutes += live.ran_s / 60
        self._put(store, _Live(live.row, live.name, live.attempt + 1), now)

    @property
    def alive(self) -> int:
        return len(self._live)


@dataclass
class RequestQueue:
    """A request trace replayed into an SQS queue: worker pods (a Deployment), scaled as
    KEDA scales them, each Ready worker taking the next request and busy for its service
    time; a worker removed while busy gives its request back to the queue's head."""

    queue: str
    rows: Iterator[RequestRow]
    workers: Deployment
    max_workers: int
    queue_length: int = KEDA_QUEUE_LENGTH
    waits: list[float] = field(default_factory=list)  # seconds from arrival to taken
    served: int = 0
    _next: RequestRow | None = None
    _waiting: deque[tuple[float, float]] = field(default_factory=deque)  # arrival, service
    _busy: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)
    _recommended: deque[tuple[float, int]] = field(default_factory=deque)
    _idle_since: dict[tuple[str, str], float] = field(default_factory=dict)  # idle workers

    def __post_init__(self) -> None:
        self._next = next(self.rows, None)

    def arrive(self, at: float) -> int:
        """The requests sent by `at`: how many (to put in the SQS queue)."""
        count = 0
        while self._next is not None and self._next.arrival_s <= at:
            self._waiting.append((self._next.arrival_s, self._next.service_s))
            self._next = next(self.rows, None)
            count += 1
        return count

    @property
    def messages(self) -> int:
        """Waiting and in flight, as KEDA counts them (scaleOnInFlight)."""
        return len(self._waiting) + len(self._busy)

    @property
    def busy(self) -> int:
        """Requests a worker has received and not finished: in flight."""
        return len(self._busy)

    def work(self, store: Cluster, at: float) -> int:
        """Busy workers that finished, or were removed; each Ready worker then takes the
        waiting requests one after another, from the second it was free (its last request's
        end, or the last step it was idle at), so a worker serves many short requests within
        a step, not one a step. How many requests were done (their messages deleted)."""
        done = 0
        pods = store.objects["pods"]
        free: list[tuple[float, tuple[str, str]]] = []  # (free from, worker)
        for key, (until, arrival, service) in list(self._busy.items()):
            if key not in pods:  # removed while busy: the request goes back
                self._waiting.appendleft((arrival, service))
                del self._busy[key]
            elif until <= at:
                del self._busy[key]
                done += 1
                free.append((until, key))
        finished = {key for _, key in free}
        for found in self.workers.pods(store):
            metadata = found["metadata"]
            key = (metadata["namespace"], metadata["name"])
            ready = READY_AT in metadata.get("annotations", {})
            if ready and key not in self._busy and key not in finished:
                free.append((self._idle_since.get(key, at), key))  # newly Ready: from now
        self._idle_since = {}
        heapq.heapify(free)
        while free:
            since, key = heapq.heappop(free)
            if not self._waiting:
                self._idle_since[key] = since
                continue
            arrival, service = self._waiting.popleft()
            begin = max(since, arrival)
            self.waits.append(begin - arrival)
            if begin + service <= at:
                done += 1
                heapq.heappush(free, (begin + service, key))
            else:
                self._busy[key] = (begin + service, arrival, service)
        self.served += done
        return done

    def wanted(self, at: float) -> int:
        """KEDA's replicas: ceil(messages / queueLength), at most max, scaled down only to
        the highest recommendation of the last 5 minutes."""
        now = min(math.ceil(self.messages / self.queue_length), self.max_workers)
        self._recommended.append((at, now))
        while self._recommended and self._recommended[0][0] < at - STABILIZATION_S:
            self._recommended.popleft()
        return max(r for _, r in self._recommended)
