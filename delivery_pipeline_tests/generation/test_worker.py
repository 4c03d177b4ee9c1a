"""Generation against real Postgres: the claim, retries, the poke to the
webhook service (a scripted server on 127.0.0.1), requests by hand."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections import Counter

import pytest

from delivery_pipeline.generation.generator import (
    DocumentSpec,
    GeneratorMisconfigured,
    GeneratorRejected,
    GeneratorUnavailable,
)
from delivery_pipeline.generation.offline import OfflineGenerator, format_date
from delivery_pipeline.generation.openai import OpenAIGenerator
from delivery_pipeline.generation.worker import (
    SweepPoke,
    generate_pending,
    generation_due,
    outcomes_by_kind_and_locale,
)
from delivery_pipeline.settings import GenerationSettings, Settings
from delivery_pipeline.store.intake import InputError, request_document
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.sandbox import free_port
from delivery_pipeline_tests.support.data import add_person, document
from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer, chat_completion

POLICY = GenerationSettings(max_attempts=3, backoff_base_seconds=60, batch_size=2)
LEASE = dt.timedelta(minutes=10)


def pending(db, person_id: int, kind: str = "plan", for_date=None) -> dict:
    return db.execute(
        QUERIES.insert_pending_document.sql,
        {"person_id": person_id, "kind": kind, "for_date": for_date},
    ).fetchone()


def make_due(db, document_id: int) -> None:
    """The clock, through the data: the retry backoff or the lease has run out."""
    db.execute(
        "UPDATE documents SET next_generation_at = now() - interval '1 second' WHERE id = %(id)s",
        {"id": document_id},
    )


def eligible(db) -> list[dict]:
    return db.execute(
        QUERIES.eligible_ids.sql,
        {"lease": LEASE, "service_window": dt.timedelta(hours=23), "quiet_hours": None},
    ).fetchall()


class Scripted:
    """A generator that raises the scripted errors in order, then writes offline text."""

    name = "scripted"

    def __init__(self, *errors: Exception, delay: float = 0.0) -> None:
        self.errors = list(errors)
        self.delay = delay
        self.calls: list[DocumentSpec] = []
        self._lock = threading.Lock()

    def generate(self, spec: DocumentSpec) -> str:
        with self._lock:
            self.calls.append(spec)
            error = self.errors.pop(0) if self.errors else None
        if self.delay:
            time.sleep(self.delay)
        if error is not None:
            raise error
        return OfflineGenerator().generate(spec)


def test_generates_a_pending_plan_into_the_delivery_queue(db, database_url):
    person = add_person(db, name="Lucía", locale="es", time_zone="Europe/Madrid")
    doc = pending(db, person["id"])
    assert generation_due(db)

    result = generate_pending(database_url, OfflineGenerator(), policy=POLICY)

    assert result.as_dict() | {"document_ids": None} == {
        "claimed": 1,
        "succeeded": 1,
        "retry_scheduled": 0,
        "failed": 0,
        "exhausted": 0,
        "lost_claims": 0,
        "poked": 0,
        "poke_failed": 0,
        "awaiting_review": 0,
        "files_rendered": 0,
        "files_failed": 0,
        "stopped_by": None,
        "document_ids": None,
        "failed_ids": [],
    }
    row = document(db, doc["id"])
    assert row["status"] == "succeeded" and row["generated_at"] is not None
    assert row["generation_claim_token"] is None and row["generation_attempts"] == 1
    local_today = db.execute("SELECT (now() AT TIME ZONE 'Europe/Madrid')::date AS d").fetchone()[
        "d"
    ]
    assert (
        row["body"].startswith("Lucía, tu plan") and format_date(local_today, "es") in row["body"]
    )
    assert [(e["id"], e["action"]) for e in eligible(db)] == [(doc["id"], "deliver")]
    assert not generation_due(db)
    assert generate_pending(database_url, OfflineGenerator(), policy=POLICY).claimed == 0


def test_brief_is_written_for_its_day(db, database_url):
    person = add_person(db, name="João", locale="pt", time_zone="America/Sao_Paulo")
    day = dt.date(2031, 5, 20)
    doc = pending(db, person["id"], "daily_brief", day)
    generate_pending(database_url, OfflineGenerator(), policy=POLICY)
    body = document(db, doc["id"])["body"]
    assert body.startswith("Bom dia, João.") and "terça-feira, 20 de maio" in body


def test_success_pokes_the_webhook_service(db, database_url):
    person = add_person(db)
    docs = [pending(db, person["id"]) for _ in range(3)]
    with FakeHttpServer(Answer(202, {"accepted": True})) as service:
        poke = SweepPoke(service.url, "internal-secret")
        result = generate_pending(database_url, OfflineGenerator(), policy=POLICY, poke=poke)
    assert result.poked == 3 and result.poke_failed == 0
    assert [r.path for r in service.requests] == ["/internal/sweep"] * 3
    assert {r.headers["authorization"] for r in service.requests} == {"Bearer internal-secret"}
    assert sorted(r.json()["document_id"] for r in service.requests) == [d["id"] for d in docs]


@pytest.mark.parametrize("failure", ["5xx", "hangs", "down", "no token"])
def test_a_failed_poke_is_logged_never_raised(db, database_url, failure, caplog):
    caplog.set_level(logging.INFO, logger="delivery_pipeline.generation.worker")
    person = add_person(db)
    doc = pending(db, person["id"])
    with FakeHttpServer(Answer(500, {"error": "boom"})) as service:
        if failure == "hangs":
            service.default = Answer(202, {}, delay_seconds=3.0)
        url = f"http://127.0.0.1:{free_port()}" if failure == "down" else service.url
        token = None if failure == "no token" else "t"
        poke = SweepPoke(url, token, timeout_seconds=0.3)
        result = generate_pending(database_url, OfflineGenerator(), policy=POLICY, poke=poke)
    assert result.succeeded == 1 and result.poked == 0
    assert result.poke_failed == 1
    assert document(db, doc["id"])["status"] == "succeeded"
    assert "ready notification, else the delivery_heartbeat sensor's next sweep" in caplog.text
    if failure == "no token":
        assert service.requests == []


def test_transient_failures_retry_with_backoff_then_fail_for_good(db, database_url):
    person = add_person(db)
    doc = pending(db, person["id"])
    generator = Scripted(*(GeneratorUnavailable(f"503 number {i}") for i in range(3)))

    first = generate_pending(database_url, generator, policy=POLICY)
    row = document(db, doc["id"])
    assert first.retry_scheduled == 1 and row["status"] == "pending"
    assert outcomes_by_kind_and_locale(first) == [
        {"kind": "plan", "locale": person["locale"], "generated": 0, "failed": 0, "retrying": 1}
    ]
    assert row["generation_attempts"] == 1 and row["generation_error"] == "503 number 0"
    backoff = db.execute(
        "SELECT extract(epoch FROM next_generation_at - now()) AS s FROM documents "
        "WHERE id = %(id)s",
        {"id": doc["id"]},
    ).fetchone()["s"]
    assert 30 < backoff <= 75
    assert not generation_due(db), "not due again before the backoff"
    assert generate_pending(database_url, generator, policy=POLICY).claimed == 0

    make_due(db, doc["id"])
    assert generate_pending(database_url, generator, policy=POLICY).retry_scheduled == 1
    make_due(db, doc["id"])
    last = generate_pending(database_url, generator, policy=POLICY)
    row = document(db, doc["id"])
    assert last.failed == 1 and row["status"] == "failed" and row["generation_attempts"] == 3
    assert outcomes_by_kind_and_locale(last) == [
        {"kind": "plan", "locale": person["locale"], "generated": 0, "failed": 1, "retrying": 0}
    ]
    assert row["generation_error"] == "503 number 2"
    assert not generation_due(db) and eligible(db) == []
    assert len(generator.calls) == 3


def test_transient_failure_then_success(db, database_url):
    person = add_person(db)
    doc = pending(db, person["id"])
    generator = Scripted(GeneratorUnavailable("timeout"))
    generate_pending(database_url, generator, policy=POLICY)
    make_due(db, doc["id"])
    result = generate_pending(database_url, generator, policy=POLICY)
    row = document(db, doc["id"])
    assert result.succeeded == 1 and row["status"] == "succeeded"
    assert row["generation_error"] is None and row["generation_attempts"] == 2


@pytest.mark.parametrize("error", [GeneratorRejected("400 content policy"), KeyError("bug")])
def test_rejection_fails_at_once_and_a_bug_counts_as_an_attempt(db, database_url, error):
    person = add_person(db)
    doc = pending(db, person["id"])
    result = generate_pending(database_url, Scripted(error), policy=POLICY)
    row = document(db, doc["id"])
    if isinstance(error, GeneratorRejected):
        assert result.failed == 1 and row["status"] == "failed"
        assert row["generation_error"] == "400 content policy"
    else:
        assert result.retry_scheduled == 1 and row["status"] == "pending"
        assert row["generation_error"].startswith("KeyError")


def test_misconfigured_generator_stops_and_gives_every_claim_back_uncounted(db, database_url):
    person = add_person(db)
    docs = [pending(db, person["id"]) for _ in range(5)]
    generator = Scripted(GeneratorMisconfigured("401 (check OPENAI_API_KEY)"))

    result = generate_pending(database_url, generator, policy=POLICY)

    assert result.stopped_by == "401 (check OPENAI_API_KEY)"
    assert len(generator.calls) == 1, "one refusal is enough to stop"
    rows = [document(db, d["id"]) for d in docs]
    assert {r["status"] for r in rows} == {"pending"}
    assert {r["generation_attempts"] for r in rows} == {0}
    assert {r["generation_claim_token"] for r in rows} == {None}
    assert not generation_due(db), "paused, not hammering a misconfigured backend"


def test_a_live_claim_excludes_others_and_an_expired_one_is_fenced(db, database_url):
    person = add_person(db)
    doc = pending(db, person["id"])
    stale_token = uuid.uuid4()
    [claimed] = db.execute(
        QUERIES.claim_generation_batch.sql,
        {
            "token": stale_token,
            "lease": LEASE,
            "limit": 10,
            "max_attempts": 3,
            "document_id": None,
        },
    ).fetchall()
    assert claimed["id"] == doc["id"] and document(db, doc["id"])["status"] == "generating"

    assert not generation_due(db)
    assert generate_pending(database_url, OfflineGenerator(), policy=POLICY).claimed == 0

    make_due(db, doc["id"])  # the first generator died; its lease ran out
    result = generate_pending(database_url, OfflineGenerator(), policy=POLICY)
    assert result.succeeded == 1
    assert document(db, doc["id"])["generation_attempts"] == 2
    late = db.execute(
        QUERIES.generation_succeeded.sql,
        {"document_id": doc["id"], "token": stale_token, "body": "late", "needs_review": False},
    ).fetchone()
    assert late is None and document(db, doc["id"])["body"] != "late"


def test_generation_that_never_finishes_is_failed_after_max_attempts(db, database_url):
    person = add_person(db)
    doc = pending(db, person["id"])
    db.execute(
        "UPDATE documents SET status = 'generating', generation_attempts = 3, "
        "generation_claim_token = gen_random_uuid(), generation_claimed_at = now(), "
        "next_generation_at = now() - interval '1 second' WHERE id = %(id)s",
        {"id": doc["id"]},
    )
    assert generation_due(db)
    result = generate_pending(database_url, Scripted(), policy=POLICY)
    row = document(db, doc["id"])
    assert result.exhausted == 1 and result.claimed == 0
    assert row["status"] == "failed" and "gave up after 3 attempts" in row["generation_error"]
    assert not generation_due(db)


def test_concurrent_runs_generate_every_document_once(db, database_url):
    person = add_person(db)
    docs = [pending(db, person["id"]) for _ in range(24)]
    generator = Scripted(delay=0.005)
    results = []

    def run() -> None:
        results.append(generate_pending(database_url, generator, policy=POLICY))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    calls = Counter(spec.document_id for spec in generator.calls)
    assert calls == Counter({d["id"]: 1 for d in docs})
    assert sum(r.succeeded for r in results) == 24 and sum(r.lost_claims for r in results) == 0
    assert {document(db, d["id"])["status"] for d in docs} == {"succeeded"}


def test_limit_and_single_document(db, database_url):
    person = add_person(db)
    docs = [pending(db, person["id"]) for _ in range(5)]
    one = generate_pending(
        database_url, OfflineGenerator(), policy=POLICY, document_id=docs[3]["id"]
    )
    assert one.document_ids == [docs[3]["id"]]
    some = generate_pending(database_url, OfflineGenerator(), policy=POLICY, limit=3)
    assert some.claimed == 3 and some.document_ids == [docs[0]["id"], docs[1]["id"], docs[2]["id"]]


def test_abandoned_brief_is_not_generated(db, database_url):
    person = add_person(db, time_zone="UTC")
    doc = pending(db, person["id"], "daily_brief", dt.date(2020, 1, 1))
    db.execute(QUERIES.abandon_stale_briefs.sql, {"at": None, "lease": LEASE})
    assert document(db, doc["id"])["abandon_reason"] == "stale"
    assert not generation_due(db)
    assert generate_pending(database_url, OfflineGenerator(), policy=POLICY).claimed == 0


def test_request_document(db):
    person = add_person(db, time_zone="Pacific/Kiritimati")
    plan = request_document(db, person["phone"], "plan")
    assert plan.status == "pending" and plan.for_date is None
    brief = request_document(db, str(person["id"]), "daily_brief")
    local_today = db.execute(
        "SELECT (now() AT TIME ZONE 'Pacific/Kiritimati')::date AS d"
    ).fetchone()["d"]
    assert brief.for_date == local_today
    with pytest.raises(InputError, match="already has a brief"):
        request_document(db, person["id"], "daily_brief")
    with pytest.raises(InputError, match="no person"):
        request_document(db, "+15550009999", "plan")
    with pytest.raises(InputError, match="neither"):
        request_document(db, "ana", "plan")
    with pytest.raises(InputError, match="kind"):
        request_document(db, person["id"], "poem")


def test_policy_from_env():
    policy = Settings.from_env(
        {"GENERATION_MAX_ATTEMPTS": "5", "GENERATION_BATCH_SIZE": "9"}
    ).generation
    assert policy.max_attempts == 5 and policy.batch_size == 9
    with pytest.raises(ValueError, match="GENERATION_MAX_ATTEMPTS"):
        Settings.from_env({"GENERATION_MAX_ATTEMPTS": "0"})


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Hello\x00Ana", "a NUL character"),
        ("Hello \ud800 Ana", "a lone surrogate"),
    ],
)
def test_text_postgres_cannot_store_fails_its_document_alone(db, database_url, answer, reason):
    """An OpenAI-compatible server (a loopback stub) answers one document of the batch
    with text Postgres cannot hold: that one fails with its reason, the batch's other
    documents are stored, and no claim is left to wait out its lease."""
    names = ["Ana", "Bia", "Caio"]
    docs = {name: pending(db, add_person(db, name=name)["id"]) for name in names}
    with FakeHttpServer() as server:
        server.answer(
            Answer(200, chat_completion("Plan for the first.")),
            Answer(200, chat_completion(answer)),
            Answer(200, chat_completion("Plan for the third.")),
        )
        generator = OpenAIGenerator(f"{server.url}/v1", "test-model", timeout_seconds=5.0)
        result = generate_pending(
            database_url, generator, policy=GenerationSettings(batch_size=4, max_attempts=3)
        )
        asked = [next(n for n in names if n in r.body.decode()) for r in server.requests]

    assert result.claimed == 3 and result.succeeded == 2 and result.retry_scheduled == 1
    bad = docs[asked[1]]
    row = document(db, bad["id"])
    assert row["status"] == "pending" and row["body"] is None
    assert row["generation_error"] == (
        f"the generator's text holds {reason}, which a document cannot store"
    )
    assert result.failed_ids == [bad["id"]]
    for name in (asked[0], asked[2]):
        assert document(db, docs[name]["id"])["status"] == "succeeded"
    claims = db.execute(
        "SELECT count(*) AS n FROM documents WHERE generation_claim_token IS NOT NULL"
    ).fetchone()
    assert claims["n"] == 0
