"""An application's endpoint for its events, as a test or a benchmark plays it.

A threaded HTTP server on a fixed port of loopback that records every POST it
takes (headers, body, when it arrived and when it was answered) and answers
200, after up to ``jitter`` seconds of its own work (random): what is sent at
once is answered in any order. ``down()`` closes its socket, so a sender's
connection is refused as when the application is not running; ``up()``
listens on the same port again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from delivery_pipeline.testing.processes import free_port


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # when it arrived (time.monotonic())
    answered: float  # when the endpoint answered it


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A sender dropping its connection is not an error here."""


class ApplicationEndpoint:
    """Records every event posted to it; may go down and come back on its port."""

    def __init__(self, port: int | None = None, status: int = 200, jitter: float = 0.0) -> None:
        self.port = port or free_port()
        self.jitter = jitter
        self.url = f"http://127.0.0.1:{self.port}/events"
        self.status = status
        self.received: list[Received] = []
        self._lock = threading.Condition()
        self._server: _Server | None = None

    def up(self) -> Self:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                arrived = time.monotonic()
                time.sleep(random.uniform(0, endpoint.jitter))
                with endpoint._lock:
                    endpoint.received.append(Received(headers, body, arrived, time.monotonic()))
                    endpoint._lock.notify_all()
                self.send_response(endpoint.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def wait_for(
        self, predicate: Callable[[list[Received]], bool], timeout: float = 30.0
    ) -> list[Received]:
        with self._lock:
            if not self._lock.wait_for(lambda: predicate(self.received), timeout):
                raise AssertionError(f"timed out; {len(self.received)} events received")
            return list(self.received)

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()
