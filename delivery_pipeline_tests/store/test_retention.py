"""Retention on real Postgres: each table loses its old rows in bounded batches, the
oldest first, and keeps every row something still reads (sql/migrations/017,
sql/queries/retention.sql, store/retention.py); the Dagster job shows the counts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from dagster import DagsterInstance

from delivery_pipeline.dagster_defs.jobs import prune_history_job
from delivery_pipeline.settings import RetentionSettings
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.store.retention import TABLES, prune_history, prune_table
from delivery_pipeline.testing.postgres import upgrade_before
from delivery_pipeline.watch.alerts import Alert, AlertKind, AlertSeverity, note_check
from delivery_pipeline_tests.support.dagster_support import execute, resources_for
from delivery_pipeline_tests.support.data import add_document, add_person

pytestmark = pytest.mark.engine

KEEP = dt.timedelta(days=30)
TABLE = {t.name: t for t in TABLES}


def ago(days: float) -> str:
    return f"now() - {float(days)} * interval '1 day'"


# One row of each table, aged: nothing reads it (not a waiting knock's status, not
# a person's newest message, not an open episode's alert). Returns its key.
def raw_row(db: psycopg.Connection, n: int, days: float) -> Any:
    return db.execute(
        "INSERT INTO raw_webhooks (reason, body, received_at, last_received_at) "
        f"VALUES ('test', %s, {ago(days)}, {ago(days)}) RETURNING id",
        (f"body {n}".encode(),),
    ).fetchone()["id"]


def status_row(db: psycopg.Connection, n: int, days: float) -> Any:
    return db.execute(
        "INSERT INTO status_events (wa_message_id, status, occurred_at, received_at, payload) "
        f"VALUES (%s, 'delivered', {ago(days)}, {ago(days)}, '{{}}') RETURNING wa_message_id",
        (f"wamid.S{n}",),
    ).fetchone()["wa_message_id"]


def inbound_row(db: psycopg.Connection, n: int, days: float, person_id: int | None = None) -> Any:
    return db.execute(
        "INSERT INTO inbound_messages (wa_message_id, person_id, message_type, sent_at, "
        f"received_at, unknown_sender, payload) VALUES (%s, %s, 'text', {ago(days)}, "
        f"{ago(days)}, %s, '{{}}') RETURNING wa_message_id",
        (f"wamid.I{n}", person_id, person_id is None),
    ).fetchone()["wa_message_id"]


def alert_row(
    db: psycopg.Connection,
    n: int,
    days: float,
    *,
    key: str | None = None,
    kind: str = "alert",
    episode: bool = False,
) -> Any:
    return db.execute(
        "INSERT INTO ops_alerts (dedup_key, severity, kind, message, created_at, episode) "
        f"VALUES (%s, 'warning', %s, 'test', {ago(days)}, %s) RETURNING id",
        (key or f"recipient:{n}", kind, episode),
    ).fetchone()["id"]


def file_row(db: psycopg.Connection, n: int, days: float, *, finished: bool = True) -> Any:
    """A rendered file of a delivered document (``finished``), or of one still on its way."""
    person = add_person(db)
    doc = add_document(db, person["id"], f"Plan {n}.")
    if finished:
        db.execute("UPDATE documents SET delivered_at = now() WHERE id = %s", (doc["id"],))
    db.execute(
        "INSERT INTO document_files (document_id, source_sha256, sha256, filename, mime_type, "
        f"size_bytes, content, rendered_at) VALUES (%s, 's', 'b', 'f.pdf', 'application/pdf', "
        f"3, 'pdf', {ago(days)})",
        (doc["id"],),
    )
    return doc["id"]


ROWS: dict[str, tuple[Callable[..., Any], str]] = {
    "raw_webhooks": (raw_row, "SELECT id AS key FROM raw_webhooks"),
    "status_events": (status_row, "SELECT wa_message_id AS key FROM status_events"),
    "inbound_messages": (inbound_row, "SELECT wa_message_id AS key FROM inbound_messages"),
    "ops_alerts": (alert_row, "SELECT id AS key FROM ops_alerts"),
    "document_files": (file_row, "SELECT document_id AS key FROM document_files"),
}


def left(db: psycopg.Connection, name: str) -> set[Any]:
    return {row["key"] for row in db.execute(ROWS[name][1])}


@pytest.mark.parametrize("name", list(ROWS))
def test_each_table_is_pruned_in_bounded_batches_oldest_first(db, name):
    make = ROWS[name][0]
    old = [make(db, n, days) for n, days in enumerate([40, 39, 38, 37, 36, 35, 34])]
    young = [make(db, 100 + n, days) for n, days in enumerate([29, 1, 0])]
    db.execute("DELETE FROM ops_alerts WHERE dedup_key = 'migration:016:time_zones'")

    first = prune_table(db, TABLE[name], KEEP, batch=3, max_batches=1)

    assert (first.deleted, first.batches, first.more) == (3, 1, True)
    assert left(db, name) == set(old[3:] + young), "the three oldest went first"

    rest = prune_table(db, TABLE[name], KEEP, batch=3)

    assert (rest.deleted, rest.kept, rest.batches, rest.more) == (4, 0, 2, False)
    assert left(db, name) == set(young)


def make_knock_wait(db: psycopg.Connection, wamid: str, *, answered: bool) -> dict[str, Any]:
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], "A plan.")
    db.execute(
        "UPDATE documents SET knock_sent_at = now() - interval '60 days', "
        "knock_message_id = %(wamid)s, awaiting_reply_since = now() - interval '60 days', "
        "delivered_at = CASE WHEN %(answered)s THEN now() END WHERE id = %(id)s",
        {"wamid": wamid, "answered": answered, "id": doc["id"]},
    )
    return doc


def test_the_statuses_of_a_knock_still_waiting_on_its_person_stay(db):
    make_knock_wait(db, "wamid.WAITING", answered=False)
    make_knock_wait(db, "wamid.ANSWERED", answered=True)
    for wamid in ("wamid.WAITING", "wamid.ANSWERED", "wamid.CHUNK"):
        for status in ("sent", "delivered", "read"):
            db.execute(
                "INSERT INTO status_events (wa_message_id, status, occurred_at, received_at, "
                "payload) VALUES (%s, %s, now() - interval '60 days', "
                "now() - interval '60 days', '{}')",
                (wamid, status),
            )

    pruned = prune_table(db, TABLE["status_events"], KEEP, batch=2)

    assert (pruned.deleted, pruned.kept) == (6, 3)
    rows = db.execute("SELECT DISTINCT wa_message_id FROM status_events").fetchall()
    assert [r["wa_message_id"] for r in rows] == ["wamid.WAITING"]


def test_the_statuses_of_a_knock_row_one_of_whose_documents_waits_stay(db):
    # A knock of the knocks table (sql/migrations/020) covering two documents: one answered
    # and delivered, one still waiting. Its document columns do not name it.
    person = add_person(db, inbound_age_seconds=None)
    waiting = add_document(db, person["id"], "A plan.")
    done = add_document(db, person["id"], "Another plan.")
    db.execute(
        "UPDATE documents SET awaiting_reply_since = now() - interval '60 days' WHERE id = %s",
        (waiting["id"],),
    )
    db.execute("UPDATE documents SET delivered_at = now() WHERE id = %s", (done["id"],))
    for wamid, docs in (
        ("wamid.KWAIT", [waiting["id"], done["id"]]),
        ("wamid.KDONE", [done["id"]]),
    ):
        knock = db.execute(
            "INSERT INTO knocks (person_id, template, language, state, wa_message_id, sent_at) "
            "VALUES (%s, 'document_ready', 'en', 'sent', %s, now() - interval '60 days') "
            "RETURNING id",
            (person["id"], wamid),
        ).fetchone()
        for doc in docs:
            db.execute("INSERT INTO knock_documents VALUES (%s, %s)", (knock["id"], doc))
        db.execute(
            "INSERT INTO status_events (wa_message_id, status, occurred_at, received_at, payload) "
            "VALUES (%s, 'delivered', now() - interval '60 days', now() - interval '60 days', "
            "'{}')",
            (wamid,),
        )

    pruned = prune_table(db, TABLE["status_events"], KEEP, batch=2)

    assert (pruned.deleted, pruned.kept) == (1, 1)
    rows = db.execute("SELECT wa_message_id FROM status_events").fetchall()
    assert [r["wa_message_id"] for r in rows] == ["wamid.KWAIT"]


def test_each_persons_newest_message_stays_however_old(db):
    ana, bia = add_person(db), add_person(db)
    inbound_row(db, 1, 90, ana["id"])
    inbound_row(db, 2, 60, ana["id"])
    newest_of_ana = inbound_row(db, 3, 45, ana["id"])  # her window goes back to it
    bia_old = inbound_row(db, 4, 50, bia["id"])
    bia_new = inbound_row(db, 5, 1, bia["id"])
    inbound_row(db, 6, 50)  # an unknown sender's

    pruned = prune_table(db, TABLE["inbound_messages"], KEEP, batch=2)

    assert (pruned.deleted, pruned.kept) == (4, 1)
    assert left(db, "inbound_messages") == {newest_of_ana, bia_new}
    assert bia_old not in left(db, "inbound_messages")


def test_an_open_alert_episode_stays_whole_and_still_reminds(db):
    db.execute("DELETE FROM ops_alerts")
    keep = dt.timedelta(days=90)
    opened = [
        alert_row(db, 1, 100, key="check:open", episode=True),
        alert_row(db, 2, 95, key="check:open", kind="reminder", episode=True),
        alert_row(db, 3, 91.1, key="check:open", kind="reminder", episode=True),
    ]
    closed_then_open = [
        alert_row(db, 4, 100, key="check:again", episode=True),
        alert_row(db, 5, 98, key="check:again", kind="resolved", episode=True),
    ]
    open_again = [
        alert_row(db, 6, 95, key="check:again", episode=True),
        alert_row(db, 7, 92, key="check:again", kind="reminder", episode=True),
    ]
    alert_row(db, 8, 100, key="check:closed", episode=True)
    alert_row(db, 9, 99, key="check:closed", kind="resolved", episode=True)
    alert_row(db, 10, 100)  # a one-shot notice (record_alert)
    young = alert_row(db, 11, 1)

    pruned = prune_table(db, TABLE["ops_alerts"], keep, batch=3)

    assert left(db, "ops_alerts") == {*opened, *open_again, young}
    assert (pruned.deleted, pruned.kept) == (len(closed_then_open) + 3, 5)
    # The open episode is still one: failing again reminds, it does not open another.
    alert = Alert("check:open", AlertSeverity.WARNING, "still failing")
    row = note_check(db, alert, failing=True, reminder_seconds=3600)
    assert row is not None and row.kind == AlertKind.REMINDER


def test_a_raw_body_received_again_lately_stays(db):
    replayed = raw_row(db, 1, 1)
    db.execute(
        "UPDATE raw_webhooks SET received_at = now() - interval '20 days' WHERE id = %s",
        (replayed,),
    )
    forgotten = raw_row(db, 2, 20)

    prune_table(db, TABLE["raw_webhooks"], dt.timedelta(days=7))

    assert left(db, "raw_webhooks") == {replayed}
    assert forgotten not in left(db, "raw_webhooks")


def test_the_file_of_a_document_still_on_its_way_stays_and_a_finished_ones_media_go(db):
    waiting = file_row(db, 1, 60, finished=False)
    finished = file_row(db, 2, 60)
    db.execute(
        "INSERT INTO document_media (document_id, phone_number_id, sha256, media_id, "
        "uploaded_at, expires_at) VALUES (%s, '1', 'b', 'm1', now(), now())",
        (finished,),
    )

    pruned = prune_table(db, TABLE["document_files"], KEEP)

    assert (pruned.deleted, pruned.kept) == (1, 1)
    assert left(db, "document_files") == {waiting}
    assert db.execute("SELECT count(*) AS n FROM document_media").fetchone()["n"] == 0


def test_a_run_over_every_table_reports_each(db):
    raw_row(db, 1, 10)
    status_row(db, 2, 40)
    inbound_row(db, 3, 40)
    alert_row(db, 4, 100)
    file_row(db, 5, 40)

    result = prune_history(db, RetentionSettings())

    assert [(t.table, t.deleted) for t in result.tables] == [
        ("raw_webhooks", 1),
        ("status_events", 1),
        ("inbound_messages", 1),
        ("ops_alerts", 1),
        ("document_files", 1),
    ]
    assert [t.keep_days for t in result.tables] == [7, 30, 30, 90, 30]
    assert result.deleted == 5 and "Deleted 5 rows" in result.summary()


def test_the_dagster_job_shows_the_counts_per_table(db, database_url):
    for n in range(3):
        status_row(db, n, 40)
    inbound_row(db, 9, 40)
    with DagsterInstance.ephemeral() as instance:
        run = execute(prune_history_job, resources=resources_for(database_url), instance=instance)
        [output] = [e for e in run.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata
    assert metadata["deleted_status_events"].value == 3
    assert metadata["deleted_inbound_messages"].value == 1
    assert metadata["deleted"].value == 4 and metadata["more_left"].value is False
    rows = {r.data["table"]: r.data for r in metadata["tables"].value.records}
    assert rows["status_events"]["deleted"] == 3 and rows["status_events"]["keep_days"] == 30
    assert set(rows) == {
        "raw_webhooks",
        "status_events",
        "inbound_messages",
        "ops_alerts",
        "document_files",
    }


def test_the_migration_keeps_one_copy_of_each_raw_body(empty_database, tmp_path):
    upgrade_before(empty_database, 17, tmp_path)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        for days, body in [(9, b"A"), (5, b"A"), (2, b"A"), (4, b"B")]:
            conn.execute(
                "INSERT INTO raw_webhooks (reason, body, received_at) "
                f"VALUES (%s, %s, {ago(days)})",
                (f"{body.decode()} {days} days ago", body),
            )

    upgrade(empty_database)

    with psycopg.connect(empty_database) as conn:
        rows = conn.execute(
            "SELECT body, received_count, reason, round(extract(epoch FROM "
            "last_received_at - received_at) / 86400) AS span FROM raw_webhooks ORDER BY body"
        ).fetchall()
    assert rows == [(b"A", 3, "A 2 days ago", 7), (b"B", 1, "B 4 days ago", 0)]


def test_the_job_runs_daily_on_its_own_schedule():
    from dagster import DefaultScheduleStatus

    from delivery_pipeline.dagster_defs.definitions import build_definitions
    from delivery_pipeline.settings import Settings

    settings = Settings.from_env({"RETENTION_CRON": "10 4 * * *"})
    repo = build_definitions(settings).get_repository_def()
    schedule = {s.name: s for s in repo.schedule_defs}["prune_history_daily"]
    assert schedule.job_name == "prune_history" and schedule.cron_schedule == "10 4 * * *"
    assert schedule.default_status == DefaultScheduleStatus.RUNNING
    assert "prune_history" in {j.name for j in repo.get_all_jobs()}
    assert Settings().schedules.retention_cron == "45 3 * * *"
