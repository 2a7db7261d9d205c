"""AWS for the benches: moto's server in a process of its own on loopback, and a stopwatch
for the time nodescaler spends waiting on AWS calls.

moto's server runs apart from the measured code so that its work never holds the
measured interpreter's lock: while a call is on the wire, the measured process only
waits, as a Lambda function waits on AWS. The stopwatch uses botocore's event hooks on
the same clients the product uses, so whatever is not inside a call is nodescaler's own.

One change to moto, for speed only: its SQS checks every message's visibility on each
send, each check reading the clock through four datetime conversions, which made
queueing 1,000 evaluations take two minutes. Here its SQS reads the same epoch
milliseconds from `time.time()`; what it answers is unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any, TextIO

REGION = "eu-west-1"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
        [sys.executable, "-m", "nodescaler_tools.bench.aws", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.waiting: defaultdict[str, float] = defaultdict(float)  # seconds on the wire
        self._sent: float | None = None

    def watch(self, *clients: Any) -> None:
        for client in clients:
            events = client.meta.events
            key = f"bench-stopwatch-{id(self)}"
            events.register("before-call.*.*", self._call, unique_id=f"{key}-call")
            events.register("before-send.*.*", self._send, unique_id=f"{key}-send")
            events.register("before-parse.*.*", self._answered, unique_id=f"{key}-parse")
            events.register("response-received.*.*", self._answered, unique_id=f"{key}-end")

    def reset(self) -> None:
        self.calls.clear()
        self.waiting.clear()

    @property
    def seconds(self) -> float:
        return sum(self.waiting.values())

    def _call(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def _send(self, **_: Any) -> None:
        self._sent = time.perf_counter()

    def _answered(self, event_name: str, **_: Any) -> None:
        if self._sent is not None:
            self.waiting[event_name.rsplit(".", 1)[-1]] += time.perf_counter() - self._sent
            self._sent = None


@contextlib.contextmanager
def functions_output(sink: TextIO | None = None) -> Iterator[None]:
    """The functions' log lines and EMF records go to `sink` (a null device by default), as
    in Lambda they go to CloudWatch Logs: written, but not on the bench's terminal."""
    from nodescaler.observability import SERVICE

    with contextlib.ExitStack() as stack:
        out = sink or stack.enter_context(open(os.devnull, "w"))
        handlers = [
            h for h in logging.getLogger(SERVICE).handlers if isinstance(h, logging.StreamHandler)
        ]
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
    """moto's server, its SQS reading the clock cheaply (see the module's docstring)."""
    from moto.server import main
    from moto.sqs import models

    exact = models.unix_time_millis  # type: ignore[attr-defined]

    def unix_time_millis(dt: Any = None) -> float:
        return time.time() * 1000.0 if dt is None else float(exact(dt))

    models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined]
    main(argv)


if __name__ == "__main__":
    serve(sys.argv[1:])
