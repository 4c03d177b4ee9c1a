"""No polling floor: the webhook service sweeps what Postgres says became deliverable.

Real processes: the sandbox and the service, on real Postgres, with no poke
and no heartbeat running, so only the LISTEN path can deliver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from delivery_pipeline.service.listener import APPLICATION_NAME
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.service import ServiceProcess, start_service
from delivery_pipeline_tests.support.data import add_person, plan_body
from delivery_pipeline_tests.support.inbox import texts

pytestmark = pytest.mark.slow


@pytest.fixture
def service(database_url: str, sandbox: Any) -> Iterator[ServiceProcess]:
    with start_service(database_url, sandbox.url) as svc:
        wait_listening(svc)
        yield svc


def wait_listening(svc: ServiceProcess, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{svc.url}/healthz", timeout=2).json().get("listening"):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the service never started listening:\n{svc.log()}")


def wait_for_texts(sandbox: Any, phone: str, count: int, timeout: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        received = texts(sandbox.inbox(phone))
        if len(received) >= count:
            return received
        time.sleep(0.05)
    return texts(sandbox.inbox(phone))


def make_ready(
    db: psycopg.Connection[Any], person_id: int, body: str, due_in_seconds: float = 0
) -> int:
    """A document is requested, then its generation succeeds: the way most become ready."""
    doc = db.execute(
        QUERIES.insert_pending_document.sql,
        {"person_id": person_id, "kind": "plan", "for_date": None},
    ).fetchone()
    assert doc is not None
    db.execute(
        "UPDATE documents SET status = 'succeeded', body = %(body)s, generated_at = now(), "
        "next_attempt_at = now() + make_interval(secs => %(due)s) WHERE id = %(id)s",
        {"id": doc["id"], "body": body, "due": due_in_seconds},
    )
    return int(doc["id"])


def wait_delivered(db: psycopg.Connection[Any], document_id: int, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = db.execute(
            "SELECT delivered_at, next_attempt_at FROM documents WHERE id = %(id)s",
            {"id": document_id},
        ).fetchone()
        if row is not None and row["delivered_at"] is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"document {document_id} was not delivered")


def person_with_open_window(db: psycopg.Connection[Any], sandbox: Any) -> dict[str, Any]:
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    return person


def test_a_document_made_ready_in_the_database_is_delivered(db, sandbox, service):
    person = person_with_open_window(db, sandbox)
    make_ready(db, person["id"], plan_body(2))
    assert len(wait_for_texts(sandbox, person["phone"], 2)) == 2


def test_a_backoff_that_expires_is_swept_by_the_timer(db, sandbox, service):
    person = person_with_open_window(db, sandbox)
    # Ready, but due in 2 s (as after a backoff): no event will come at that moment.
    doc = make_ready(db, person["id"], "later", due_in_seconds=2)
    row = wait_delivered(db, doc)
    assert row["delivered_at"] >= row["next_attempt_at"]
    assert texts(sandbox.inbox(person["phone"])) == ["later"]


def test_a_lost_connection_reconnects_and_catches_up(db, database_url, sandbox, service):
    killed = db.execute(
        "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity "
        "WHERE application_name = %(name)s AND datname = current_database()",
        {"name": APPLICATION_NAME},
    ).fetchall()
    assert [r["killed"] for r in killed] == [True]
    # Ready while nobody listens: only the catch-up sweep can find it.
    first = person_with_open_window(db, sandbox)
    make_ready(db, first["id"], "while deaf")
    assert wait_for_texts(sandbox, first["phone"], 1) == ["while deaf"]
    wait_listening(service)
    second = person_with_open_window(db, sandbox)
    make_ready(db, second["id"], "heard again")
    assert wait_for_texts(sandbox, second["phone"], 1) == ["heard again"]
    assert "ready listener lost its connection" in service.log()
