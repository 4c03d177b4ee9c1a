"""Daily briefs against real Postgres: the local-date logic (property-tested
against Python's zoneinfo, DST included), idempotent enqueue, and the stale
abandonment. The clock is a parameter (``at``), never a sleep."""

from __future__ import annotations

import datetime as dt
import threading
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from delivery_pipeline.generation.briefs import (
    abandon_stale_briefs,
    brief_due_date,
    enqueue_daily_briefs,
    run_briefs,
)
from delivery_pipeline.generation.worker import generation_due
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.data import add_person, document, inbound_arrives
from delivery_pipeline_tests.support.properties import examples, instants

UTC = dt.UTC
LEASE = dt.timedelta(minutes=10)

# Zones with DST both ways, half- and quarter-hour offsets, a 30-minute DST
# (Lord Howe), DST abolished (Sao Paulo since 2019), a skipped calendar day
# (Apia, 2011-12-30), negative DST (Dublin), and ±14 h.
ZONES = [
    "UTC",
    "America/New_York",
    "America/Sao_Paulo",
    "America/Santiago",
    "America/St_Johns",
    "Europe/Lisbon",
    "Europe/Madrid",
    "Europe/Dublin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago",
]


def local_due_date(at: dt.datetime, zone: str, brief_time: dt.time) -> dt.date | None:
    """The reference: Python's zoneinfo, wall-clock comparison."""
    local = at.astimezone(ZoneInfo(zone))
    return local.date() if local.time() >= brief_time else None


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def brief(db, person_id: int, for_date: dt.date) -> dict:
    return db.execute(
        QUERIES.insert_pending_document.sql,
        {"person_id": person_id, "kind": "daily_brief", "for_date": for_date},
    ).fetchone()


def briefs_of(db, person_id: int) -> list[dt.date]:
    return [
        r["for_date"]
        for r in db.execute(
            "SELECT for_date FROM documents WHERE person_id = %(p)s AND kind = 'daily_brief' "
            "ORDER BY for_date",
            {"p": person_id},
        )
    ]


# ── the local-date logic ────────────────────────────────────────────────


@examples(400)
@given(
    at=instants(2000, 2035),
    zone=st.sampled_from(ZONES),
    brief_time=st.times(),
)
# spring forward in New York: 02:30 does not exist; due from 03:00 EDT
@example(at=utc(2025, 3, 9, 6, 59, 59), zone="America/New_York", brief_time=dt.time(2, 30))
@example(at=utc(2025, 3, 9, 7, 0, 0), zone="America/New_York", brief_time=dt.time(2, 30))
# fall back: 01:30 happens twice; due from the first
@example(at=utc(2025, 11, 2, 5, 29, 59), zone="America/New_York", brief_time=dt.time(1, 30))
@example(at=utc(2025, 11, 2, 5, 30, 0), zone="America/New_York", brief_time=dt.time(1, 30))
# Apia skipped 30 December 2011
@example(at=utc(2011, 12, 30, 10, 0), zone="Pacific/Apia", brief_time=dt.time(0, 0))
@example(at=utc(2011, 12, 30, 9, 59, 59), zone="Pacific/Apia", brief_time=dt.time(7, 0))
# Lord Howe's half-hour DST
@example(at=utc(2025, 10, 4, 15, 30), zone="Australia/Lord_Howe", brief_time=dt.time(2, 15))
@example(at=utc(2025, 6, 1, 23, 59, 59, 999999), zone="UTC", brief_time=dt.time(23, 59, 59, 999999))
def test_brief_due_date_matches_zoneinfo(db, at, zone, brief_time):
    assert brief_due_date(db, at, zone, brief_time) == local_due_date(at, zone, brief_time)


