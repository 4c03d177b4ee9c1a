"""The daily delivery report on a small constructed data set with known numbers."""

from __future__ import annotations

import datetime as dt

import pytest
from dagster import DagsterInstance, build_schedule_context, materialize

from delivery_pipeline.dagster_defs.assets import build_report_asset
from delivery_pipeline.dagster_defs.resources import AppDatabase, DeliveryResource
from delivery_pipeline.dagster_defs.schedules import build_schedules
from delivery_pipeline.reports.report import delivery_report as build_report
from delivery_pipeline.settings import DatabaseSettings, Settings
from delivery_pipeline_tests.support.data import add_person
from delivery_pipeline_tests.support.ops import add_status

DAY = dt.date(2026, 3, 10)
UTC = dt.UTC

DEFAULTS = Settings().schedules
delivery_report = build_report_asset(DEFAULTS.report_start_date)
daily_delivery_report = next(
    s for s in build_schedules(DEFAULTS) if s.name == "daily_delivery_report"
)


def at(day_offset: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime.combine(
        DAY + dt.timedelta(days=day_offset), dt.time(hour, minute), tzinfo=UTC
    )


def doc(
    db,
    person_id,
    *,
    generated=None,
    delivered=None,
    kind="plan",
    status="succeeded",
    abandoned=None,
    reason=None,
    knock=None,
    knock_id=None,
):
    return db.execute(
        "INSERT INTO documents (person_id, kind, for_date, status, body, created_at, "
        "generated_at, delivered_at, abandoned_at, abandon_reason, knock_sent_at, "
        "knock_message_id) VALUES (%(p)s, %(k)s, %(fd)s, %(s)s, 'body', "
        "coalesce(%(g)s, %(a)s, %(kn)s, now()), %(g)s, %(d)s, %(a)s, %(r)s, %(kn)s, %(ki)s) "
        "RETURNING id",
        {
            "p": person_id,
            "k": kind,
            "fd": DAY if kind == "daily_brief" else None,
            "s": status,
            "g": generated,
            "d": delivered,
            "a": abandoned,
            "r": reason,
            "kn": knock,
            "ki": knock_id,
        },
    ).fetchone()["id"]


def chunk(db, document_id, index, sent, *, delivered=None, read=None):
    db.execute(
        "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
        "wa_message_id, sent_at, delivered_at, read_at) VALUES (%(d)s, %(i)s, 'sent', 'cb', "
        "'wamid.c.' || %(d)s || '.' || %(i)s, %(s)s, %(dl)s, %(r)s)",
        {"d": document_id, "i": index, "s": sent, "dl": delivered, "r": read},
    )


def inbound(db, person_id, sent_at, wamid):
    db.execute(
        "INSERT INTO inbound_messages (wa_message_id, person_id, message_type, body, sent_at, "
        "payload) VALUES (%(w)s, %(p)s, 'text', 'hi', %(s)s, '{}')",
        {"w": wamid, "p": person_id, "s": sent_at},
    )


@pytest.fixture
def day_of_data(db):
    ana, ben, caro = (add_person(db)["id"] for _ in range(3))
    # generated and delivered that day: 1..5 minutes
    delivered = [doc(db, ana, generated=at(0, 10), delivered=at(0, 10, m)) for m in range(1, 6)]
    # generated the day before, delivered that day after 90 minutes
    doc(db, ben, generated=at(-1, 23), delivered=at(0, 0, 30), kind="daily_brief")
    # generated that day, delivered the next (generated, not delivered that day)
    doc(db, ben, generated=at(0, 23, 50), delivered=at(1, 0, 5))
    # generated that day, still undelivered
    doc(db, caro, generated=at(0, 12))
    # chunks: four sent that day (3 delivered, 2 read), one the day before
    chunk(db, delivered[0], 0, at(0, 10, 1), delivered=at(0, 10, 1), read=at(0, 11))
    chunk(db, delivered[0], 1, at(0, 10, 1), delivered=at(0, 10, 1), read=at(1, 8))
    chunk(db, delivered[1], 0, at(0, 10, 2), delivered=at(0, 10, 2))
    chunk(db, delivered[2], 0, at(0, 10, 3))
    chunk(db, delivered[3], 0, at(-1, 10, 3), delivered=at(-1, 10, 4), read=at(-1, 10, 5))
    # knocks that day: seen and answered; delivered, not seen, and the person wrote only
    # before; never delivered. One the day before.
    doc(db, ana, knock=at(0, 7), knock_id="wamid.k1")
    add_status(db, "wamid.k1", "delivered", 0)
    add_status(db, "wamid.k1", "read", 0)
    inbound(db, ana, at(0, 9), "wamid.in.1")
    doc(db, ben, knock=at(0, 7), knock_id="wamid.k2")
    add_status(db, "wamid.k2", "delivered", 0)
    inbound(db, ben, at(0, 6), "wamid.in.2")
    doc(db, caro, knock=at(0, 8), knock_id="wamid.k3")
    doc(db, caro, knock=at(-1, 8), knock_id="wamid.k0")
    # abandoned that day: 2 stale, 1 undeliverable; one the day before; a failed generation
    for reason in ("stale", "stale", "undeliverable"):
        doc(db, caro, abandoned=at(0, 15), reason=reason)
    doc(db, caro, abandoned=at(-1, 15), reason="max_attempts")
    failed = doc(db, caro, status="pending")
    db.execute(
        "UPDATE documents SET status = 'failed', generation_failed_at = %(t)s WHERE id = %(id)s",
        {"t": at(0, 16), "id": failed},
    )
    return db


def test_report_numbers(day_of_data):
    report = build_report(day_of_data, DAY)
    n = report.numbers
    assert n["documents_generated"] == 7  # 5 + the next-day delivery + the undelivered
    assert n["documents_delivered"] == 6  # 5 + the one generated the day before
    # waits 60, 120, 180, 240, 300, 5400 s: linear interpolation
    assert n["time_to_deliver_p50_seconds"] == pytest.approx(210.0)
    assert n["time_to_deliver_p95_seconds"] == pytest.approx(300 + 0.75 * 5100)
    assert (n["chunks_sent"], n["chunks_delivered"], n["chunks_read"]) == (4, 3, 2)
    assert (n["knocks_sent"], n["knocks_delivered"], n["knocks_seen"], n["knocks_answered"]) == (
        3,
        2,
        1,
        1,
    )
    assert report.abandoned_by_reason == {"generation_failed": 1, "stale": 2, "undeliverable": 1}
    assert n["abandoned_total"] == 4 and n["abandoned_stale"] == 2
    assert report.by_kind.set_index("kind").to_dict("index") == {
        "daily_brief": {"generated": 0, "delivered": 1},
        "plan": {"generated": 7, "delivered": 5},
    }
    text = report.markdown()
    assert "3 / 2 / 1 / 1" in text and "| — stale | 2 |" in text


def test_chunks_count_delivered_when_only_read_arrived(db):
    person = add_person(db)["id"]
    d = doc(db, person, generated=at(0, 9), delivered=at(0, 9, 1))
    chunk(db, d, 0, at(0, 9, 1), read=at(0, 9, 5))  # the delivered status never came
    n = build_report(db, DAY).numbers
    assert (n["chunks_delivered"], n["chunks_read"]) == (1, 1)


def test_an_empty_day(db):
    n = build_report(db, DAY).numbers
    assert n["documents_generated"] == n["documents_delivered"] == n["knocks_sent"] == 0
    assert n["time_to_deliver_p50_seconds"] is None
    assert n["abandoned_total"] == 0


def test_report_asset_shows_the_numbers_as_metadata(day_of_data, database_url):
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [delivery_report],
            partition_key=DAY.isoformat(),
            instance=instance,
            resources={
                "app_db": AppDatabase(DatabaseSettings(database_url=database_url)),
                "delivery": DeliveryResource(),
            },
        )
    assert result.success
    metadata = result.asset_materializations_for_node("delivery_report")[0].metadata
    assert metadata["documents_delivered"].value == 6
    assert metadata["knocks_answered"].value == 1
    assert metadata["abandoned_by_reason"].value["stale"] == 2
    assert "Delivery report 2026-03-10" in metadata["report"].value
    by_kind = {r.data["kind"]: r.data for r in metadata["by_kind"].value.records}
    assert by_kind["plan"] == {"kind": "plan", "generated": 7, "delivered": 5}
    assert [c.name for c in metadata["by_kind"].value.schema.columns] == [
        "kind",
        "generated",
        "delivered",
    ]


def test_daily_schedule_asks_for_yesterday():
    context = build_schedule_context(
        scheduled_execution_time=dt.datetime(2026, 3, 11, 0, 15, tzinfo=UTC)
    )
    request = daily_delivery_report(context)
    assert request.partition_key == "2026-03-10"
