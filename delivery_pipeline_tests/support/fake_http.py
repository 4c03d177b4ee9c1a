"""A scripted HTTP server on 127.0.0.1 for tests: records every request and
answers from a queue (status, JSON body, headers, optional delay).

Stands in for an OpenAI-compatible endpoint and for the webhook service's
``/internal/sweep``; never a real host.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    delay_seconds: float = 0.0
    raw: bytes | None = None


class FakeHttpServer:
    """Answers queued ``Answer``s in order, then ``default``."""

    def __init__(self, default: Answer | None = None) -> None:
        self.requests: list[Recorded] = []
        self.default = default or Answer(200, {})
        self._answers: deque[Answer] = deque()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                answer = fake._record(
                    Recorded(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
                if answer.delay_seconds:
                    time.sleep(answer.delay_seconds)
                payload = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in answer.headers:
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = _handle  # noqa: N815 (http.server's naming)
            do_GET = _handle  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _record(self, request: Recorded) -> Answer:
        with self._lock:
            self.requests.append(request)
            return self._answers.popleft() if self._answers else self.default

    def answer(self, *answers: Answer) -> None:
        with self._lock:
            self._answers.extend(answers)

    def __enter__(self) -> FakeHttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def chat_completion(content: str) -> dict[str, Any]:
    """An OpenAI chat-completions response body."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
    }