@examples(60)
@given(
    at=instants(2000, 2035),
    zone=st.sampled_from(ZONES),
    days_back=st.integers(min_value=-1, max_value=2),
)
@example(at=utc(2011, 12, 30, 10, 0), zone="Pacific/Apia", days_back=1)
@example(at=utc(2025, 3, 30, 0, 59, 59), zone="Europe/Lisbon", days_back=1)
def test_stale_means_before_the_local_date_per_zoneinfo(db, at, zone, days_back):
    local_today = at.astimezone(ZoneInfo(zone)).date()
    for_date = local_today - dt.timedelta(days=days_back)
    with db.transaction(force_rollback=True):
        person = add_person(db, time_zone=zone)
        doc = brief(db, person["id"], for_date)
        abandoned = [r.id for r in abandon_stale_briefs(db, lease=LEASE, at=at)]
        assert abandoned == ([doc["id"]] if for_date < local_today else [])


# ── enqueue ─────────────────────────────────────────────────────────────


def test_enqueue_when_the_local_brief_time_passes_and_only_once(db):
    ana = add_person(db, time_zone="America/Sao_Paulo", brief_opt_in=True, brief_local_time="07:00")
    before = utc(2031, 5, 20, 9, 59)  # 06:59 in São Paulo (UTC-3)
    at_seven = utc(2031, 5, 20, 10, 0)

    assert enqueue_daily_briefs(db, at=before) == []
    [row] = enqueue_daily_briefs(db, at=at_seven)
    assert (row.person_id, row.for_date) == (ana["id"], dt.date(2031, 5, 20))
    assert enqueue_daily_briefs(db, at=at_seven) == []
    assert enqueue_daily_briefs(db, at=utc(2031, 5, 21, 2, 59)) == []  # 23:59 local, same day
    assert document(db, row.id)["status"] == "pending"

    [next_day] = enqueue_daily_briefs(db, at=utc(2031, 5, 21, 10, 15))
    assert next_day.for_date == dt.date(2031, 5, 21)
    assert briefs_of(db, ana["id"]) == [dt.date(2031, 5, 20), dt.date(2031, 5, 21)]


def test_enqueue_uses_each_persons_zone(db):
    at = utc(2031, 6, 1, 12, 0)
    tokyo = add_person(db, time_zone="Asia/Tokyo", brief_opt_in=True)  # 21:00 on 1 June
    la = add_person(db, time_zone="America/Los_Angeles", brief_opt_in=True)  # 05:00
    kiritimati = add_person(
        db, time_zone="Pacific/Kiritimati", brief_opt_in=True, brief_local_time="01:00"
    )  # 02:00 on 2 June
    honolulu = add_person(
        db, time_zone="Pacific/Honolulu", brief_opt_in=True, brief_local_time="01:00"
    )  # 02:00 on 1 June

    rows = {r.person_id: r.for_date for r in enqueue_daily_briefs(db, at=at)}

    assert rows == {
        tokyo["id"]: dt.date(2031, 6, 1),
        kiritimati["id"]: dt.date(2031, 6, 2),
        honolulu["id"]: dt.date(2031, 6, 1),
    }
    assert la["id"] not in rows


def test_enqueue_skips_the_opted_out_the_unreachable_and_the_not_opted_in(db):
    at = utc(2031, 6, 1, 12, 0)
    add_person(db, brief_opt_in=False)
    gone = add_person(db, brief_opt_in=True)
    db.execute("UPDATE people SET opted_out_at = now() WHERE id = %(id)s", {"id": gone["id"]})
    db.execute(
        QUERIES.insert_person.sql,
        {
            "phone": None,
            "name": "no number",
            "locale": "en",
            "time_zone": "UTC",
            "brief_opt_in": True,
            "brief_local_time": dt.time(7),
            "phone_number_id": None,
        },
    )
    assert enqueue_daily_briefs(db, at=at) == []


def test_a_brief_requested_by_hand_for_today_is_not_duplicated(db):
    person = add_person(db, brief_opt_in=True)
    brief(db, person["id"], dt.date(2031, 6, 1))
    assert enqueue_daily_briefs(db, at=utc(2031, 6, 1, 12, 0)) == []
    assert briefs_of(db, person["id"]) == [dt.date(2031, 6, 1)]


