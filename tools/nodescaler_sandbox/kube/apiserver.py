"""A Kubernetes API server on loopback, for the tests, the sandbox and the bench.

No kube-apiserver can run here, so this one speaks the REST API for what nodescaler uses,
with the real semantics: nodes (list, get, merge and strategic merge patch), pods (list
across or within namespaces, get), PodDisruptionBudgets (list and get, with their status
computed live), and the eviction subresource, which answers 429 when a budget forbids it
and honours `deleteOptions.gracePeriodSeconds`. Lists honour label and field selectors
and `limit`/`continue` pagination. Its discovery offers what it serves (`resources.py`),
DaemonSets too, which `kubectl drain` reads, and a verb it does not serve is answered 405,
so Debian's kubectl works against it (tests/tools/test_kubectl.py). Each object is
serialized once when it is written and pages are joined from those bytes, so the server's
own cost is small and the same for every client. An optional bearer token makes it answer
401 to anyone else, and an optional certificate (`tls.issue`) makes it serve HTTPS only, as
a real API server does.

For fault tests it can also fail on purpose (`failing`): go down (its port refuses
connections, and open ones are cut), answer late, or answer 401 or 500 to everything.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from nodescaler_sandbox.kube.resources import (
    GETS,
    LISTS,
    discovery,
    is_resource_path,
)
from nodescaler_sandbox.kube.selectors import FieldSelector, LabelSelector, SelectorError
from nodescaler_sandbox.kube.store import (
    KINDS,
    ApiError,
    Cluster,
    is_ready,
    is_terminating,
    merge_patch,
    status_body,
)
from nodescaler_sandbox.kube.tls import ServerCertificate

# The objects it serves are the store's; its users import them from here too.
__all__ = ["ApiError", "Cluster", "Fault", "KubeApiServer", "is_ready", "is_terminating"]


MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_NODE = re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$")
_EVICTION = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/eviction$")
_EVENTS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$")


class Fault(StrEnum):
    """How the server fails while `failing`."""

    DOWN = "down"  # nothing listens: connections are refused, open ones cut
    SLOW = "slow"  # every request is answered `slow_seconds` late (or when the fault ends)
    UNAUTHORIZED = "401"  # every request is answered 401, as with credentials gone bad
    SERVER_ERROR = "500"  # every request is answered 500 InternalError


class KubeApiServer:
    """`with KubeApiServer() as server:` serves `server.cluster` at `server.url`."""

    def __init__(
        self,
        cluster: Cluster | None = None,
        *,
        token: str | None = None,
        certificate: ServerCertificate | None = None,
    ) -> None:
        self.cluster = cluster or Cluster()
        self.token = token
        self.certificate = certificate
        self.requests: list[str] = []  # "GET /api/v1/nodes?limit=500", for the tests
        self.fault: Fault | None = None  # set through `failing`
        self.slow_seconds = 30.0
        self.faulted: Counter[Fault] = Counter()  # requests answered by a fault (DOWN: none)
        self._pages: dict[tuple[str, str, str, str, int], list[bytes]] = {}
        self._connections: set[socket.socket] = set()
        self._fault_over = threading.Event()
        self._lock = threading.Lock()
        self._listen(("127.0.0.1", 0))

    def _listen(self, address: tuple[str, int]) -> None:
        self._server = ThreadingHTTPServer(address, self._handler())
        self._server.daemon_threads = True
        if self.certificate is not None:  # every connection a TLS one, or none
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.certificate.cert_file, self.certificate.key_file)
            # the handshake in the connection's own thread, so one bad client blocks no other
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        host, port = self._server.server_address[:2]
        self._address = (str(host), int(port))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _stop_listening(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for connection in list(self._connections):  # as a stopped server's would be
            with suppress(OSError):  # already closed by its client
                connection.shutdown(socket.SHUT_RDWR)

    @property
    def url(self) -> str:
        host, port = self._address
        scheme = "https" if self.certificate is not None else "http"
        return f"{scheme}://{host}:{port}"

    def __enter__(self) -> KubeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._fault_over.set()  # late answers go now
        if self.fault is not Fault.DOWN:
            self._stop_listening()

    @contextmanager
    def failing(self, fault: Fault) -> Iterator[None]:
        """The server fails this way until the block ends, then serves again at its URL."""
        self._fault_over.clear()
        self.fault = fault
        if fault is Fault.DOWN:
            self._stop_listening()
        try:
            yield
        finally:
            self.fault = None
            self._fault_over.set()
            if fault is Fault.DOWN:  # the same port again, as a restarted server would be
                self._listen(self._address)
                self._thread.start()

    def _fail(self) -> None:
        """Answer as the current fault says, if there is one."""
        fault = self.fault
        if fault is None:
            return
        with self._lock:
            self.faulted[fault] += 1
        if fault is Fault.SLOW:
            self._fault_over.wait(self.slow_seconds)  # then served: late, whoever still waits
        elif fault is Fault.UNAUTHORIZED:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        elif fault is Fault.SERVER_ERROR:
            raise ApiError(500, "InternalError", "Internal error occurred: etcdserver: timeout")

    # --- lists --------------------------------------------------------------------------

    def _selected(self, kind: str, namespace: str, labels: str, fields: str) -> list[bytes]:
        """The serialized items a list selects, kept per resource version for its pages."""
        cluster = self.cluster
        key = (kind, namespace, labels, fields, cluster.resource_version)
        if key not in self._pages:
            by_labels = LabelSelector.parse(labels) if labels else None
            by_fields = FieldSelector.parse(fields) if fields else None
            selected = []
            for obj_key in sorted(cluster.objects[kind]):
                if namespace and obj_key[0] != namespace:
                    continue
                obj = cluster.objects[kind][obj_key]
                if by_labels and not by_labels.matches(obj["metadata"].get("labels") or {}):
                    continue
                if by_fields and not by_fields.matches(obj):
                    continue
                if kind == "poddisruptionbudgets":
                    selected.append(self._served(kind, obj))
                else:
                    selected.append(cluster.rendered[kind][obj_key])
            if len(self._pages) > 64:
                self._pages.clear()
            self._pages[key] = selected
        return self._pages[key]

    def _served(self, kind: str, obj: dict[str, Any], *, alone: bool = False) -> bytes:
        """An object as the server answers it: a budget with its status computed now; alone
        (not a list's item) with its kind and apiVersion, which a list's items go without."""
        if kind == "poddisruptionbudgets":
            obj = obj | {"status": self.cluster.budget_status(obj)}
        if alone:
            kind_name, api_version = KINDS[kind]
            obj = {"kind": kind_name, "apiVersion": api_version} | obj
        return json.dumps(obj).encode()

    def list(self, kind: str, namespace: str, query: dict[str, str]) -> bytes:
        with self.cluster.lock:
            resource_version = self.cluster.resource_version
            start = 0
            if token := query.get("continue"):
                try:
                    state = json.loads(base64.urlsafe_b64decode(token))
                    resource_version, start = int(state["rv"]), int(state["start"])
                except (ValueError, KeyError) as error:
                    raise ApiError(400, "BadRequest", f"invalid continue token: {error}") from None
                if resource_version != self.cluster.resource_version:
                    raise ApiError(
                        410,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent "
                        "list result. You can start a new list without the continue parameter.",
                    )
            try:
                items = self._selected(
                    kind, namespace, query.get("labelSelector", ""), query.get("fieldSelector", "")
                )
            except SelectorError as error:
                raise ApiError(400, "BadRequest", str(error)) from None
        limit = int(query.get("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(resource_version)}
        if start + limit < len(items):
            state = {"rv": resource_version, "start": start + limit}
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
            metadata["remainingItemCount"] = len(items) - start - limit
        kind_name, api_version = KINDS[kind]
        head = json.dumps(
            {"kind": f"{kind_name}List", "apiVersion": api_version, "metadata": metadata}
        )
        return head[:-1].encode() + b',"items":[' + b",".join(page) + b"]}"

    # --- the HTTP side ------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server (the HTTP server makes one per
        request)."""
        return type("Handler", (_Handler,), {"api": self})

    def _installed(self, kind: str, method: str, path: str) -> None:
        if kind in self.cluster.not_installed:
            raise ApiError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({method} {path})",
            )

    def route(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        body: Any,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        if method == "GET" and (answer := self._get(path, query)) is not None:
            return answer
        if method == "PATCH" and (match := _NODE.match(path)):
            return self._patch_node(match["name"], body, content_type)
        if method == "POST" and (match := _EVENTS.match(path)):
            return self._post_event(match["ns"], body)
        if method == "POST" and (match := _EVICTION.match(path)):
            options = (body or {}).get("deleteOptions") or {}
            self.cluster.evict(match["ns"], match["name"], options.get("gracePeriodSeconds"))
            return 201, json.dumps(status_body(201, "", "evicted")).encode()
        if is_resource_path(path) or _EVICTION.match(path):
            # a resource it serves, by a verb it does not (its discovery lists the verbs)
            raise ApiError(
                405,
                "MethodNotAllowed",
                f"the server does not allow this method on the requested resource ({method})",
            )
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({method} {path})"
        )

    def _get(self, path: str, query: dict[str, str]) -> tuple[int, bytes] | None:
        """A GET's answer: the version, discovery, a list or one object; None when the path
        is none of them."""
        if path == "/version":
            return 200, json.dumps({"major": "1", "minor": "31", "gitVersion": "v1.31.0"}).encode()
        if (document := discovery(path)) is not None:
            return 200, json.dumps(document).encode()
        for pattern, kind in LISTS:
            if match := pattern.match(path):
                self._installed(kind, "GET", path)
                return 200, self.list(kind, match.groupdict().get("ns") or "", query)
        for pattern, kind in GETS:
            if match := pattern.match(path):
                self._installed(kind, "GET", path)
                key = (match.groupdict().get("ns") or "", match["name"])
                return 200, self._served(kind, self.cluster.get(kind, key), alone=True)
        return None

    def _patch_node(self, name: str, body: Any, content_type: str) -> tuple[int, bytes]:
        """A node patched, as kubectl cordon and the Python client (for a dict body) do."""
        # They send a strategic merge patch: for the fields patched here the same as a merge
        # patch; a resourceVersion in it must be the object's (optimistic concurrency).
        media_type = content_type.partition(";")[0].strip()
        if media_type not in MERGE_PATCHES or not isinstance(body, dict):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the loopback API server takes merge patches of an object only "
                f"({', '.join(MERGE_PATCHES)}), not {content_type}",
            )
        cluster = self.cluster
        with cluster.lock:
            node = cluster.get("nodes", ("", name))
            asked = (body.get("metadata") or {}).get("resourceVersion")
            if asked is not None and asked != node["metadata"].get("resourceVersion"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on nodes "{name}": the object '
                    "has been modified; please apply your changes to the latest version",
                )
            patched = cluster.put("nodes", merge_patch(json.loads(json.dumps(node)), body))
        return 200, self._served("nodes", patched, alone=True)

    def _post_event(self, namespace: str, body: Any) -> tuple[int, bytes]:
        """An Event created, its name completed from generateName as the API server does."""
        event = dict(body or {})
        metadata = dict(event.get("metadata") or {})
        if "name" not in metadata:
            generated = metadata.get("generateName", "event.")
            metadata["name"] = f"{generated}{self.cluster.resource_version}"
        event["metadata"] = metadata | {"namespace": namespace}
        return 201, self._served("events", self.cluster.put("events", event), alone=True)


class _Handler(BaseHTTPRequestHandler):
    """One request to the loopback API server: authenticated, routed, answered in JSON."""

    api: KubeApiServer  # the server it answers for (`KubeApiServer._handler` binds it)
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms stall

    def log_message(self, *_: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.api._connections.add(self.connection)

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            pass  # the client gave up on a late answer, or `failing` cut it off
        finally:
            self.api._connections.discard(self.connection)

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self, method: str) -> None:
        server = self.api
        url = urlparse(self.path)
        server.requests.append(f"{method} {self.path}")
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            server._fail()
            if server.token and self.headers.get("Authorization") != f"Bearer {server.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            code, body = server.route(
                method,
                url.path,
                query,
                self._body(),
                content_type=self.headers.get("Content-Type", "application/json"),
            )
        except ApiError as error:
            code, body = error.code, json.dumps(error.body).encode()
        self._send(code, body)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else {}

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:  # answered 405: no resource here takes it
        self._serve("PUT")

    def do_DELETE(self) -> None:  # answered 405, as kubectl drain learns without eviction
        self._serve("DELETE")
