"""Reads nodes and pods through the `kubernetes` client, fast.

The client does the HTTP, TLS and auth; we ask it not to build model objects
(`_preload_content=False`) and parse each page's JSON ourselves into compact views, one
page at a time, so memory holds one page plus the views. Pages of 500, as kubectl uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from nodescaler.adapters.k8s.objects import node_from_json, pod_from_json
from nodescaler.domain.cluster import Node, Pod

PAGE_SIZE = 500
NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"


class Connection(Protocol):
    """A configured `kubernetes.client.ApiClient`, and a way to renew its credentials."""

    def api(self) -> Any: ...

    def renew(self) -> None: ...


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]


class KubernetesUnavailableError(RuntimeError):
    """The API server could not be read; names the server and the cause."""


class KubernetesCluster:
    def __init__(self, connection: Connection, *, page_size: int = PAGE_SIZE) -> None:
        self._connection = connection
        self._page_size = page_size

    def _pages(self, list_call: Callable[..., Any], **query: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = self._call(list_call, limit=self._page_size, _continue=token, **query)
            yield page
            token = page.get("metadata", {}).get("continue")
            if not token:
                return

    def _call(self, list_call: Callable[..., Any], **query: Any) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        for attempt in (1, 2):
            try:
                response = list_call(self._core(), **query, _preload_content=False)
                page: dict[str, Any] = json.loads(response.data)
                return page
            except ApiException as error:
                if error.status == 401 and attempt == 1:  # the token expired: renew, once
                    self._connection.renew()
                    continue
                raise KubernetesUnavailableError(
                    f"Kubernetes API: {error.status} {error.reason}"
                ) from None
            except (OSError, HTTPError) as error:  # refused, reset, DNS, TLS, retries spent
                raise KubernetesUnavailableError(f"Kubernetes API unreachable: {error}") from None
        raise AssertionError("unreachable")

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self._connection.api())

    def nodes(self, label_selector: str | None = None) -> list[Node]:
        from kubernetes import client

        query = {"label_selector": label_selector} if label_selector else {}
        return [
            node_from_json(item)
            for page in self._pages(client.CoreV1Api.list_node, **query)
            for item in page.get("items") or ()
        ]

    def pods(self, field_selector: str = NOT_TERMINAL) -> list[Pod]:
        from kubernetes import client

        return [
            pod_from_json(item)
            for page in self._pages(
                client.CoreV1Api.list_pod_for_all_namespaces, field_selector=field_selector
            )
            for item in page.get("items") or ()
        ]

    def snapshot(self) -> Snapshot:
        return Snapshot(tuple(self.nodes()), tuple(self.pods()))