def test_concurrent_enqueues_create_one_brief_each(db, database_url):
    people = [add_person(db, brief_opt_in=True) for _ in range(40)]
    at = utc(2031, 6, 1, 12, 0)
    counts: list[int] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        with connect(database_url) as conn:
            barrier.wait()
            counts.append(len(enqueue_daily_briefs(conn, at=at)))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) == 40
    assert all(briefs_of(db, p["id"]) == [dt.date(2031, 6, 1)] for p in people)


def test_enqueue_with_the_real_clock(db):
    person = add_person(db, time_zone="Asia/Kathmandu", brief_opt_in=True, brief_local_time="00:00")
    [row] = enqueue_daily_briefs(db)
    local_today = db.execute("SELECT (now() AT TIME ZONE 'Asia/Kathmandu')::date AS d").fetchone()[
        "d"
    ]
    assert (row.person_id, row.for_date) == (person["id"], local_today)


# ── stale abandonment ───────────────────────────────────────────────────


def _set(db, document_id: int, sql: str) -> None:
    db.execute(f"UPDATE documents SET {sql} WHERE id = %(id)s", {"id": document_id})


def test_abandons_every_open_brief_of_an_earlier_local_day(db):
    at = utc(2031, 6, 2, 12, 0)
    person = add_person(db, time_zone="Europe/Madrid", inbound_age_seconds=None)
    yesterday, today = dt.date(2031, 6, 1), dt.date(2031, 6, 2)
    person2 = add_person(db, time_zone="Europe/Madrid")
    docs = {}
    for state, who, day in [
        ("pending", person, yesterday),
        ("generating", person2, yesterday),
        ("undelivered", add_person(db), yesterday),
        ("awaiting_reply", add_person(db), yesterday),
        ("delivered", add_person(db), yesterday),
        ("generation_failed", add_person(db), yesterday),
        ("expired_claim", add_person(db), yesterday),
        ("live_claim", add_person(db), yesterday),
        ("today", person, today),
    ]:
        docs[state] = brief(db, who["id"], day)["id"]
    plan = db.execute(
        QUERIES.insert_pending_document.sql,
        {"person_id": person["id"], "kind": "plan", "for_date": None},
    ).fetchone()["id"]
    _set(db, plan, "created_at = now() - interval '3 days'")
    _set(
        db,
        docs["generating"],
        "status = 'generating', generation_claim_token = gen_random_uuid(), "
        "generation_claimed_at = now(), next_generation_at = now() + interval '10 minutes'",
    )
    for key in ("undelivered", "awaiting_reply", "delivered", "expired_claim", "live_claim"):
        _set(db, docs[key], "status = 'succeeded', body = 'b', generated_at = now()")
    _set(db, docs["awaiting_reply"], "knock_sent_at = now(), awaiting_reply_since = now()")
    _set(db, docs["delivered"], "delivered_at = now()")
    _set(db, docs["generation_failed"], "status = 'failed', generation_error = 'x'")
    _set(
        db,
        docs["expired_claim"],
        "claim_token = gen_random_uuid(), claimed_at = now() - interval '11 minutes'",
    )
    _set(db, docs["live_claim"], "claim_token = gen_random_uuid(), claimed_at = now()")

    abandoned = {r.id: r.status for r in abandon_stale_briefs(db, lease=LEASE, at=at)}

    assert abandoned == {
        docs["pending"]: "pending",
        docs["generating"]: "generating",
        docs["undelivered"]: "succeeded",
        docs["awaiting_reply"]: "succeeded",
        docs["expired_claim"]: "succeeded",
    }
    for doc_id in abandoned:
        row = document(db, doc_id)
        assert row["abandon_reason"] == "stale" and row["claim_token"] is None
    for untouched in ("delivered", "generation_failed", "live_claim", "today"):
        assert document(db, docs[untouched])["abandoned_at"] is None, untouched
    assert document(db, plan)["abandoned_at"] is None
    assert abandon_stale_briefs(db, lease=LEASE, at=at) == []
    row = db.execute(
        "SELECT state, abandon_reason FROM document_states WHERE id = %(id)s",
        {"id": docs["awaiting_reply"]},
    ).fetchone()
    assert row == {"state": "abandoned", "abandon_reason": "stale"}
    # The abandoned pending brief left the generation queue: with the two
    # documents still legitimately pending gone, nothing is due.
    db.execute("DELETE FROM documents WHERE id = ANY(%s)", ([docs["today"], plan],))
    assert generation_due(db) is False


