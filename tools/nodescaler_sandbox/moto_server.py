"""moto's server in this process, as AWS answers: each request handled whole before the
next (AWS makes each request atomic; moto's backends are not safe under concurrent
requests), from an empty store and seeded ids (`moto_in_this_process`); a session's
requests to it handed to its WSGI app on the caller's thread, the same bytes in and out
without a socket or a server thread (`answered_in_process`), and signed with a stand-in
signature moto reads the account and region from but never checks (`_signed_for_moto`).
moto's own costs that grow with a run are cut in `moto_speedups`; what it lacks of AWS
is `moto_gaps`'."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse

from nodescaler_sandbox import botocore_models, moto_speedups

MOTO_SEED = 0  # `moto_in_this_process`: every run draws the same ids
# moto loads its thousands of public AMIs into each EC2 backend it makes (after each reset,
# a third of a short run's time); no part here reads one, and the groups' ImageId is none
# of them (instances are the same either way): moto's setting not to load them.
WITHOUT_PUBLIC_AMIS = {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}
UNCHECKED_SIGNATURE = "0" * 64  # what moto's server is sent as a signature (`_signed_for_moto`)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class OneRequestAtATime:
    """A WSGI app handling one request at a time. moto's backends are not safe under
    concurrent requests: a conditional write's check and its write can interleave with
    another's, and a DynamoDB transaction that fails restores a copy of the table taken
    when it began, erasing writes that landed meanwhile. AWS makes each request atomic;
    this does too. Callers still race: their requests interleave."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            return list(self._app(environ, start_response))


_SERVED: dict[str, OneRequestAtATime] = {}  # moto_in_this_process's URL → its app


class _Raw(io.BytesIO):
    """A response body as botocore reads one from urllib3."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.read()


class InProcess:
    """A botocore `before-send` hook: a request to moto's server in this process answered
    by the server's WSGI app on the caller's thread, as the server would answer it (the
    same app, one request at a time), without a socket, a server thread or the handoffs
    of the interpreter's lock between them: most of a simulation's cost is its thousands
    of AWS calls. Anything else (another endpoint) goes over the network as before."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._app = _SERVED[url]
        parts = urlsplit(url)
        self._host, self._port = parts.hostname or "127.0.0.1", str(parts.port or 80)

    def __call__(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        if not request.url.startswith(self.url):
            return None
        body = request.body or b""
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode()
        parts = urlsplit(request.url)
        environ = self._environ(request.method, parts.path, parts.query, body)
        for name, value in request.headers.items():
            text = value.decode() if isinstance(value, bytes) else str(value)
            key = name.upper().replace("-", "_")
            environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = text
        answered: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
            answered[:] = [int(status.split(" ", 1)[0]), headers]

        content = b"".join(self._app(environ, start_response))
        status, headers = answered
        return AWSResponse(request.url, status, _headers(headers), _Raw(content))

    def _environ(self, method: str, path: str, query: str, body: bytes) -> dict[str, Any]:
        return {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, "latin-1") or "/",
            "QUERY_STRING": query,
            "SERVER_NAME": self._host,
            "SERVER_PORT": self._port,
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_HOST": f"{self._host}:{self._port}",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }


def _signed_for_moto() -> None:
    """Requests to moto's server in this process (`_SERVED`) carry a stand-in signature:
    the SigV4 header's credential scope (access key, date, region, service), which moto
    reads to pick the account, the region and the service, and X-Amz-Date, without the
    canonical request and its hashes, which moto never checks (a fifth of a small
    request's cost on the client's side). Any other request is signed as before."""
    from botocore import auth

    whole = auth.SigV4Auth.add_auth
    if getattr(whole, "stand_in_for_moto", False):
        return

    def add_auth(signer: Any, request: Any) -> None:
        if (
            type(signer) is not auth.SigV4Auth
            or signer.credentials is None
            or not any(request.url.startswith(url) for url in _SERVED)
        ):
            return whole(signer, request)  # type: ignore[no-any-return]
        request.context["timestamp"] = auth.get_current_datetime().strftime(auth.SIGV4_TIMESTAMP)
        signer._modify_request_before_signing(request)  # X-Amz-Date, a session's token
        request.headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={signer.scope(request)}, "
            f"SignedHeaders=host;x-amz-date, Signature={UNCHECKED_SIGNATURE}"
        )
        return None

    add_auth.stand_in_for_moto = True  # type: ignore[attr-defined]
    # botocore's own, kept for a test
    add_auth.whole = whole  # type: ignore[attr-defined]
    setattr(auth.SigV4Auth, "add_auth", add_auth)  # noqa: B010


def _headers(pairs: list[tuple[str, str]]) -> Any:
    from botocore.awsrequest import HeadersDict

    headers = HeadersDict()
    for name, value in pairs:
        headers[name] = value
    return headers


def answered_in_process(events: Any, url: str) -> None:
    """Requests sent through `events` (a session's or a client's) to `url`, moto's server
    in this process, answered by it in this thread (`InProcess`)."""
    events.register_last("before-send", InProcess(url), unique_id=f"in-process-{url}")


@contextlib.contextmanager
def moto_in_this_process() -> Iterator[str]:
    """moto's server in this process on a free loopback port, each request atomic, from an
    empty store (moto's stores are the process's: whatever ran before is reset); its URL."""
    from moto.ec2 import utils as ec2_utils
    from moto.moto_api._internal import mock_random
    from moto.moto_api._internal.moto_random import MotoRandom
    from moto.server import ThreadedMotoServer

    requests = logging.getLogger("werkzeug")
    level = requests.level
    requests.setLevel(logging.WARNING)  # a line per request, thousands of them
    # port 0: the server binds a free port itself, so no other test (or xdist worker) takes it
    # between a probe and the bind
    moto_speedups.install()
    _signed_for_moto()
    # read as each backend is made, so set while the server runs; as it was after
    kept = {name: os.environ.get(name) for name in WITHOUT_PUBLIC_AMIS}
    os.environ.update(WITHOUT_PUBLIC_AMIS)
    botocore_models.loaded_once()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None
    wsgi.app = OneRequestAtATime(wsgi.app)
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    _SERVED[url] = wsgi.app
    reset = urllib.request.Request(f"{url}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset).close()
    # moto draws its ids from one generator, request ids too: seeded, a run is replayed id
    # for id. EC2's ids (the instances', so the nodes' names, by which the scheduler breaks
    # ties) from a generator of their own, so a read more or less (a request id) moves none
    mock_random.seed(MOTO_SEED)
    setattr(ec2_utils, "random", MotoRandom(MOTO_SEED))  # noqa: B010
    try:
        yield url
    finally:
        urllib.request.urlopen(reset).close()
        _SERVED.pop(url, None)
        requests.setLevel(level)
        for name, value in kept.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()
