"""``GET /metrics`` of a real webhook service process: Prometheus text, the database's
numbers read at scrape time, the process's own counters, who may read it, and no
secret in it."""

from __future__ import annotations

import json
import re

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.service import APP_SECRET, INTERNAL_TOKEN, start_service
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body

SAMPLE = re.compile(r'^([a-z_]+)(\{(?:[a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN)$')
METRICS_TOKEN = "a-metrics-token-of-some-length"


def parse(text: str) -> dict[str, dict[str, float]]:
    """Prometheus text → {metric: {labels text: value}}; every line must be a comment or
    a well-formed sample, and every sample's family must be declared before it."""
    samples: dict[str, dict[str, float]] = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind in {"gauge", "counter"}, line
            typed.add(name)
            continue
        if line.startswith("# HELP "):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample: {line!r}"
        name = match.group(1)
        assert name in typed, f"{name} has no TYPE before it"
        samples.setdefault(name, {})[match.group(2) or ""] = float(match.group(3))
    return samples


def body(change_field: str, value: dict) -> bytes:
    return json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [{"id": "1", "changes": [{"field": change_field, "value": value}]}],
        }
    ).encode()


def test_metrics_read_the_database_and_count_what_the_process_saw(db, sandbox, database_url):
    person = add_person(db)
    for _ in range(3):
        add_document(db, person["id"], plan_body(2))
    db.execute("UPDATE documents SET generated_at = now() - interval '90 seconds'")
    db.execute(
        "INSERT INTO ops_alerts (dedup_key, severity, message) VALUES ('m', 'error', 'down')"
    )
    with start_service(
        database_url, sandbox.url, DELIVERY_LISTEN="false", WEBHOOK_MAX_BODY_BYTES="2048"
    ) as service:
        statuses = {"metadata": {"phone_number_id": "1"}, "statuses": []}
        assert service.post_webhook(body("messages", statuses)).status_code == 200
        assert service.post_webhook(b"{not json").status_code == 200
        unsigned = service.http.post("/webhooks/whatsapp", content=b"{}")
        assert unsigned.status_code == 401
        forged = service.http.post(
            "/webhooks/whatsapp", content=b"{}", headers={"X-Hub-Signature-256": "sha256=00"}
        )
        assert forged.status_code == 403
        assert service.post_webhook(b"x" * 4096).status_code == 413

        answer = service.http.get("/metrics")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        metrics = parse(answer.text)

    documents = metrics["delivery_documents"]
    assert documents['{state="undelivered"}'] == 3
    assert documents['{state="pending"}'] == 0  # every waiting state, zero too
    assert metrics["delivery_documents_oldest_age_seconds"]['{state="undelivered"}'] >= 90
    assert metrics["delivery_ops_alerts_unsent"]['{channel="ops"}'] == 1
    assert metrics["delivery_sending_paused"]['{phone_number_id="*"}'] == 0
    assert metrics["delivery_metrics_database_up"][""] == 1
    assert metrics["delivery_webhooks_total"]['{kind="messages_other"}'] == 1
    assert metrics["delivery_webhooks_total"]['{kind="malformed"}'] == 1
    failures = metrics["delivery_webhook_signature_failures_total"]
    assert failures == {'{reason="missing"}': 1, '{reason="invalid"}': 1}
    responses = metrics["delivery_http_responses_total"]
    assert responses['{code="413",route="webhooks"}'] == 1
    assert responses['{code="200",route="webhooks"}'] == 2
    assert APP_SECRET not in answer.text and INTERNAL_TOKEN not in answer.text


def test_metrics_answer_a_bearer_of_the_token_only_when_one_is_set(db, sandbox, database_url):
    with start_service(
        database_url, sandbox.url, DELIVERY_LISTEN="false", DELIVERY_METRICS_TOKEN=METRICS_TOKEN
    ) as service:
        assert service.http.get("/metrics").status_code == 403  # loopback is not enough now
        wrong = service.http.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 403
        right = service.http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert right.status_code == 200
        assert METRICS_TOKEN not in right.text
        counted = parse(right.text)["delivery_http_responses_total"]
        assert counted['{code="403",route="other"}'] == 2


def test_metrics_of_a_peer_that_is_not_loopback_are_refused(db, sandbox, database_url):
    """Behind a trusted proxy (loopback here), the client it names is the peer: a scrape
    forwarded from elsewhere is refused without the token."""
    with start_service(
        database_url, sandbox.url, DELIVERY_LISTEN="false", DELIVERY_TRUSTED_PROXIES="127.0.0.1"
    ) as service:
        forwarded = service.http.get("/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
        assert forwarded.status_code == 403
        assert "DELIVERY_METRICS_TOKEN" in forwarded.text
        assert service.http.get("/metrics").status_code == 200


def test_the_states_counted_for_metrics_are_the_views_whatever_the_columns_say(db):
    """The scrape counts each waiting state where its index leads, not through the
    document_states view (sql/migrations/001): on documents whose state columns take every
    combination, its counts and oldest ages are the view's."""
    person = add_person(db)
    db.execute("SELECT setseed(0.4)")
    db.execute(
        """
        INSERT INTO documents (person_id, kind, status, body, created_at, generated_at,
                               generation_claimed_at, delivered_at, abandoned_at, abandon_reason,
                               awaiting_review_since, awaiting_reply_since, knock_held_since,
                               quiet_until)
        SELECT %(person)s, 'plan', s.status, 'body', now() - g * interval '1 minute',
               now() - g * interval '50 seconds', now() - g * interval '40 seconds',
               CASE WHEN r.delivered THEN now() END,
               CASE WHEN r.abandoned THEN now() END, CASE WHEN r.abandoned THEN 'stale' END,
               CASE WHEN random() < 0.3 THEN now() - g * interval '30 seconds' END,
               CASE WHEN random() < 0.3 THEN now() - g * interval '20 seconds' END,
               CASE WHEN random() < 0.2 THEN now() - g * interval '10 seconds' END,
               CASE WHEN random() < 0.3 THEN now() + interval '1 hour' END
        FROM generate_series(1, 400) g
        CROSS JOIN LATERAL (SELECT (ARRAY['pending', 'generating', 'succeeded', 'failed',
                                          'succeeded', 'succeeded'])[1 + (g * 7) %% 6] AS status
                           ) s
        CROSS JOIN LATERAL (SELECT random() < 0.15 AS delivered, random() AS roll) x
        CROSS JOIN LATERAL (SELECT x.delivered, NOT x.delivered AND x.roll < 0.15 AS abandoned
                           ) r
        """,
        {"person": person["id"]},
    )
    view = {
        row["state"]: (row["n"], row["age"])
        for row in db.execute(
            "SELECT state, count(*) AS n, extract(epoch FROM now() - min(since))::float8 AS age "
            "FROM document_states WHERE state NOT IN ('delivered', 'abandoned') GROUP BY state"
        )
    }
    assert len(view) >= 6, view  # the combinations reach most states
    snapshot = QUERIES.metrics_snapshot.all(db, {})
    counts = {r.labels["state"]: r.value for r in snapshot if r.metric == "documents"}
    ages = {
        r.labels["state"]: r.value for r in snapshot if r.metric == "documents_oldest_age_seconds"
    }
    for state in counts:
        n, age = view.get(state, (0, 0.0))
        assert counts[state] == n, state
        assert abs(ages[state] - age) < 1.0, state