def test_an_abandoned_brief_stays_abandoned_when_the_person_writes(db, database_url):
    person = add_person(db, time_zone="UTC", inbound_age_seconds=None)
    doc = brief(db, person["id"], dt.date(2031, 6, 1))
    _set(
        db,
        doc["id"],
        "status = 'succeeded', body = 'b', knock_sent_at = now(), awaiting_reply_since = now()",
    )
    abandon_stale_briefs(db, lease=LEASE, at=utc(2031, 6, 2, 0, 0, 1))
    before = document(db, doc["id"])
    inbound_arrives(database_url, person)
    opened = db.execute(
        "SELECT last_inbound_at FROM people WHERE id = %(id)s", {"id": person["id"]}
    ).fetchone()
    assert opened["last_inbound_at"] is not None, "the message reached the service"
    after = document(db, doc["id"])
    # not woken: the brief was not put back in the queue
    assert after["awaiting_reply_since"] == before["awaiting_reply_since"] is not None
    assert after["next_attempt_at"] == before["next_attempt_at"]
    state = db.execute(
        "SELECT state, abandon_reason FROM document_states WHERE id = %(id)s", {"id": doc["id"]}
    ).fetchone()
    assert state == {"state": "abandoned", "abandon_reason": "stale"}


def test_stale_depends_on_the_persons_zone(db):
    # 10:30 UTC on 1 June is already 2 June in Kiritimati (UTC+14), still 1 June in Honolulu.
    at = utc(2031, 6, 1, 10, 30)
    kiritimati = add_person(db, time_zone="Pacific/Kiritimati")
    honolulu = add_person(db, time_zone="Pacific/Honolulu")
    k = brief(db, kiritimati["id"], dt.date(2031, 6, 1))
    h = brief(db, honolulu["id"], dt.date(2031, 6, 1))
    assert [r.id for r in abandon_stale_briefs(db, lease=LEASE, at=at)] == [k["id"]]
    assert document(db, h["id"])["abandoned_at"] is None


def test_run_briefs_abandons_yesterdays_and_enqueues_todays(db):
    person = add_person(
        db,
        time_zone="America/New_York",
        brief_opt_in=True,
        brief_local_time="06:30",
        inbound_age_seconds=None,
    )
    first = run_briefs(db, lease=LEASE, at=utc(2031, 3, 10, 11, 0))  # 07:00 EDT
    assert [(r.person_id, r.for_date) for r in first.enqueued] == [
        (person["id"], dt.date(2031, 3, 10))
    ]
    second = run_briefs(db, lease=LEASE, at=utc(2031, 3, 11, 10, 45))  # 06:45 EDT next day
    assert [r.id for r in second.abandoned] == [first.enqueued[0].id]
    assert [r.for_date for r in second.enqueued] == [dt.date(2031, 3, 11)]
    assert second.as_dict() == {
        "enqueued": 1,
        "abandoned_stale": 1,
        "abandoned_by_state": {"pending": 1},
    }


@pytest.mark.parametrize("zone", ["Not/AZone"])
def test_unknown_zone_is_refused_at_the_door(db, zone):
    import psycopg

    with pytest.raises(psycopg.errors.CheckViolation):
        add_person(db, time_zone=zone, brief_opt_in=True)
