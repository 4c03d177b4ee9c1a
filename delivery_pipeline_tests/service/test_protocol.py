"""What a client without the app secret can hold of the webhook service: the service as a
real process, clients on raw sockets (an HTTP library would not send what they send).

Refused from the headers, before the body: no signature, a malformed one, no secret to
check with. Bounded: the headers' size and time, the body's time, the connections.
A client leaving mid-body: one counted line, no traceback.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from delivery_pipeline.store.db import ensure_database, with_database
from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import INTERNAL_TOKEN, ServiceProcess, start_service

WEBHOOK = "/webhooks/whatsapp"
FAKE_SIGNATURE = "sha256=" + "0" * 64  # the right shape, the wrong value
LONG = 30.0  # how long a test waits for an answer at most (never a measured time)


@pytest.fixture(scope="module")
def service(pg_admin_url: str, template_database: str) -> Iterator[ServiceProcess]:
    name = f"dp_test_{uuid.uuid4().hex[:12]}"
    ensure_database(pg_admin_url, name, template=template_database)
    with start_service(
        with_database(pg_admin_url, name),
        "http://127.0.0.1:9",  # no API: webhooks are received whatever it answers
        DELIVERY_SERVICE_HEADER_TIMEOUT_SECONDS="1",
        DELIVERY_SERVICE_BODY_TIMEOUT_SECONDS="1",
        DELIVERY_SERVICE_MAX_CONNECTIONS="12",
        DELIVERY_LISTEN="false",
    ) as svc:
        yield svc
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def connect(service: ServiceProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", service.port), timeout=LONG)
    return sock


def head(path: str, *headers: str, length: int | None = None, method: str = "POST") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.extend(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(sock: socket.socket) -> tuple[int, bytes, bool]:
    """The status, the whole answer, and whether the service closed the connection after it."""
    data = b""
    closed = False
    while True:
        try:
            part = sock.recv(65536)
        except ConnectionResetError:
            closed = True
            break
        if not part:
            closed = True
            break
        data += part
        if b"\r\n\r\n" in data:
            headers, _, rest = data.partition(b"\r\n\r\n")
            match = re.search(rb"content-length: (\d+)", headers, re.IGNORECASE)
            if match and len(rest) >= int(match.group(1)):
                if b"connection: close" not in headers.lower():
                    break
    status = int(data.split(b" ", 2)[1]) if data else 0
    return status, data, closed


@pytest.mark.parametrize(
    ("signature", "status"),
    [(None, 401), ("sha256=nothex", 403), ("sha1=" + "0" * 40, 403), ("", 401)],
)
def test_an_unsigned_or_malformed_request_is_refused_before_its_body(service, signature, status):
    # 4 MiB announced, not a byte of it sent: the answer comes anyway, and the
    # connection closes instead of waiting for the body.
    headers = [] if signature is None else [f"X-Hub-Signature-256: {signature}"]
    with connect(service) as sock:
        sock.sendall(head(WEBHOOK, *headers, length=4 * 1024 * 1024))
        got, _, closed = answer(sock)
    assert (got, closed) == (status, True)


def test_a_signed_webhook_is_still_accepted(service):
    assert service.post_webhook(payloads.status("wamid.STILL", "delivered")).status_code == 200


def test_a_32_mib_header_is_refused_431_and_closed(service):
    with connect(service) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        sent = 0
        chunk = b"a" * 65536
        try:
            while sent < 32 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the service closed it: what we want
        got, data, closed = answer(sock)
    assert sent < 32 * 1024 * 1024, "the whole header was taken"
    assert got in (431, 0) and closed, data[:200]


def test_headers_that_never_finish_are_answered_408_and_closed(service):
    with connect(service) as sock:
        sock.sendall(b"POST /webhooks/whatsapp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        got, _, closed = answer(sock)
    assert (got, closed) == (408, True)


def test_a_connection_that_sends_nothing_is_closed(service):
    with connect(service) as sock:
        got, data, closed = answer(sock)
    assert closed and data == b""


def test_a_body_that_never_finishes_is_answered_408_and_closed(service):
    with connect(service) as sock:
        sock.sendall(head(WEBHOOK, f"X-Hub-Signature-256: {FAKE_SIGNATURE}", length=1000))
        sock.sendall(b'{"entry": [')
        got, _, closed = answer(sock)
    assert (got, closed) == (408, True)


def test_an_api_request_without_a_token_is_refused_before_its_body(service):
    with connect(service) as sock:
        sock.sendall(head("/v1/documents", "Content-Type: application/json", length=100_000))
        got, _, closed = answer(sock)
    assert (got, closed) == (401, True)
    with connect(service) as sock:
        sock.sendall(head("/internal/sweep", length=100_000))
        got, _, closed = answer(sock)
    assert (got, closed) == (401, True)


def test_a_client_leaving_mid_body_costs_one_counted_line_not_a_traceback(service):
    before = service.log()
    for _ in range(40):
        with connect(service) as sock:
            sock.sendall(head(WEBHOOK, f"X-Hub-Signature-256: {FAKE_SIGNATURE}", length=100_000))
            sock.sendall(b"x" * 1000)
    # The next request is answered after the ones before it were handled.
    assert service.http.get("/healthz").status_code == 200
    deadline = time.monotonic() + LONG
    while "left before its body" not in service.log()[len(before) :]:
        assert time.monotonic() < deadline, service.log()[len(before) :]
        time.sleep(0.1)
    time.sleep(0.5)
    added = service.log()[len(before) :]
    assert "Traceback" not in added and "Exception in ASGI" not in added, added
    lines = [line for line in added.splitlines() if "left before its body" in line]
    assert 1 <= len(lines) <= 10, added


def test_past_the_connection_limit_a_request_is_answered_503(service):
    held = [connect(service) for _ in range(12)]
    try:
        for sock in held:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        with connect(service) as sock:
            sock.sendall(head("/healthz", method="GET"))
            got, _, closed = answer(sock)
        assert (got, closed) == (503, True)
    finally:
        for sock in held:
            sock.close()
    # Once they are gone (closed by their header timeout at the latest), the port is free.
    deadline = time.monotonic() + LONG
    while service.http.get("/healthz").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_the_sweep_poke_names_an_id_past_bigint(service):
    headers = {"Authorization": f"Bearer {INTERNAL_TOKEN}"}
    for field in ("document_id", "person_id"):
        answered = service.http.post("/internal/sweep", json={field: 2**63}, headers=headers)
        assert answered.status_code == 400 and field in answered.json()["error"]
        answered = service.http.post("/internal/sweep", json={field: 0}, headers=headers)
        assert answered.status_code == 400 and field in answered.json()["error"]
    assert service.poke(document_id=2**63 - 1).status_code == 202
