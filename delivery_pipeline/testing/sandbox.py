"""Run the WhatsApp sandbox as a real subprocess, and receive its webhooks, for tests
and benchmarks.

``start_sandbox(**env)`` launches ``python -m delivery_pipeline.sandbox`` on a
free loopback port (through ``supervisor.Child``) and returns a
``SandboxProcess`` whose methods wrap the ``/_sandbox`` control endpoints.
``WebhookReceiver`` is a tiny threaded HTTP server that records every
webhook the sandbox posts (raw bytes and headers) and can be told to answer
with errors, to exercise redelivery.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

from delivery_pipeline.settings import DEV_ACCESS_TOKEN, DEV_PHONE_NUMBER_ID
from delivery_pipeline.supervisor import Child, NotReady
from delivery_pipeline.testing.processes import REPO_ROOT, HarnessProcess, free_port, harness_child
from delivery_pipeline.whatsapp.signature import signature_valid

__all__ = ["REPO_ROOT", "free_port"]  # re-exported: the tests' historical import path
# The sandbox reads its identity and start config from these: a test's own
# environment must not change them behind its back.
_INHERITED_CONFIG_PREFIXES = ("SANDBOX_", "WHATSAPP_")


def _path_number(number: str) -> str:
    return quote(number, safe="")


def _given(**fields: Any) -> dict[str, Any]:
    """The fields a control's body carries: those given (None: the sandbox's default)."""
    return {name: value for name, value in fields.items() if value is not None}


class SandboxProcess(HarnessProcess):
    """A running sandbox subprocess and a sync client for its control endpoints."""

    def __init__(self, child: Child, port: int) -> None:
        super().__init__(child, port)
        self.phone_number_id = DEV_PHONE_NUMBER_ID
        self.access_token = DEV_ACCESS_TOKEN

    @property
    def messages_url(self) -> str:
        return f"{self.url}/v25.0/{self.phone_number_id}/messages"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        if body is None and method != "GET":
            body = {}  # a control that changes something takes JSON only (sandbox.guard)
        response = self.http.request(method, path, json=body)
        if response.status_code != 200:
            raise RuntimeError(f"{method} {path} -> {response.status_code}: {response.text}")
        return response.json() if "json" in response.headers.get("content-type", "") else None

    def reset(self) -> None:
        self._call("POST", "/_sandbox/reset")

    def faults(self, **changes: Any) -> dict[str, Any]:
        """Change the runtime config (``latency_ms=…``, ``refusal_mode=…``); returns it."""
        return self._call("POST", "/_sandbox/faults", changes)

    def config(self) -> dict[str, Any]:
        return self._call("GET", "/_sandbox/faults")

    def say(
        self,
        number: str,
        text: str,
        name: str | None = None,
        username: str | None = None,
        to: str | None = None,
    ) -> str:
        """The person at ``number`` (or a username user's BSUID) writes ``text`` to the
        business number ``to`` (the default one), which opens that pair's window;
        returns the wamid."""
        body = {"text": text, **_given(name=name, username=username, to=to)}
        return self._call("POST", f"/_sandbox/people/{_path_number(number)}/messages", body)["id"]

    def press(
        self,
        number: str,
        button: str | int,
        *,
        message_id: str | None = None,
        interactive: bool = False,
    ) -> str:
        """The person at ``number`` taps a quick reply (its text, or its index) on the
        latest message with buttons they received (or ``message_id``); returns the wamid."""
        body = {"button": button, "interactive": interactive, **_given(message_id=message_id)}
        return self._call("POST", f"/_sandbox/people/{_path_number(number)}/press", body)["id"]

    def change_number(self, number: str, new_number: str) -> str:
        """The person at ``number`` changes to ``new_number``; returns the system message's id."""
        path = f"/_sandbox/people/{_path_number(number)}/number"
        return self._call("POST", path, {"new_number": new_number})["id"]

    def inbox(self, number: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/_sandbox/people/{_path_number(number)}/inbox")

    def inboxes(self) -> dict[str, list[dict[str, Any]]]:
        return self._call("GET", "/_sandbox/inboxes")

    def person(self, number: str) -> dict[str, Any]:
        return self._call("GET", f"/_sandbox/people/{_path_number(number)}")

    def set_window(
        self, number: str, age_seconds: float | None, phone_number_id: str | None = None
    ) -> dict[str, Any]:
        """Pretend the person last wrote ``age_seconds`` ago (``None``: never) to the
        business number ``phone_number_id``, or to every number the sandbox plays."""
        path = f"/_sandbox/people/{_path_number(number)}/window"
        body = {"age_seconds": age_seconds, **_given(phone_number_id=phone_number_id)}
        return self._call("POST", path, body)

    def set_unreachable(
        self, number: str, unreachable: bool = True, mode: str = "sync"
    ) -> dict[str, Any]:
        """Sends to ``number`` fail with 131026: refused (``sync``) or a later ``failed`` status."""
        path = f"/_sandbox/people/{_path_number(number)}/unreachable"
        return self._call("POST", path, {"unreachable": unreachable, "mode": mode})

    def template(self, name: str, language: str, **change: Any) -> dict[str, Any]:
        """Change a template's life (``status=``, ``quality=``, ``category=``,
        ``announce_category=``, ``mode=``, ``pacing=``, ``fail_code=``); returns it."""
        return self._call("POST", f"/_sandbox/templates/{name}/{language}", change)

    def refuse(
        self,
        code: int,
        mode: str = "sync",
        *,
        to: str | None = None,
        message_type: str | None = None,
        count: int | None = None,
        phone_number_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Sends answer ``code`` (sync) or fail with it in a status (async), to ``to``
        or everybody, from business number ``phone_number_id`` or any, ``count`` times
        or until ``clear_refusals``."""
        body = {
            "code": code,
            "mode": mode,
            **_given(phone_number_id=phone_number_id, to=to, type=message_type, count=count),
        }
        return self._call("POST", "/_sandbox/refusals", body)

    def set_online(self, number: str, online: bool) -> dict[str, Any]:
        """The phone at ``number`` is off (``False``: what is sent to it is held) or back."""
        path = f"/_sandbox/people/{_path_number(number)}/presence"
        return self._call("POST", path, {"online": online})

    def templates(self) -> list[dict[str, Any]]:
        """Every template the sandbox knows, with its life and its components."""
        return self._call("GET", "/_sandbox/templates")

    def media(self) -> list[dict[str, Any]]:
        """Every upload: its id, number, type, file name, size, expiry."""
        return self._call("GET", "/_sandbox/media")

    def media_bytes(self, media_id: str) -> bytes:
        """The bytes of upload ``media_id``, as uploaded."""
        response = self.http.get(f"/_sandbox/media/{media_id}")
        response.raise_for_status()
        return response.content

    def clear_refusals(self) -> None:
        self._call("DELETE", "/_sandbox/refusals")

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/_sandbox/stats")

    def failures(self) -> list[dict[str, Any]]:
        return self._call("GET", "/_sandbox/failures")

    def ops_alerts(self) -> list[Any]:
        return self._call("GET", "/_sandbox/ops")

    def wait_webhooks_idle(self, timeout: float = 5.0) -> dict[str, Any]:
        """Wait until no webhook is scheduled, queued or in flight; returns the stats."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if stats["webhooks_pending"] == 0 or time.monotonic() > deadline:
                return stats
            time.sleep(0.02)


def _environment(overrides: dict[str, Any]) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_INHERITED_CONFIG_PREFIXES)
    }
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
    )
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def start_sandbox(*, timeout: float = 60.0, **env_overrides: Any) -> SandboxProcess:
    """Launch the sandbox on a free port and wait until it answers.

    ``env_overrides`` are environment variables (``SANDBOX_REFUSAL_MODE="async"``,
    ``SANDBOX_APP_SECRET=…``); ``None`` removes one. ``SANDBOX_*`` and
    ``WHATSAPP_*`` are not inherited from the test's own environment.
    """
    env = _environment(env_overrides)
    last_log = ""
    for _ in range(3):  # a free port can be taken between choosing it and binding it
        port = free_port()
        child = harness_child(
            "sandbox",
            ["-m", "delivery_pipeline.sandbox", "--host", "127.0.0.1", "--port", str(port)],
            env,
            f"http://127.0.0.1:{port}/_sandbox/stats",
        )
        sandbox = SandboxProcess(child, port)
        try:
            child.wait_ready(timeout)
            return sandbox
        except NotReady:
            last_log = sandbox.log()
            sandbox.stop()
        if "address already in use" not in last_log.lower():
            break
    raise RuntimeError(f"the sandbox did not start:\n{last_log}")


