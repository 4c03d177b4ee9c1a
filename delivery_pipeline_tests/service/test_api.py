"""The applications' API with real processes: the service (two of them where the fleet
matters), the sandbox and Postgres. The property-based run over its description is
``test_api_contract.py``; events back to the application are
``system/test_application_events.py``."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from delivery_pipeline.testing.service import ServiceProcess
from delivery_pipeline_tests.support.api import (
    AUTH,
    OTHER_TOKEN,
    ROTATED_TOKEN,
    TOKEN,
    plan,
    start_api_service,
)
from delivery_pipeline_tests.support.data import add_person, new_phone


@pytest.fixture
def service(sandbox, settings) -> Iterator[ServiceProcess]:
    with start_api_service(
        settings.database.database_url, sandbox.url, DELIVERY_API_MAX_BODY_BYTES="4096"
    ) as svc:
        yield svc


def test_the_smallest_hand_over_answers_json_with_the_documents_id(db, service):
    phone = new_phone()
    answer = service.http.post(
        "/v1/documents",
        json={"person": {"phone": phone}, "kind": "plan", "body": "Hello.\n\nYour plan."},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )

    assert answer.status_code == 201, answer.text
    assert answer.headers["content-type"] == "application/json"
    document_id = answer.json()["id"]
    assert isinstance(document_id, int)
    assert answer.headers["location"] == f"/v1/documents/{document_id}"
    row = db.execute(
        "SELECT d.body, d.kind, p.phone, a.application FROM documents d "
        "JOIN people p ON p.id = d.person_id JOIN api_documents a ON a.document_id = d.id "
        "WHERE d.id = %s",
        (document_id,),
    ).fetchone()
    assert row == {
        "body": "Hello.\n\nYour plan.",
        "kind": "plan",
        "phone": phone,
        "application": "acme",
    }


def test_eight_clients_posting_one_key_at_once_make_one_document(db, sandbox, settings, service):
    """Two service processes, eight clients released together: one document, one person,
    eight identical answers; the same key with another body is refused and writes nothing."""
    with start_api_service(settings.database.database_url, sandbox.url) as second:
        phone = new_phone()
        request = plan(phone, metadata={"job": 7})
        headers = {**AUTH, "Idempotency-Key": "job-7-plan"}
        start = threading.Barrier(8)
        answers: list[httpx.Response] = []

        def post(target: ServiceProcess) -> None:
            with httpx.Client(base_url=target.url, timeout=30) as http:
                start.wait()
                answers.append(http.post("/v1/documents", json=request, headers=headers))

        clients = [
            threading.Thread(target=post, args=(service if i % 2 else second,)) for i in range(8)
        ]
        for client in clients:
            client.start()
        for client in clients:
            client.join()

        assert [a.status_code for a in answers] == [201] * 8, [a.text for a in answers]
        assert len({a.content for a in answers}) == 1
        assert Counter(a.headers.get("idempotent-replayed") for a in answers) == {
            "true": 7,
            None: 1,
        }
        assert _count(db, "documents") == 1
        assert _count(db, "people") == 1

        other = second.http.post(
            "/v1/documents", json=plan(phone, "Another text."), headers=headers
        )
        assert other.status_code == 409
        assert other.headers["content-type"] == "application/problem+json"
        assert other.json()["field"] == "Idempotency-Key"
        assert other.json()["document_id"] == answers[0].json()["id"]
        assert _count(db, "documents") == 1

        by_key = service.http.get("/v1/documents/by-idempotency-key/job-7-plan", headers=AUTH)
        assert by_key.status_code == 200
        assert by_key.json()["id"] == answers[0].json()["id"]
        assert by_key.json()["metadata"] == {"job": 7}


def _count(db, table: str) -> int:
    return db.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (plan("not a number"), 422, "person.phone"),
        ({"person": {}, "kind": "plan", "body": "x"}, 422, "person"),
        ({"person": {"phone": "+15550000001"}, "kind": "memo", "body": "x"}, 422, "kind"),
        ({"person": {"phone": "+15550000001"}, "kind": "plan"}, 422, "body"),
        (plan("+15550000001", generate=True), 422, "body"),
        (plan("+15550000001", replace_kye="x"), 422, "replace_kye"),
        (plan("+15550000001", priority="urgent"), 422, "priority"),
        (plan("+15550000001", day="yesterday"), 422, "day"),
        (plan("+15550000001", "   "), 422, "body"),
        (plan("+15550000001", "nul \u0000 inside"), 422, "body"),
        ({"person": {"id": 999999}, "kind": "plan", "body": "x"}, 422, "person.id"),
        ({"person": {"key": "nobody"}, "kind": "plan", "body": "x"}, 422, "person.key"),
    ],
)
def test_a_refusal_is_problem_details_naming_the_field(db, service, body, status, field):
    answer = service.http.post("/v1/documents", json=body, headers=AUTH)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == status
    assert problem["field"] == field, problem
    assert problem["detail"] and problem["type"].startswith("/v1/problems/")
    assert _count(db, "documents") == 0
    assert _count(db, "people") == 0


def test_bad_bodies_and_headers(service):
    post = service.http.post
    too_large = post("/v1/documents", json=plan("+15550000002", "x" * 5000), headers=AUTH)
    assert too_large.status_code == 413
    assert too_large.headers["content-type"] == "application/problem+json"
    malformed = post("/v1/documents", content=b"{not json", headers=AUTH)
    assert malformed.status_code == 400
    form = post("/v1/documents", content=b"a=b", headers={**AUTH, "Content-Type": "text/plain"})
    assert form.status_code == 415 and form.json()["field"] == "Content-Type"
    bad_key = post(
        "/v1/documents", json=plan("+15550000002"), headers={**AUTH, "Idempotency-Key": "a\tb"}
    )
    assert bad_key.status_code == 400 and bad_key.json()["field"] == "Idempotency-Key"
    assert service.http.get("/v1/documents/99999999999999999999", headers=AUTH).status_code == 404


def test_tokens_name_their_application_and_rotate(service):
    created = service.http.post("/v1/documents", json=plan(new_phone()), headers=AUTH)
    document = f"/v1/documents/{created.json()['id']}"

    rotated = {"Authorization": f"Bearer {ROTATED_TOKEN}"}
    assert service.http.get(document, headers=rotated).status_code == 200
    other = service.http.get(document, headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
    assert other.status_code == 404, "another application's document is not there for it"
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": TOKEN},
    ):
        refused = service.http.get(document, headers=headers)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in service.log() and ROTATED_TOKEN not in service.log()


def test_a_tokens_rate_is_one_limit_for_every_replica(sandbox, settings):
    """Two services, a rate of 5/s in bursts of 5: however the requests are spread, the
    token gets about the rate, and each refusal says when to come back."""
    url = settings.database.database_url
    limited = {"DELIVERY_API_RATE_PER_SECOND": "5", "DELIVERY_API_RATE_BURST": "5"}
    with (
        start_api_service(url, sandbox.url, **limited) as one,
        start_api_service(url, sandbox.url, **limited) as two,
    ):
        began = time.monotonic()
        answers = [
            (one if i % 2 else two).http.get("/v1/documents/1", headers=AUTH) for i in range(30)
        ]
        elapsed = time.monotonic() - began
    allowed = sum(a.status_code == 404 for a in answers)
    refused = [a for a in answers if a.status_code == 429]
    assert allowed + len(refused) == 30
    assert 5 <= allowed <= 5 + 5 * elapsed + 1, (allowed, elapsed)
    assert refused, "a burst over the rate is refused"
    assert all(int(a.headers["retry-after"]) >= 1 for a in refused)
    assert refused[0].headers["content-type"] == "application/problem+json"


def test_people_by_the_applications_own_key(db, service):
    put = service.http.put
    phone = new_phone()
    created = put(
        "/v1/people/user/42",
        json={
            "phone": phone,
            "name": "Ana",
            "locale": "pt",
            "time_zone": "America/Sao_Paulo",
            "brief": {"opt_in": True, "local_time": "08:30"},
            "quiet_hours": "22:00-07:00",
        },
        headers=AUTH,
    )
    assert created.status_code == 201, created.text
    person = created.json()
    assert (person["key"], person["phone"], person["locale"]) == ("user/42", phone, "pt")
    assert person["brief"] == {"opt_in": True, "local_time": "08:30"}

    changed = put("/v1/people/user/42", json={"locale": "es", "quiet_hours": None}, headers=AUTH)
    assert changed.status_code == 200
    assert changed.json()["locale"] == "es" and changed.json()["quiet_hours"] is None
    assert changed.json()["time_zone"] == "America/Sao_Paulo", "what is not said stays"
    assert service.http.get("/v1/people/user/42", headers=AUTH).json() == changed.json()

    by_key = service.http.post(
        "/v1/documents",
        json={"person": {"key": "user/42"}, "kind": "plan", "body": "For Ana."},
        headers=AUTH,
    )
    assert by_key.status_code == 201
    assert by_key.json()["person"] == {"id": person["id"], "key": "user/42"}

    other_phone = put("/v1/people/user/42", json={"phone": new_phone()}, headers=AUTH)
    assert other_phone.status_code == 409 and other_phone.json()["field"] == "phone"
    other_number = put("/v1/people/user/42", json={"number": "100000000000999"}, headers=AUTH)
    assert other_number.status_code == 409 and other_number.json()["field"] == "number"
    taken = add_person(db)
    clash = put("/v1/people/user/7", json={"phone": taken["phone"]}, headers=AUTH)
    assert clash.status_code == 200, "a person the CLI added is found by their number"
    assert clash.json()["id"] == taken["id"]
    again = put("/v1/people/user/8", json={"phone": taken["phone"]}, headers=AUTH)
    assert again.status_code == 409 and again.json()["field"] == "key"
    assert service.http.get("/v1/people/nobody", headers=AUTH).status_code == 404


def test_cancel_and_resend_follow_the_operators_rules(db, sandbox, service):
    phone = new_phone()  # a new person: their window is closed, the document waits for them
    created = service.http.post("/v1/documents", json=plan(phone), headers=AUTH).json()
    path = f"/v1/documents/{created['id']}"

    cancelled = service.http.post(f"{path}/cancel", json={"reason": "job withdrawn"}, headers=AUTH)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["action"] == "cancel"
    assert cancelled.json()["document"]["state"] == "abandoned"
    assert cancelled.json()["document"]["abandon_reason"] == "cancelled"
    action = db.execute("SELECT operator, reason FROM document_actions").fetchone()
    assert action == {"operator": "api:acme", "reason": "job withdrawn"}
    again = service.http.post(f"{path}/cancel", headers=AUTH)
    assert again.status_code == 409 and "already abandoned" in again.json()["detail"]

    resent = service.http.post(f"{path}/resend", headers=AUTH)
    assert resent.status_code == 200, resent.text
    assert resent.json()["from_state"] == "abandoned"
    other = {"Authorization": f"Bearer {OTHER_TOKEN}"}
    assert service.http.post(f"{path}/cancel", headers=other).status_code == 404
