"""10,000 mutated, correctly signed bodies against the webhook service as a real
process on real Postgres, with real messages posted in between."""

from __future__ import annotations

import hashlib
import random
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import start_service
from delivery_pipeline_tests.support.data import add_person
from delivery_pipeline_tests.support.mutations import mutate

pytestmark = pytest.mark.slow

BODIES = 10_000
REAL_EVERY = 50
SENDERS = 4


def test_ten_thousand_mutated_bodies_no_5xx_and_real_messages_stored_once(db, sandbox, settings):
    people = [add_person(db) for _ in range(5)]
    rng = random.Random(13)
    mutants = [mutate(rng) for _ in range(BODIES)]
    real = [
        (people[i % len(people)]["phone"], f"wamid.REAL{i:05d}")
        for i in range(BODIES // REAL_EVERY)
    ]

    with start_service(settings.database.database_url, sandbox.url) as service:

        def send(share: int) -> list[str]:
            """Every SENDERS-th body from ``share``, a real message every REAL_EVERY;
            returns what went wrong (a 5xx or a dropped connection)."""
            problems = []
            with httpx.Client(base_url=service.url, timeout=30.0) as http:
                for n in range(share, BODIES, SENDERS):
                    bodies = [mutants[n].body]
                    if n % REAL_EVERY == 0:
                        bodies.append(payloads.inbound(*real[n // REAL_EVERY], "a real one"))
                    for body in bodies:
                        try:
                            answer = service.post_webhook(body, http=http).status_code
                        except httpx.TransportError as exc:
                            problems.append(f"body {n}: {type(exc).__name__}")
                            continue
                        if answer >= 500:
                            problems.append(f"body {n}: {answer} {mutants[n].done}")
            return problems

        with ThreadPoolExecutor(SENDERS) as pool:
            problems = [p for found in pool.map(send, range(SENDERS)) for p in found]
        # Meta redelivers: every real message once more.
        for phone, wamid in real:
            assert service.post_webhook(payloads.inbound(phone, wamid, "again")).status_code == 200

        assert problems == []
        assert service.http.get("/healthz").json()["status"] == "ok"
        log = service.log()

    counts = {
        r["wa_message_id"]: r["n"]
        for r in db.execute(
            "SELECT wa_message_id, count(*) AS n FROM inbound_messages "
            "WHERE wa_message_id LIKE 'wamid.REAL%' GROUP BY 1"
        ).fetchall()
    }
    assert counts == {wamid: 1 for _, wamid in real}, "a real message lost or stored twice"
    kept = {r["h"] for r in db.execute("SELECT sha256(body) AS h FROM raw_webhooks").fetchall()}
    unkept = [
        m.done for m in mutants if m.unstorable and hashlib.sha256(m.body).digest() not in kept
    ]
    assert unkept == [], "bodies Postgres could not store as sent were not kept raw"
    assert "Traceback" not in log, "a traceback for bad input (only our bugs get one)"
    lines = log.count("kept raw")
    assert 0 < lines < BODIES // 5, f"{lines} log lines for {BODIES} bodies: not rate-limited"