# --- a webhook receiver ------------------------------------------------------------


@dataclass(frozen=True)
class ReceivedWebhook:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signature_valid(self, secret: str) -> bool:
        return signature_valid(secret, self.body, self.headers.get("x-hub-signature-256", ""))

    def values(self) -> Iterator[dict[str, Any]]:
        for entry in self.payload.get("entry", []):
            for change in entry.get("changes", []):
                yield change.get("value", {})

    def statuses(self) -> list[dict[str, Any]]:
        return [s for value in self.values() for s in value.get("statuses", [])]

    def messages(self) -> list[dict[str, Any]]:
        return [m for value in self.values() for m in value.get("messages", [])]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The sandbox closing its keep-alive connections on stop is not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class WebhookReceiver:
    """A threaded HTTP server on 127.0.0.1 that records every POST it gets."""

    def __init__(self) -> None:
        self.received: list[ReceivedWebhook] = []
        self._answers: list[int] = []
        self._default_answer = 200
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = receiver._record(self.path, dict(self.headers.items()), body)
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/webhook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            answer = self._answers.pop(0) if self._answers else self._default_answer
            lowered = {key.lower(): value for key, value in headers.items()}
            self.received.append(ReceivedWebhook(path, lowered, body, answer))
            self._lock.notify_all()
            return answer

    def answer_next(self, *statuses: int) -> None:
        """Answer the next posts with these HTTP statuses, then 200 again."""
        with self._lock:
            self._answers.extend(statuses)

    def answer_always(self, status: int) -> None:
        with self._lock:
            self._default_answer = status

    def clear(self) -> None:
        with self._lock:
            self.received.clear()
            self._answers.clear()
            self._default_answer = 200

    def wait_for(
        self, predicate: Callable[[list[ReceivedWebhook]], bool], timeout: float = 5.0
    ) -> list[ReceivedWebhook]:
        """Wait until ``predicate(received)`` holds; returns a copy of ``received``."""
        with self._lock:
            if not self._lock.wait_for(lambda: predicate(self.received), timeout):
                raise AssertionError(f"timed out; received {len(self.received)} webhooks")
            return list(self.received)

    def statuses(self) -> list[dict[str, Any]]:
        """Every status in every webhook that was answered with 200, in arrival order."""
        with self._lock:
            received = [w for w in self.received if w.answered == 200]
        return [status for webhook in received for status in webhook.statuses()]
