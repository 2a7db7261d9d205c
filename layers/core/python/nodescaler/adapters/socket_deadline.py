"""A request's whole deadline, however slowly its server drips the answer: a socket's
timeout bounds each read, never their sum, so at the deadline every socket the request
opened is shut down, which ends the read it is blocked in (Prometheus, Kubernetes)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

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
