"""A real Prometheus server on loopback, scraping gauges this process serves: what the
Prometheus metric's tests, its bench and its scenarios query.

The server is Debian's `prometheus` package (2.42), unpacked under `.tools/` by `make
setup` (`python -m nodescaler_sandbox.prometheus`; no system service is installed or
started); each `PrometheusServer` runs its own with its own configuration, storage in a
temporary folder and a free loopback port, and stops it on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from nodescaler_sandbox.debian import DebianInstallError, DebianPackage
from nodescaler_sandbox.moto_server import free_port

DEBIAN = DebianPackage("prometheus", "2.42.0+ds-5+deb12u1")  # bookworm's
UNPACKED = DEBIAN.home / "usr" / "bin" / "prometheus"
HOW_TO_INSTALL = (
    f"Debian's Prometheus server ({DEBIAN.pinned}) is not at {UNPACKED}: run `make setup` "
    "(apt-get download and dpkg-deb, on Debian or Ubuntu; apt-get update needs root), or "
    "set PROMETHEUS_BIN to a prometheus 2.x binary"
)
SCRAPE_SECONDS = 1
READY_WITHIN_SECONDS = 60  # the bound on every wait here: a healthy server takes ~1 s


class PrometheusMissingError(RuntimeError):
    """No server binary: the message says how to install it."""


def prometheus_binary() -> Path:
    """The server: PROMETHEUS_BIN, else the one `make setup` unpacked, else PATH's."""
    for candidate in (os.environ.get("PROMETHEUS_BIN"), UNPACKED, shutil.which("prometheus")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise PrometheusMissingError(HOW_TO_INSTALL)


class GaugeTarget:
    """A scrape target on loopback serving gauges in the exposition format; `set` changes
    one (a name and its labels) for the next scrape."""

    def __init__(self) -> None:
        self._gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = target.exposition().encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the scrape timed out first
                    pass

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def set(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._gauges[(name, tuple(sorted(labels.items())))] = value

    def exposition(self) -> str:
        with self._lock:
            gauges = sorted(self._gauges.items())
        lines, typed = [], set()
        for (name, labels), value in gauges:
            if name not in typed:
                lines.append(f"# TYPE {name} gauge")
                typed.add(name)
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{label_text}}} {value!r}")
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class PrometheusServer:
    """`prometheus` on a free loopback port, scraping `targets` every `scrape` ("1s")."""

    def __init__(self, *targets: str, scrape: str = f"{SCRAPE_SECONDS}s") -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="nodescaler-prometheus-"))
        self.port = free_port()
        self.address = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": scrape, "scrape_timeout": scrape},
            "scrape_configs": [
                {"job_name": "test", "static_configs": [{"targets": list(targets)}]}
            ],
        }
        (self._folder / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self._log = (self._folder / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                str(prometheus_binary()),
                f"--config.file={self._folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self._folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._until(self._ready, "ready")
        except Exception:
            self.stop()
            raise

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.address}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _until(self, condition: Any, what: str) -> None:
        deadline = time.monotonic() + READY_WITHIN_SECONDS
        while not condition():
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited ({self._process.returncode}): {self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"prometheus not {what} in {READY_WITHIN_SECONDS}s: {self.log()}"
                )
            time.sleep(0.1)

    def log(self) -> str:
        return (self._folder / "prometheus.log").read_text(errors="replace")[-2000:]

    def query(self, promql: str) -> list[Any]:
        """The answer's result, as the API gives it."""
        url = f"{self.address}/api/v1/query?query={quote(promql)}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.load(response)["data"]["result"])

    def wait_for(self, promql: str, value: float | None = None) -> None:
        """Until the query has a series (reading `value`, if given): bounded, polling."""

        def seen() -> bool:
            result = self.query(promql)
            return bool(result) and (value is None or float(result[0]["value"][1]) == value)

        self._until(seen, f"showing {promql} = {value}")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()
        shutil.rmtree(self._folder, ignore_errors=True)


@contextmanager
def prometheus_scraping(
    scrape: str = f"{SCRAPE_SECONDS}s",
) -> Iterator[tuple[PrometheusServer, GaugeTarget]]:
    """A server scraping a fresh gauge target, both stopped on exit."""
    target = GaugeTarget()
    try:
        server = PrometheusServer(target.address, scrape=scrape)
        try:
            yield server, target
        finally:
            server.stop()
    finally:
        target.close()


def main() -> None:
    """Install the server where the tests look for it (`make setup` runs this)."""
    try:
        DEBIAN.install(UNPACKED)
    except (DebianInstallError, OSError, subprocess.SubprocessError) as error:
        sys.exit(f"{error}\n{HOW_TO_INSTALL}")


if __name__ == "__main__":
    main()
