"""A loopback HTTP server that drips its answer: each byte well within a socket timeout,
the whole far beyond any deadline, so only a whole-request deadline ends a read of it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DRIP_SECONDS = 0.2  # between two bytes: a socket timeout of 1 s never fires


class Drip:
    """Answers any GET or POST with `answer` (and 10,000 spaces: 2,000 s at a byte every
    0.2 s), dripping its status line and headers (`where="headers"`) or its body, until
    the client hangs up or the server closes."""

    def __init__(self, where: str, answer: bytes) -> None:
        stop = self._stop = threading.Event()
        body = answer + b" " * 10_000
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        slow, fast = (head + body, b"") if where == "headers" else (body, head)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    self.wfile.write(fast)
                    for byte in slow:
                        if stop.wait(DRIP_SECONDS):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                except OSError:  # the client hung up: the test's point
                    return

            def do_POST(self) -> None:
                self.do_GET()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def __enter__(self) -> Drip:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
