"""AWS for the benches: moto's server in a process of its own on loopback, and a stopwatch
for the time nodescaler spends waiting on AWS calls.

moto's server runs apart from the measured code so that its work never holds the
measured interpreter's lock: while a call is on the wire, the measured process only
waits, as a Lambda function waits on AWS. The stopwatch uses botocore's event hooks on
the same clients the product uses, so whatever is not inside a call is nodescaler's own.

Changes to moto, for speed only, what it answers unchanged: on every message sent to a
FIFO queue its SQS builds the queue's attributes six times, each time counting the
queue's messages three ways, each message's visibility read from the clock through four
datetime conversions; queueing 1,000 evaluations took two minutes. SQS itself takes the
same time to queue the thousandth message as the first. Here moto reads the clock as
epoch milliseconds from `time.time()`, counts each way in one pass with one reading, and
converts each attribute's name once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from nodescaler_sandbox.moto_server import WITHOUT_PUBLIC_AMIS, free_port

REGION = "eu-west-1"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
}


@contextlib.contextmanager
def fake_credentials() -> Iterator[None]:
    """Credentials moto accepts, so botocore never looks further (no metadata service)."""
    saved = {name: os.environ.get(name) for name in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def moto_server(timeout: float = 30) -> Iterator[str]:
    """moto's server in a child process on a free loopback port; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nodescaler_bench.aws", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ | WITHOUT_PUBLIC_AMIS,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's server did not start on {url}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class AwsStopwatch:
    """Counts API calls by operation and times each attempt on the wire.

    An attempt is timed from `before-send` (signed, about to go out) to `before-parse`
    (the answer is in), so what botocore does before and after — validating, serializing,
    signing, parsing — counts as nodescaler's own: it grows with what nodescaler asks for.
    An attempt that ends without an answer (a reset) stops at `response-received`.

    Attempts may overlap (the dispatcher sends its batches several at a time): `waiting`
    sums each operation's attempts, while `seconds` is the wall time during which at least
    one attempt was on the wire, so elapsed time minus `seconds` is nodescaler's own.
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.waiting: defaultdict[str, float] = defaultdict(float)  # summed over attempts
        self.seconds = 0.0  # wall time with an attempt on the wire
        self._lock = threading.Lock()
        self._attempt = threading.local()  # when this thread's attempt went out
        self._on_wire = 0
        self._since = 0.0

    def watch(self, *clients: Any) -> None:
        for client in clients:
            events = client.meta.events
            key = f"bench-stopwatch-{id(self)}"
            events.register("before-call.*.*", self._call, unique_id=f"{key}-call")
            events.register("before-send.*.*", self._send, unique_id=f"{key}-send")
            events.register("before-parse.*.*", self._answered, unique_id=f"{key}-parse")
            events.register("response-received.*.*", self._answered, unique_id=f"{key}-end")

    def reset(self) -> None:
        """Between measurements, with no call on the wire."""
        with self._lock:
            self.calls.clear()
            self.waiting.clear()
            self.seconds = 0.0

    def _call(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1

    def _send(self, **_: Any) -> None:
        now = time.perf_counter()
        self._attempt.sent = now
        with self._lock:
            if self._on_wire == 0:
                self._since = now
            self._on_wire += 1

    def _answered(self, event_name: str, **_: Any) -> None:
        sent = getattr(self._attempt, "sent", None)
        if sent is None:  # `before-parse` came first; `response-received` has nothing to stop
            return
        self._attempt.sent = None
        now = time.perf_counter()
        with self._lock:
            self.waiting[event_name.rsplit(".", 1)[-1]] += now - sent
            self._on_wire -= 1
            if self._on_wire == 0:
                self.seconds += now - self._since


@contextlib.contextmanager
def functions_output(sink: TextIO | None = None) -> Iterator[None]:
    """The functions' log lines and EMF records go to `sink` (a null device by default), as
    in Lambda they go to CloudWatch Logs: written, but not on the bench's terminal."""
    from nodescaler.observability.reports import (
        logger,  # the functions' log, named after the service
    )

    with contextlib.ExitStack() as stack:
        out = sink or stack.enter_context(open(os.devnull, "w"))
        handlers = [h for h in logger.handlers if isinstance(h, logging.StreamHandler)]
        streams = [h.setStream(out) for h in handlers]
        try:
            with contextlib.redirect_stdout(out):
                yield
        finally:
            for handler, stream in zip(handlers, streams, strict=True):
                if stream is not None:
                    handler.setStream(stream)


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value at or above `share` of the values."""
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * share - 1e-9))  # 0.99 × 1000 is 990, not 991
    return ordered[rank - 1]


def serve(argv: list[str]) -> None:
    """moto's server, its SQS made faster (see the module's docstring)."""
    from moto.server import main
    from moto.sqs import models

    exact = models.unix_time_millis  # type: ignore[attr-defined]

    def unix_time_millis(dt: Any = None) -> float:
        return time.time() * 1000.0 if dt is None else float(exact(dt))

    def counted(counts_it: Callable[[float, Any], bool]) -> property:
        def count(queue: Any) -> int:
            now = time.time() * 1000.0
            return sum(1 for message in queue._messages if counts_it(now, message))

        return property(count)

    # moto's definitions: visible once the clock is past visible_at; delayed until delayed_until
    ways: dict[str, Callable[[float, Any], bool]] = {
        "approximate_number_of_messages": lambda now, m: (
            now > m.visible_at and now >= m.delayed_until
        ),
        "approximate_number_of_messages_delayed": lambda now, m: now < m.delayed_until,
        "approximate_number_of_messages_not_visible": lambda now, m: now <= m.visible_at,
    }
    for name, counts_it in ways.items():
        setattr(models.Queue, name, counted(counts_it))
    models.camelcase_to_underscores = functools.cache(models.camelcase_to_underscores)  # type: ignore[attr-defined]
    models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined]
    main(argv)


if __name__ == "__main__":
    serve(sys.argv[1:])
