"""A cluster's own history as a pod trace (`nodescaler trace export`): from Prometheus with
kube-state-metrics, or from `kubectl get pods -A -o json` snapshots taken over time.

Each pod the cluster ran in the range becomes a row (`nodescaler_sandbox.traces`): its
arrival (creation, from the range's start; a pod made before the range arrives at 0), its
requests (the sum of its containers', or its largest init container's when more, as the
scheduler counts them), its namespace, a `workload` label (its controller: a Deployment's
name without the ReplicaSet's hash, a CronJob's without the Job's suffix), and either its
run time (a pod that completed: completion less start) or its deletion (a pod last seen
before the range's end) or neither (still there at the end). DaemonSet pods and static pods
are left out: they come with nodes, not with demand. Nothing is dropped silently: a bad
answer or snapshot is named by file (or query) and field.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from nodescaler.domain.cluster.quantity import parse_quantity
from nodescaler.errors import PermanentError, QuantityError

LEFT_OUT_OWNERS = ("DaemonSet", "Node")  # their pods come with nodes
# kube-state-metrics writes an extended resource's name with `_` for `.` and `/`
# (nvidia.com/gpu → nvidia_com_gpu): the domain ends at its last `_com_`, `_io_`, ...
_DOMAIN_END = re.compile(r"^(?P<domain>.+_(?:com|io|org|net|dev|ai|cloud))_(?P<name>[a-z0-9_]+)$")
_HASH = re.compile(r"^(?P<name>.+)-[a-z0-9]{5,10}$")  # a ReplicaSet's pod-template hash
_SCHEDULED = re.compile(r"^(?P<name>.+)-\d{8,}$")  # a CronJob's Job: its minute since epoch
BASE = {"cpu", "memory"}


class ExportError(PermanentError, ValueError):
    """Input that cannot be read as a cluster's pods: names the file or query and field."""


@dataclass
class ExportedPod:
    namespace: str
    name: str
    created: float  # unix seconds
    requests: dict[str, Decimal] = field(default_factory=dict)  # cpu in cores, memory bytes
    owner_kind: str = ""
    owner_name: str = ""
    started: float | None = None
    completed: float | None = None
    gone: float | None = None  # first known absent (or last seen, from Prometheus)
    node_selector: dict[str, str] = field(default_factory=dict)
    priority: int = 0

    @property
    def workload(self) -> str:
        """The controller a user knows the pod by: its Deployment, CronJob, StatefulSet."""
        if self.owner_kind == "ReplicaSet" and (found := _HASH.match(self.owner_name)):
            return found["name"]
        if self.owner_kind == "Job" and (found := _SCHEDULED.match(self.owner_name)):
            return found["name"]
        return self.owner_name or self.name


# --- writing -----------------------------------------------------------------------------


def _cores(value: Decimal) -> str:
    return f"{int((value * 1000).to_integral_value())}m"


def _seconds(value: float) -> str:
    return f"{max(value, 0):.0f}"


