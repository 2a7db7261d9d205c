"""Reads nodes and pods through the `kubernetes` client, fast.

The client does the HTTP, TLS and auth; we ask it not to build model objects
(`_preload_content=False`) and decode each page ourselves, only the fields we read
(`json_fields.py`), into compact views, a page at a time (500, as kubectl's pages)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar

import msgspec

from nodescaler.adapters.k8s.conversion import (
    budget_from_wire,
    node_from_wire,
    pod_from_wire,
    unschedulable,
)
from nodescaler.adapters.k8s.json_fields import (
    BudgetList,
    CapacityBufferList,
    DaemonSetList,
    DeploymentList,
    ListMeta,
    NodeList,
    ObjectMeta,
    PodList,
    PodTemplateList,
    PodTemplateSpec,
    PodWire,
    UnboundPodList,
)
from nodescaler.adapters.socket_deadline import watched_client, watching
from nodescaler.deadline import Deadline
from nodescaler.domain.ahead.capacity_buffers import GROUP, VERSION, Workload, read_buffer, within
from nodescaler.domain.cluster.snapshot import (
    ClusterBuffer,
    DisruptionBudget,
    Node,
    Pod,
    Snapshot,
    Taint,
)
from nodescaler.domain.cluster.startup_taints import KNOWN, StartupTaints
from nodescaler.domain.outside_text import MAX_MESSAGE, outside
from nodescaler.domain.scaling.limits import BufferCaps
from nodescaler.errors import KubernetesUnavailableError, NodescalerError, OutOfTimeError

PAGE_SIZE = 500
# Seconds to connect, and for each whole answer (a page), not each socket read, which a
# server dripping its bytes would hold for ever. The client's default, forever, would hold
# the evaluation until Lambda's timeout, and lose the scale-up its other metrics ask for.
TIMEOUT_SECONDS = 5.0


class ListPage(Protocol):
    @property
    def metadata(self) -> ListMeta: ...


Page = TypeVar("Page", bound=ListPage)
NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
# The fast path's light look: pods no node is bound to, still Pending (the API server filters).
UNBOUND_PENDING = "spec.nodeName=,status.phase=Pending"


class Connection(Protocol):
    """A configured `kubernetes.client.ApiClient`, and a way to renew its credentials."""

    def api(self) -> Any: ...
    def renew(self) -> None: ...


def pages(
    fetch: Callable[..., bytes], page_type: type[Page], page_size: int, **query: Any
) -> Iterator[Page]:
    """A list, page after page (`limit` and `continue`), decoded straight into `page_type`."""
    decoder = msgspec.json.Decoder(page_type)
    token: str | None = None
    while True:
        data = fetch(limit=page_size, _continue=token, **query)
        try:
            page = decoder.decode(data)
        except msgspec.ValidationError as error:
            raise KubernetesUnavailableError(
                f"Kubernetes API: unexpected answer: {outside(error)}"
            ) from None
        yield page
        token = page.metadata.next
        if not token:
            return


def _refused_by_reason(error: Any) -> KubernetesUnavailableError:
    return KubernetesUnavailableError(f"Kubernetes API: {error.status} {outside(error.reason)}")


class CoreApi:
    """Kubernetes' core API over a connection, as both readers of the cluster call it:
    every answer raw, within a timeout, with credentials renewed once on a 401; `refused`
    words the error for a call that had to succeed."""

    def __init__(
        self,
        connection: Connection,
        *,
        page_size: int = PAGE_SIZE,
        timeout_seconds: float = TIMEOUT_SECONDS,
        refused: Callable[[Any], KubernetesUnavailableError] = _refused_by_reason,
        deadline: Deadline | None = None,
    ) -> None:
        self.connection = connection
        self.page_size = page_size
        self._timeout_seconds = timeout_seconds
        self._refused = refused
        self._deadline = deadline  # the invocation's: no answer is waited for past it
        self.bytes_read = 0  # every answer's body read, counted: what a look costs the API server

    def listed(
        self, list_call: Callable[..., Any], page_type: type[Page], **query: Any
    ) -> Iterator[Page]:
        return pages(partial(self.answer, list_call), page_type, self.page_size, **query)

    def budgets(self) -> tuple[DisruptionBudget, ...] | None:
        """Every PodDisruptionBudget, with how many disruptions it allows now; None when
        they cannot be read (a role without the right): then no eviction is counted on."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            return tuple(
                budget_from_wire(item)
                for page in pages(
                    partial(
                        self.request,
                        client.PolicyV1Api.list_pod_disruption_budget_for_all_namespaces,
                    ),
                    BudgetList,
                    self.page_size,
                )
                for item in page.items
            )
        except ApiException:
            return None

    def answer(self, call: Callable[..., Any], *args: Any, **query: Any) -> bytes:
        """The raw answer to a call that must succeed: any refusal is unavailability."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self.request(call, *args, **query)
        except ApiException as error:
            raise self._refused(error) from None

    def request(self, call: Callable[..., Any], *args: Any, **query: Any) -> bytes:
        """The raw answer; an ApiException for any status but 401, which renews once;
        KubernetesUnavailableError when the server can't be reached or answer in time."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        for attempt in (1, 2):
            try:
                owner = getattr(client, call.__qualname__.partition(".")[0])  # CoreV1Api, ...
                api = owner(watched_client(self.connection.api()))
                data = self._whole_answer(partial(call, api, *args, **query))
                self.bytes_read += len(data)
                return data
            except ApiException as error:
                if error.status == 401 and attempt == 1:  # the token expired: renew, once
                    self.connection.renew()
                    continue
                raise
            except (OSError, HTTPError) as error:  # refused, reset, DNS, TLS, retries spent
                said = outside(error, MAX_MESSAGE)
                raise KubernetesUnavailableError(f"Kubernetes API unreachable: {said}") from None
        raise AssertionError("unreachable")

    def _whole_answer(self, call: Callable[..., Any]) -> bytes:
        """The answer, read whole by the deadline; else `KubernetesUnavailableError`, or
        `OutOfTimeError` when the invocation's deadline cut the read."""
        from urllib3.exceptions import HTTPError, ReadTimeoutError

        seconds, cut = self._time_for()
        late = _late(seconds, cut)
        timeout = (seconds, seconds)  # connect, read: a float alone would be ignored
        with watching(seconds) as watchdog:
            try:
                answer = bytes(call(_preload_content=False, _request_timeout=timeout).data)
            except (OSError, HTTPError) as error:  # a read timed out, or the deadline came
                cause = getattr(error, "reason", error)
                if watchdog.expired or isinstance(cause, ReadTimeoutError):
                    raise late from None
                raise
        if watchdog.expired:  # the server stopped early: the answer may be cut short
            raise late
        return answer

    def _time_for(self) -> tuple[float, bool]:
        """An answer's whole time (kubernetesTimeoutSeconds, or what the invocation has
        left when less), and whether the invocation cut it; none left: not asked."""
        left = self._deadline.left() if self._deadline is not None else None
        if left is None or left >= self._timeout_seconds:
            return self._timeout_seconds, False
        if left <= 0:
            raise OutOfTimeError("Kubernetes API: not asked, the invocation has no time left")
        return left, True


