"""A request's whole deadline, however slowly its server drips the answer: a socket's
timeout bounds each read, never their sum, so at the deadline every socket the request
opened is shut down, which ends the read it is blocked in (Prometheus, Kubernetes): each
client's connections are watched from their first socket (`watched_opener` for urllib's,
`watched_client` for the Kubernetes client's urllib3 pools)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import cache, partial
from typing import Any

Sockets = Callable[[], socket.socket | None]  # the socket in use, when there is one yet


class Watchdog:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._watched: list[Sockets] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket | Sockets) -> None:
        watched = sock if callable(sock) else lambda: sock
        with self._lock:
            self._watched.append(watched)
            if self.expired:
                _shut(watched())

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for watched in self._watched:
                _shut(watched())

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket | None) -> None:
    if sock is None:
        return
    with contextlib.suppress(OSError):  # closed already, or (TLS) detached from its wrapper
        sock.shutdown(socket.SHUT_RDWR)


# The watchdog of the request this thread is making, for connections a pool hands out
_current: ContextVar[Watchdog | None] = ContextVar("watchdog", default=None)


@contextlib.contextmanager
def watching(seconds: float) -> Iterator[Watchdog]:
    """A watchdog for `seconds`, which `current()` returns meanwhile."""
    with Watchdog(seconds) as watchdog:
        token = _current.set(watchdog)
        try:
            yield watchdog
        finally:
            _current.reset(token)


def current() -> Watchdog | None:
    return _current.get()


# --- the connections a watchdog watches: urllib's (Prometheus), urllib3's (Kubernetes) ------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the bearer token or a signature to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Watched(http.client.HTTPConnection):
    """A connection whose sockets (the TCP one, then TLS's over it) its watchdog can end."""

    def __init__(self, *args: Any, watchdog: Watchdog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watchdog = watchdog

    def connect(self) -> None:
        create: Callable[..., socket.socket] = socket.create_connection  # http.client's

        def created(*args: Any, **kwargs: Any) -> socket.socket:
            sock = create(*args, **kwargs)
            self._watchdog.watch(sock)  # before a TLS handshake the server may drip too
            return sock

        self._create_connection = created
        super().connect()
        self._watchdog.watch(self.sock)


class _WatchedHttps(_Watched, http.client.HTTPSConnection):
    def __init__(self, *args: Any, watchdog: Watchdog, **kwargs: Any) -> None:
        super().__init__(*args, watchdog=watchdog, **kwargs)
        # the context HTTPSConnection.connect wraps its socket with (its default, or given)
        vars(self)["_context"] = _WatchedTls(vars(self)["_context"], watchdog)


class _WatchedTls:
    """An SSL context whose sockets are watched from before their handshake (which the
    server may drip too), not from after it."""

    def __init__(self, context: ssl.SSLContext, watchdog: Watchdog) -> None:
        self._tls = context
        self._watchdog = watchdog

    def wrap_socket(self, sock: socket.socket, **kwargs: Any) -> ssl.SSLSocket:
        wrapped = self._tls.wrap_socket(sock, do_handshake_on_connect=False, **kwargs)
        self._watchdog.watch(wrapped)
        wrapped.do_handshake()
        return wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tls, name)


class _WatchedHandler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """HTTP and HTTPS (as urllib's own handlers open them) over watched connections."""

    def __init__(self, watchdog: Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_Watched, watchdog=self._watchdog), req)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        watched = partial(_WatchedHttps, watchdog=self._watchdog)
        return self.do_open(watched, req)


def watched_opener(watchdog: Watchdog) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_NoRedirects, _WatchedHandler(watchdog))


def watched_client(api_client: Any) -> Any:
    """The client, whose connections a request's watchdog shuts at its deadline."""
    manager = api_client.rest_client.pool_manager
    pools = _watched_pools()
    if manager.pool_classes_by_scheme is not pools:
        manager.pool_classes_by_scheme = pools
        manager.clear()  # any pool made before is made again, watched
    return api_client


@cache
def _watched_pools() -> dict[str, type]:
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def watched(pool: type[HTTPConnectionPool]) -> type:
        class Watched(pool):  # type: ignore[valid-type,misc]
            def _get_conn(self, timeout: float | None = None) -> Any:
                connection = super()._get_conn(timeout)
                if (watchdog := current()) is not None:
                    watchdog.watch(lambda: connection.sock)
                return connection

        return Watched

    return {"http": watched(HTTPConnectionPool), "https": watched(HTTPSConnectionPool)}
