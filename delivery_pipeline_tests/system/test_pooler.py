"""Behind a real PgBouncer in transaction mode (``pooler`` fixture: Debian's package, a
server pool smaller than the clients): the claim race and the ops-alert poster, twice
in a row each, lose nothing and leave nothing stuck, and no client's session state
reaches another's statements.

Through such a pooler each transaction may run on any server session: a session
``SET`` or advisory lock stays on a session other clients then get, and a prepared
statement is missing on the next one. ``DATABASE_POOL_MODE=transaction`` is what
the processes are told.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from typing import Any

import psycopg
import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.service import start_service
from delivery_pipeline.watch.ops_channel import OpsNotifier, send_pending
from delivery_pipeline_tests.support.cli import sweep_process
from delivery_pipeline_tests.support.data import plan_body
from delivery_pipeline_tests.support.engine import wrote_and_waiting
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.waiting import wait_for

POOLED = {"DATABASE_POOL_MODE": "transaction"}
SWEEPERS = 4
DOCUMENTS = 120
POSTERS = 3
ALERTS = 45


def _session_defaults(pooled_url: str, sessions: int) -> list[dict[str, Any]]:
    """What ``sessions`` server sessions of the pool hold, each read in a transaction
    kept open until all are read (so each is a different server session)."""
    conns = [connect(pooled_url, pooled=True) for _ in range(sessions)]
    try:
        seen = []
        for conn in conns:
            conn.execute("BEGIN")
            seen.append(
                conn.execute(
                    "SELECT pg_backend_pid() AS pid, current_setting('jit') AS jit, "
                    "current_setting('enable_seqscan') AS enable_seqscan, "
                    "current_setting('enable_hashjoin') AS enable_hashjoin, "
                    "current_setting('plan_cache_mode') AS plan_cache_mode, "
                    "current_setting('synchronous_commit') AS synchronous_commit, "
                    "(SELECT count(*) FROM pg_prepared_statements) AS prepared"
                ).fetchone()
            )
        return seen
    finally:
        for conn in conns:
            conn.close()


def _assert_nothing_left_on_sessions(db: psycopg.Connection[Any], pooled_url: str) -> None:
    from delivery_pipeline.testing.pooler import SERVER_POOL_SIZE

    sessions = _session_defaults(pooled_url, SERVER_POOL_SIZE)
    assert len({s["pid"] for s in sessions}) == SERVER_POOL_SIZE
    for session in sessions:
        assert session["jit"] == db.execute("SHOW jit").fetchone()["jit"]
        assert (session["enable_seqscan"], session["enable_hashjoin"]) == ("on", "on")
        assert session["plan_cache_mode"] == "auto"
        assert session["synchronous_commit"] == "on"
        assert session["prepared"] == 0
    locks = db.execute(
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchone()
    assert locks["n"] == 0


@pytest.mark.slow
def test_the_claim_race_through_a_transaction_pooler_twice(db, sandbox, settings, pooler):
    """Four sweep processes race for the queue through PgBouncer, twice: every inbox
    holds its document once and whole, every document is delivered, no claim is left."""
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0)
    pooled_url = pooler.url(settings.database.database_url)
    for round_ in range(2):
        people = wrote_and_waiting(db, sandbox, DOCUMENTS, f"R{round_}D")

        procs = [
            sweep_process(
                settings,
                "--concurrency",
                "8",
                DELIVERY_CHUNK_LIMIT="300",
                DATABASE_URL=pooled_url,
                **POOLED,
            )
            for _ in range(SWEEPERS)
        ]
        outputs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]

        inboxes = sandbox.inboxes()
        for i, person in enumerate(people):
            body = plan_body(3, chunk_limit=300, tag=f"R{round_}D{i} ")
            assert texts(inboxes.get(person["phone"], [])) == delivery_messages(body, 300), (
                round_,
                person["phone"],
            )
        left = db.execute(
            "SELECT count(*) FILTER (WHERE delivered_at IS NULL) AS undelivered, "
            "count(*) FILTER (WHERE claim_token IS NOT NULL) AS claimed FROM documents"
        ).fetchone()
        assert (left["undelivered"], left["claimed"]) == (0, 0), round_
    _assert_nothing_left_on_sessions(db, pooled_url)


def _post(pooled_url: str, ops_url: str, ready: Any, go: Any, results: Any) -> None:
    """One poster process: passes over the outbox until a pass of its own finds it empty
    (every alert was inserted before the posters started)."""
    notifier = OpsNotifier(url=ops_url)
    sent: list[int] = []
    busy = 0
    with connect(pooled_url, pooled=True) as conn:
        ready.release()
        go.wait(60)
        while True:
            report = send_pending(conn, notifier, limit=5)
            sent += report.sent
            if report.busy:
                busy += 1
                time.sleep(0.01)
            elif not (report.sent or report.failed):
                break
    results.put((sent, busy))


@pytest.mark.slow
def test_the_ops_alert_poster_through_a_transaction_pooler_twice(db, sandbox, pooler, database_url):
    """Three posters (the alert sensor, two services' watchdogs) take turns through
    PgBouncer, twice: every alert is posted once, every row is marked sent, and the
    lease is free after (a session lock left on a pooled session would leave every
    later pass busy, and the second round's alerts unsent)."""
    pooled_url = pooler.url(database_url)
    ops_url = f"{sandbox.url}/_sandbox/ops"
    ctx = multiprocessing.get_context("spawn")
    took_turns = 0
    for round_ in range(2):
        for i in range(ALERTS):
            db.execute(
                "INSERT INTO ops_alerts (dedup_key, severity, message) VALUES (%s, 'error', %s)",
                (f"pooler-{round_}-{i}", f"round {round_} alert {i}"),
            )
        results, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
        posters = [
            ctx.Process(target=_post, args=(pooled_url, ops_url, ready, go, results))
            for _ in range(POSTERS)
        ]
        for process in posters:
            process.start()
        for _ in posters:
            assert ready.acquire(timeout=60)
        go.set()
        outcomes = [results.get(timeout=120) for _ in posters]
        for process in posters:
            process.join(timeout=30)
        sent = Counter(i for ids, _ in outcomes for i in ids)
        took_turns += sum(busy for _, busy in outcomes)
        assert len(sent) == ALERTS and max(sent.values()) == 1, round_
        unsent = db.execute("SELECT count(*) AS n FROM ops_alerts WHERE sent_at IS NULL")
        assert unsent.fetchone()["n"] == 0, round_
        lease = db.execute("SELECT holder FROM ops_alert_poster").fetchone()
        assert lease["holder"] is None, round_
    posted = [alert["text"] for alert in sandbox.ops_alerts()]
    assert len(posted) == 2 * ALERTS
    assert len(set(posted)) == 2 * ALERTS  # none twice
    assert took_turns, "the posters met at the lease"
    _assert_nothing_left_on_sessions(db, pooled_url)


def test_the_service_behind_the_pooler_listens_only_on_a_session_of_its_own(
    db, sandbox, pooler, database_url
):
    """Through the pooler alone the service does not LISTEN (a notification would go to
    whichever client's session had listened) and still serves: a signed webhook, a
    scrape. Given DATABASE_LISTEN_URL (Postgres itself), it listens there."""
    pooled_url = pooler.url(database_url)
    with start_service(pooled_url, sandbox.url, **POOLED) as service:
        health = service.http.get("/healthz").json()
        assert health["listening"] is False
        assert service.post_webhook(
            b'{"object": "whatsapp_business_account", "entry": []}'
        ).is_success
        scrape = service.http.get("/metrics")
        assert "delivery_metrics_database_up 1" in scrape.text
    with start_service(
        pooled_url, sandbox.url, DATABASE_LISTEN_URL=database_url, **POOLED
    ) as service:
        wait_for(lambda: service.http.get("/healthz").json()["listening"], timeout=30)
    _assert_nothing_left_on_sessions(db, pooled_url)


def test_dagsters_connections_pass_the_pooler_that_refuses_startup_options(pooler, database_url):
    """Sensors, checks and ops connect with timeouts; in transaction mode none travels
    as a startup option, which PgBouncer refuses (as it does here: the session mode's
    connection is turned away)."""
    from delivery_pipeline.dagster_defs.resources import AppDatabase
    from delivery_pipeline.settings import DatabaseSettings

    pooled_url = pooler.url(database_url)
    pooled = AppDatabase(DatabaseSettings(database_url=pooled_url, pool_mode="transaction"))
    with pooled.connect("a sensor") as conn:
        assert conn.execute("SELECT count(*) AS n FROM documents").fetchone()["n"] == 0
    direct_mode = AppDatabase(DatabaseSettings(database_url=pooled_url))
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        with direct_mode.connect():
            pass