def write_trace(pods: Iterable[ExportedPod], start: float, end: float, path: Path) -> int:
    """The pods in a pod trace at `path`, sorted by arrival; how many rows."""
    ran = sorted(
        (p for p in pods if p.owner_kind not in LEFT_OUT_OWNERS and _inside(p, start, end)),
        key=lambda p: (max(p.created, start), p.namespace, p.name),
    )
    extended = sorted({r for p in ran for r in p.requests if r not in BASE})
    header = ["arrival_s", "cpu", "memory", *extended, "namespace", "labels"]
    header += ["node_selector", "priority", "run_s", "delete_s"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        for p in ran:
            writer.writerow(_row(p, start, end, extended))
    return len(ran)


def _inside(pod: ExportedPod, start: float, end: float) -> bool:
    over = pod.completed if pod.completed is not None else pod.gone
    return pod.created < end and (over is None or over > start)


def _row(pod: ExportedPod, start: float, end: float, extended: list[str]) -> list[str]:
    arrival = max(pod.created - start, 0)
    run = delete = ""
    if pod.completed is not None and pod.completed <= end:
        began = pod.started if pod.started is not None else pod.created
        run = _seconds(pod.completed - max(began, start))
    elif pod.gone is not None and pod.gone < end:
        delete = _seconds(max(pod.gone - start, arrival))
    requests = pod.requests
    return [
        _seconds(arrival),
        _cores(requests.get("cpu", Decimal(0))),
        str(int(requests.get("memory", Decimal(0)))),
        *(str(int(requests[r])) if r in requests else "" for r in extended),
        pod.namespace,
        f"workload={pod.workload}",
        ";".join(f"{k}={v}" for k, v in sorted(pod.node_selector.items())),
        str(pod.priority) if pod.priority else "",
        run,
        delete,
    ]


# --- kubectl snapshots -------------------------------------------------------------------


def snapshot_time(path: Path) -> float:
    """When a snapshot was taken, from its name: ISO 8601 (2026-11-20T10:00:00Z.json) or
    unix seconds (1763632800.json)."""
    stem = path.name.removesuffix(".json")
    try:
        return float(stem) if stem.isdigit() else datetime.fromisoformat(stem).timestamp()
    except ValueError:
        raise ExportError(
            f"{path}: the name is not a time: name each snapshot by when it was taken, "
            "e.g. $(date -u +%Y-%m-%dT%H:%M:%SZ).json or $(date +%s).json"
        ) from None


def _when(text: Any, where: str) -> float:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        raise ExportError(f"{where}: {text!r} is not a time (RFC 3339)") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _requests(spec: Mapping[str, Any], where: str) -> dict[str, Decimal]:
    """What the scheduler counts: the containers' sum, or the largest init container's."""
    summed: dict[str, Decimal] = {}
    init: dict[str, Decimal] = {}
    for kind, into in (("containers", summed), ("initContainers", init)):
        for index, container in enumerate(spec.get(kind) or []):
            asked = ((container or {}).get("resources") or {}).get("requests") or {}
            for resource, text in asked.items():
                try:
                    amount = parse_quantity(text)
                except QuantityError as error:
                    raise ExportError(
                        f"{where}: spec.{kind}[{index}].resources.requests.{resource}: {error}"
                    ) from None
                if kind == "containers":
                    into[resource] = into.get(resource, Decimal(0)) + amount
                else:
                    into[resource] = max(into.get(resource, Decimal(0)), amount)
    return {r: max(summed.get(r, Decimal(0)), init.get(r, Decimal(0))) for r in summed | init}


def _from_object(item: Any, where: str) -> tuple[str, ExportedPod]:
    if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
        raise ExportError(f"{where}: not a pod (no metadata)")
    metadata, spec = item["metadata"], item.get("spec") or {}
    status = item.get("status") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace") or "default"
    if not name or "creationTimestamp" not in metadata:
        raise ExportError(f"{where}: metadata.name and metadata.creationTimestamp: missing")
    where = f"{where} ({namespace}/{name})"
    owners = metadata.get("ownerReferences") or []
    owner: dict[str, Any] = next((o for o in owners if o.get("controller")), {})
    pod = ExportedPod(
        namespace,
        name,
        _when(metadata["creationTimestamp"], f"{where}: metadata.creationTimestamp"),
        _requests(spec, where),
        owner.get("kind", ""),
        owner.get("name", ""),
        node_selector=dict(spec.get("nodeSelector") or {}),
        priority=int(spec.get("priority") or 0),
    )
    if status.get("startTime"):
        pod.started = _when(status["startTime"], f"{where}: status.startTime")
    if status.get("phase") in ("Succeeded", "Failed"):
        finished = [
            _when(s["state"]["terminated"]["finishedAt"], f"{where}: status.containerStatuses")
            for s in status.get("containerStatuses") or []
            if ((s.get("state") or {}).get("terminated") or {}).get("finishedAt")
        ]
        pod.completed = max(finished) if finished else None
    return str(metadata.get("uid") or f"{namespace}/{name}"), pod


def _snapshot_items(path: Path) -> list[Any]:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise ExportError(f"{path}: cannot read it ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ExportError(
            f"{path}:{error.lineno}:{error.colno}: not JSON ({error.msg}): write each "
            "snapshot with kubectl get pods -A -o json"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        raise ExportError(f"{path}: no items list: not the output of kubectl get pods -A -o json")
    return list(document["items"])


def from_snapshots(folder: Path) -> tuple[list[ExportedPod], float, float]:
    """The pods of a folder of snapshots, and the first and last snapshot's times. A pod
    absent from a later snapshot is gone by that snapshot's time."""
    files = sorted(folder.glob("*.json"), key=snapshot_time) if folder.is_dir() else []
    if not files:
        raise ExportError(f"{folder}: no snapshots (*.json) in it")
    pods: dict[str, ExportedPod] = {}
    for path in files:
        taken, seen = snapshot_time(path), set()
        for index, item in enumerate(_snapshot_items(path)):
            uid, pod = _from_object(item, f"{path}: items[{index}]")
            seen.add(uid)
            if uid in pods and pod.completed is None:
                pod.completed = pods[uid].completed
            pods[uid] = pod
        for uid, pod in pods.items():
            if uid not in seen and pod.gone is None:
                pod.gone = taken
    return list(pods.values()), snapshot_time(files[0]), snapshot_time(files[-1])


# --- Prometheus (kube-state-metrics) ----------------------------------------------------

Series = list[dict[str, Any]]


def ksm_queries(start: float, end: float, step: int) -> dict[str, str]:
    """The range's PromQL queries, evaluated at its end (the `@` modifier): each pod's
    creation, start, completion, last sample, owner and summed requests."""
    span, at = f"{max(int(end - start), step)}s", f"@ {end:.0f}"
    return {
        "created": f"max_over_time(kube_pod_created[{span}] {at})",
        "started": f"max_over_time(kube_pod_start_time[{span}] {at})",
        "completed": f"max_over_time(kube_pod_completion_time[{span}] {at})",
        "seen": f"max_over_time(timestamp(kube_pod_created)[{span}:{step}s] {at})",
        "owner": f"max_over_time(kube_pod_owner[{span}] {at})",
        "requests": "sum by (namespace, pod, uid, resource) "
        f"(max_over_time(kube_pod_container_resource_requests[{span}] {at}))",
    }


def resource_name(ksm: str) -> str | None:
    """kube-state-metrics' resource label as Kubernetes names it (nvidia_com_gpu →
    nvidia.com/gpu); None for one it cannot tell (ephemeral storage is not replayed)."""
    if ksm in BASE:
        return ksm
    if found := _DOMAIN_END.match(ksm):
        return f"{found['domain'].replace('_', '.')}/{found['name'].replace('_', '-')}"
    return None


def from_prometheus(
    ask: Callable[[str], Series], start: float, end: float, step: int, chunk: float
) -> tuple[list[ExportedPod], list[str]]:
    """The pods kube-state-metrics saw in [start, end), through `ask` (a query → its
    vector), a `chunk` of seconds at a time (a week at once would load more samples than
    a Prometheus allows a query: 50 million by default); and the resources left out."""
    pods: dict[tuple[str, str, str], ExportedPod] = {}
    left_out: set[str] = set()
    since = start
    while since < end:
        until = min(since + chunk, end)
        left_out |= _window(ask, ksm_queries(since, until, step), pods)
        since = until
    # kube-state-metrics' last scrape stamps every pod it still listed: those are there
    latest = max((p.gone for p in pods.values() if p.gone is not None), default=end)
    for pod in pods.values():
        if pod.gone is not None and pod.gone >= latest - step:
            pod.gone = None
    return list(pods.values()), sorted(left_out)


def _window(
    ask: Callable[[str], Series], queries: dict[str, str], pods: dict[Any, ExportedPod]
) -> set[str]:
    """One window's answers merged into `pods`: a pod's latest times, its largest requests."""
    for series in ask(queries["created"]):
        key = _key(series, queries["created"])
        if key not in pods:
            pods[key] = ExportedPod(key[0], key[1], _value(series, queries["created"]))
    for what in ("started", "completed", "seen"):
        for series in ask(queries[what]):
            if (pod := pods.get(_key(series, queries[what]))) is not None:
                name = "gone" if what == "seen" else what
                value = _value(series, queries[what]) or None
                setattr(pod, name, max(filter(None, (getattr(pod, name), value)), default=None))
    for series in ask(queries["owner"]):
        pod, labels = pods.get(_key(series, queries["owner"])), series["metric"]
        if pod is not None and labels.get("owner_kind", "<none>") != "<none>":
            pod.owner_kind, pod.owner_name = labels["owner_kind"], labels.get("owner_name", "")
    return _add_requests(ask(queries["requests"]), pods, queries["requests"])


def _add_requests(
    series: Series, pods: Mapping[tuple[str, str, str], ExportedPod], query: str
) -> set[str]:
    """Each pod's summed requests (the largest seen); the resources not replayed, named."""
    left_out: set[str] = set()
    for one in series:
        pod = pods.get(_key(one, query))
        resource = str(one["metric"].get("resource", ""))
        name = resource_name(resource)
        if name is None:
            left_out.add(resource)
        elif pod is not None:
            asked = Decimal(str(_value(one, query)))
            pod.requests[name] = max(pod.requests.get(name, asked), asked)
    return left_out


def _key(series: Any, query: str) -> tuple[str, str, str]:
    labels = series.get("metric") if isinstance(series, dict) else None
    if not isinstance(labels, dict) or not labels.get("namespace") or not labels.get("pod"):
        raise ExportError(f"Prometheus answer to {query!r}: a series without namespace and pod")
    return labels["namespace"], labels["pod"], labels.get("uid", "")


def _value(series: Any, query: str) -> float:
    try:
        value = float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        raise ExportError(
            f"Prometheus answer to {query!r}: series {series.get('metric')}: no number"
        ) from None
    if not math.isfinite(value):
        raise ExportError(f"Prometheus answer to {query!r}: series {series['metric']}: {value}")
    return value