def _late(seconds: float, cut: bool) -> NodescalerError:
    """No answer in time: the server's fault, or (cut by the invocation) nobody's, so
    `OutOfTimeError`: the record is tried again later, never counted as a metric failure."""
    if cut:
        return OutOfTimeError(
            f"Kubernetes API: no answer within {seconds:g}s (the invocation's time left)"
        )
    return KubernetesUnavailableError(f"Kubernetes API: no answer within {seconds:g}s")


def _template_pod(metadata: ObjectMeta, template: PodTemplateSpec, *, daemon: bool = False) -> Pod:
    """A pod of a template, named for its owner: a CapacityBuffer's room, or a DaemonSet's."""
    labelled = msgspec.structs.replace(metadata, labels=template.metadata.labels)
    return replace(pod_from_wire(PodWire(labelled, template.spec)), daemon_set=daemon)


class KubernetesCluster:
    """`SnapshotSource` over the API server: every node and non-terminal pod."""

    def __init__(
        self,
        connection: Connection,
        *,
        page_size: int = PAGE_SIZE,
        timeout_seconds: float = TIMEOUT_SECONDS,
        deadline: Deadline | None = None,
        buffer_caps: BufferCaps | None = None,
        startup: StartupTaints | None = None,
        daemon_sets: bool = True,  # read for a group at zero's template: evaluate's alone
    ) -> None:
        self._api = CoreApi(
            connection, page_size=page_size, timeout_seconds=timeout_seconds, deadline=deadline
        )
        self._buffer_caps = buffer_caps or BufferCaps()  # the pods buffers may ask room for
        self._startup = startup or KNOWN  # a node with one is still starting
        self._daemon_sets = daemon_sets

    def nodes(self, label_selector: str | None = None) -> list[Node]:
        from kubernetes import client

        query = {"label_selector": label_selector} if label_selector else {}
        return [
            node_from_wire(item, self._startup)
            for page in self._api.listed(client.CoreV1Api.list_node, NodeList, **query)
            for item in page.items
        ]

    def pods(self, field_selector: str = NOT_TERMINAL) -> list[Pod]:
        from kubernetes import client

        return [
            pod_from_wire(item)
            for page in self._api.listed(
                client.CoreV1Api.list_pod_for_all_namespaces, PodList, field_selector=field_selector
            )
            for item in page.items
        ]

    def budgets(self) -> tuple[DisruptionBudget, ...] | None:
        return self._api.budgets()

    def unschedulable_pods(self) -> dict[str, Pod]:
        """The unbound Pending pods the scheduler marked Unschedulable (Cluster Autoscaler
        acts on no other), by uid, read field-selected and paged: the fast path's look."""
        from kubernetes import client

        return {
            item.metadata.uid or item.metadata.namespace + "/" + item.metadata.name: pod_from_wire(
                PodWire(item.metadata, item.spec, item.status)
            )
            for page in self._api.listed(
                client.CoreV1Api.list_pod_for_all_namespaces,
                UnboundPodList,
                field_selector=UNBOUND_PENDING,
            )
            for item in page.items
            if unschedulable(item.status)
        }

    @property
    def bytes_read(self) -> int:
        return self._api.bytes_read

    def mark(self, node: str, taint: Taint, marked: bool) -> None:
        """`NodeMarks`. A node's taints are an atomic list (no merge key): the patch carries
        the whole list, every other taint as read, and the resourceVersion read, so a
        change made in between is refused (409), never overwritten; infra/kubernetes lets
        evaluate change nothing else."""
        import json

        from kubernetes import client

        read = json.loads(self._api.answer(client.CoreV1Api.read_node, node))
        taints = (read.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if t.get("key") != taint.key]
        ours = {"key": taint.key, "effect": taint.effect}
        wanted = [*kept, ours] if marked else kept
        if wanted == taints:
            return
        version = read["metadata"]["resourceVersion"]
        patch = {"metadata": {"resourceVersion": version}, "spec": {"taints": wanted}}
        self._api.answer(client.CoreV1Api.patch_node, node, patch)

    def capacity_buffers(self) -> tuple[ClusterBuffer, ...]:
        """Every CapacityBuffer, read with the PodTemplates it refers to; none on a cluster
        without the CRD (404); one named problem when they cannot be listed (doubt)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        listing = partial(
            self._api.request,
            client.CustomObjectsApi.list_cluster_custom_object,
            GROUP,
            VERSION,
            "capacitybuffers",
        )
        try:
            found = [
                i for p in pages(listing, CapacityBufferList, self._api.page_size) for i in p.items
            ]
            templates = self._pod_templates() if found else {}
            scaling = any((i.get("spec") or {}).get("scalableRef") for i in found)
            workloads = self._deployments() if scaling else {}
        except ApiException as error:
            if error.status == 404:
                return ()
            said = f"could not be listed: {error.status} {outside(error.reason)}"
            return (ClusterBuffer("*", "*", problem=said),)
        caps = self._buffer_caps
        read = [read_buffer(item, templates, workloads, caps.per_buffer) for item in found]
        return within(read, caps.total)

    def daemon_sets(self) -> tuple[Pod, ...] | None:
        """A pod of each DaemonSet, as its template asks (`daemon_sets.less_daemon_sets`);
        None if refused (a role without the right: nodes taken whole, as before)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        listing = partial(self._api.request, client.AppsV1Api.list_daemon_set_for_all_namespaces)
        try:
            read = [i for p in pages(listing, DaemonSetList, self._api.page_size) for i in p.items]
        except ApiException as error:
            if error.status in (403, 404):
                return None
            raise _refused_by_reason(error) from None  # as a list of nodes or pods would
        return tuple(_template_pod(i.metadata, i.spec.template, daemon=True) for i in read)

    def _pod_templates(self) -> dict[tuple[str, str], Pod]:
        from kubernetes import client

        listing = partial(self._api.request, client.CoreV1Api.list_pod_template_for_all_namespaces)
        return {
            (item.metadata.namespace, item.metadata.name): _template_pod(
                item.metadata, item.template
            )
            for page in pages(listing, PodTemplateList, self._api.page_size)
            for item in page.items
        }

    def _deployments(self) -> dict[tuple[str, str], Workload]:
        """The Deployments a buffer's scalableRef may name: replicas and pod shape."""
        from kubernetes import client

        listing = partial(self._api.request, client.AppsV1Api.list_deployment_for_all_namespaces)
        return {
            (item.metadata.namespace, item.metadata.name): Workload(
                item.spec.replicas, _template_pod(item.metadata, item.spec.template)
            )
            for page in pages(listing, DeploymentList, self._api.page_size)
            for item in page.items
        }

    def snapshot(self) -> Snapshot:
        # Hundreds of thousands of small, acyclic objects: the cyclic collector would
        # rescan them again and again while they are built, for nothing to collect.
        collecting = gc.isenabled()
        gc.disable()
        try:
            nodes, pods = tuple(self.nodes()), tuple(self.pods())
            daemon_sets = self.daemon_sets() if self._daemon_sets else None
            return Snapshot(nodes, pods, self.budgets(), self.capacity_buffers(), daemon_sets)
        finally:
            if collecting:
                gc.enable()
