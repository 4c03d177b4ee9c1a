"""Quiet hours in the person's own time, DST-correct.

The rule lives in SQL (``quiet_until`` in sql/migrations/013, used by the eligibility
function); these property tests hold it against an independent reading of
the same rule with Python's zoneinfo, over zones with and without daylight
saving time and instants around their transitions.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from delivery_pipeline.settings import Settings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.data import add_document, add_person, person_writes, plan_body
from delivery_pipeline_tests.support.engine import sweep
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.properties import examples, instants

UTC = dt.UTC
ZONES = [
    "America/New_York",  # DST at 02:00 local
    "Europe/London",  # DST at 01:00 local
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "America/Sao_Paulo",  # DST abolished in 2019
    "Pacific/Chatham",  # +12:45 / +13:45
    "Asia/Kolkata",  # no DST, a half-hour offset
    "UTC",
]


def reference(at: dt.datetime, zone: str, quiet: str) -> dt.datetime | None:
    """When the quiet hours ``at`` falls in end, read with zoneinfo (None: not quiet)."""
    start, end = (dt.time.fromisoformat(part) for part in quiet.split("-"))
    tz = ZoneInfo(zone)
    local = at.astimezone(tz).replace(tzinfo=None)
    now = local.time()
    if start == end:
        return None
    if start < end:
        if not start <= now < end:
            return None
        ends = dt.datetime.combine(local.date(), end)
    elif now >= start:
        ends = dt.datetime.combine(local.date() + dt.timedelta(days=1), end)
    elif now < end:
        ends = dt.datetime.combine(local.date(), end)
    else:
        return None
    return _from_local(ends, tz)


def _from_local(wall: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """A local wall time as an instant, the way Postgres reads one: a time in a
    spring-forward gap with the offset from before the gap, a repeated time as
    its later (standard-time) occurrence."""
    earlier, later = (wall.replace(tzinfo=tz, fold=f) for f in (0, 1))
    if earlier.utcoffset() == later.utcoffset():
        return earlier.astimezone(UTC)
    if earlier.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != wall:
        return earlier.astimezone(UTC)  # nonexistent
    return later.astimezone(UTC)  # repeated


def transitions(zone: str) -> list[dt.datetime]:
    """The instants this zone changed its offset in 2025-2027 (hour resolution)."""
    tz = ZoneInfo(zone)
    found, at = [], dt.datetime(2025, 1, 1, tzinfo=UTC)
    while at.year < 2028:
        nxt = at + dt.timedelta(hours=1)
        if at.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
            found.append(nxt)
        at = nxt
    return found


TRANSITIONS = [t for zone in ZONES for t in transitions(zone)] or [
    dt.datetime(2026, 1, 1, tzinfo=UTC)
]

hhmm = st.builds(
    lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.sampled_from([0, 15, 30, 45])
)
windows = st.builds(lambda a, b: f"{a}-{b}", hhmm, hhmm)
near_transitions = st.builds(
    lambda t, minutes: t + dt.timedelta(minutes=minutes),
    st.sampled_from(TRANSITIONS),
    st.integers(-26 * 60, 26 * 60),
)
anywhere = instants(2025, 2027)


def sql_quiet_until(db: psycopg.Connection[Any], at: dt.datetime, zone: str, quiet: str) -> Any:
    row = db.execute(
        "SELECT quiet_until(%(at)s, %(zone)s, %(quiet)s) AS until",
        {"at": at, "zone": zone, "quiet": quiet},
    ).fetchone()
    assert row is not None
    return row["until"]


@examples(400)
@given(at=st.one_of(near_transitions, anywhere), zone=st.sampled_from(ZONES), quiet=windows)
def test_sql_agrees_with_zoneinfo(db, at, zone, quiet):
    assert sql_quiet_until(db, at, zone, quiet) == reference(at, zone, quiet)


@examples(200)
@given(at=st.one_of(near_transitions, anywhere), zone=st.sampled_from(ZONES), quiet=windows)
def test_the_end_is_in_the_future_and_not_quiet_itself(db, at, zone, quiet):
    until = sql_quiet_until(db, at, zone, quiet)
    if until is not None:
        assert until > at
        assert until - at <= dt.timedelta(hours=25)
        assert sql_quiet_until(db, until, zone, quiet) is None


@pytest.mark.parametrize(
    ("local", "expected_local"),
    [
        ("2026-03-07 23:00", "2026-03-08 08:00"),  # the night DST starts (New York)
        ("2026-10-31 23:00", "2026-11-01 08:00"),  # the night DST ends
        ("2026-06-01 07:59", "2026-06-01 08:00"),
        ("2026-06-01 08:00", None),
        ("2026-06-01 20:59", None),
        ("2026-06-01 21:00", "2026-06-02 08:00"),
    ],
)
def test_the_default_night_in_new_york(db, local, expected_local):
    tz = ZoneInfo("America/New_York")
    at = dt.datetime.fromisoformat(local).replace(tzinfo=tz)
    until = sql_quiet_until(db, at, "America/New_York", "21:00-08:00")
    if expected_local is None:
        assert until is None
    else:
        assert until.astimezone(tz).replace(tzinfo=None) == dt.datetime.fromisoformat(
            expected_local
        )


@pytest.mark.parametrize(
    ("quiet", "local", "expected_utc"),
    [
        # Quiet hours that end at 01:30 on the night 01:00-02:00 happens twice:
        # they end at the second 01:30 (standard time), never early.
        ("22:00-01:30", "2026-10-31 23:00", "2026-11-01 06:30"),
        # ... and at 02:30 on the night it never happens: the first instant after.
        ("22:00-02:30", "2026-03-07 23:00", "2026-03-08 07:30"),
    ],
)
def test_an_end_in_a_repeated_or_missing_hour(db, quiet, local, expected_utc):
    at = dt.datetime.fromisoformat(local).replace(tzinfo=ZoneInfo("America/New_York"))
    expected = dt.datetime.fromisoformat(expected_utc).replace(tzinfo=UTC)
    assert sql_quiet_until(db, at, "America/New_York", quiet) == expected
    assert reference(at, "America/New_York", quiet) == expected


# ── the engine: held for the night, sent in the morning ─────────────────


def zone_where_it_is(hour: int) -> str:
    """A fixed-offset zone in which the local hour is ``hour`` right now (the clock
    controlled through the data: the person lives where we need them to)."""
    offset = (hour - dt.datetime.now(UTC).hour) % 24
    if offset > 14:
        offset -= 24
    return f"Etc/GMT{-offset:+d}"


def night_settings(settings: Settings) -> Settings:
    return settings.replace(delivery={"quiet_hours": "21:00-08:00"})


@pytest.mark.engine
def test_a_plan_ready_at_night_goes_out_in_the_morning_not_before(db, sandbox, settings):
    person = add_person(db, time_zone=zone_where_it_is(23), inbound_age_seconds=3600)
    sandbox.say(person["phone"], "hi")  # their window is open: only the night holds it
    doc = add_document(db, person["id"], plan_body(2))

    held = sweep(night_settings(settings))

    assert held.held_quiet == 1 and held.chunks_sent == 0 and held.knocks_sent == 0
    row = db.execute(
        "SELECT next_attempt_at, quiet_until, next_attempt_at AT TIME ZONE %(tz)s AS local "
        "FROM documents WHERE id = %(id)s",
        {"id": doc["id"], "tz": person["time_zone"]},
    ).fetchone()
    assert row["next_attempt_at"] == row["quiet_until"]
    # 08:00 local, the next morning: 8 to 9 hours from now.
    assert row["local"].time() == dt.time(8, 0)
    until = row["next_attempt_at"] - dt.datetime.now(UTC)
    assert dt.timedelta(hours=8) < until <= dt.timedelta(hours=9)
    state = db.execute("SELECT state FROM document_states WHERE id = %s", (doc["id"],)).fetchone()
    assert state["state"] == "quiet_hours"
    # Not before: another sweep in the night sends nothing.
    assert sweep(night_settings(settings)).claimed == 0
    assert texts(sandbox.inbox(person["phone"])) == []

    # The morning comes (the person's clock reads 08:xx) and the backoff is over.
    db.execute(
        "UPDATE people SET time_zone = %(tz)s WHERE id = %(id)s",
        {"tz": zone_where_it_is(8), "id": person["id"]},
    )
    db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %s", (doc["id"],))
    morning = sweep(night_settings(settings))
    assert morning.delivered == 1 and len(texts(sandbox.inbox(person["phone"]))) == 2


@pytest.mark.engine
def test_new_quiet_hours_free_what_the_old_held_but_not_what_later_snoozed(db, sandbox, settings):
    person = add_person(db, time_zone=zone_where_it_is(23), inbound_age_seconds=None)
    night = add_document(db, person["id"], plan_body(1))
    assert sweep(night_settings(settings)).held_quiet == 1
    # Another document the person snoozed with Later: the reply and the hold share the instant.
    snoozed = add_document(
        db, person["id"], plan_body(1, tag="later-"), for_date=dt.date(2026, 1, 1)
    )
    morning = dt.datetime.now(UTC) + dt.timedelta(hours=9)
    db.execute(
        "UPDATE documents SET quiet_until = %s, next_attempt_at = %s WHERE id = %s",
        (morning, morning, snoozed["id"]),
    )
    db.execute(
        "INSERT INTO knock_replies (inbound_message_id, person_id, action, via, snoozed_until) "
        "VALUES ('wamid.later', %s, 'later', 'button', %s)",
        (person["id"], morning),
    )

    QUERIES.set_quiet_hours.one(db, {"person_id": person["id"], "quiet_hours": "00:00-00:00"})

    rows = {
        r["id"]: r
        for r in db.execute(
            "SELECT id, quiet_until, next_attempt_at <= now() AS due FROM documents "
            "WHERE person_id = %s",
            (person["id"],),
        ).fetchall()
    }
    assert rows[night["id"]]["quiet_until"] is None and rows[night["id"]]["due"]
    assert rows[snoozed["id"]]["quiet_until"] == morning and not rows[snoozed["id"]]["due"]
    # No quiet hours now: the freed plan is knocked for in the night.
    assert sweep(night_settings(settings)).knocks_sent == 1


@pytest.mark.engine
def test_a_reply_in_the_night_gets_it_at_once(db, sandbox, settings):
    person = add_person(db, time_zone=zone_where_it_is(23), inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    held = sweep(night_settings(settings))
    assert held.held_quiet == 1 and held.knocks_sent == 0, "no knock in the night either"

    person_writes(settings.database.database_url, sandbox, person, "are you there?")

    row = db.execute(
        "SELECT quiet_until, next_attempt_at <= now() AS due FROM documents WHERE id = %s",
        (doc["id"],),
    ).fetchone()
    assert row == {"quiet_until": None, "due": True}
    answered = sweep(night_settings(settings))
    assert answered.delivered == 1 and len(texts(sandbox.inbox(person["phone"]))) == 2


@pytest.mark.engine
def test_a_daily_brief_at_the_time_they_chose_is_not_held(db, sandbox, settings):
    tz = zone_where_it_is(7)
    local_now = dt.datetime.now(ZoneInfo(tz))
    person = add_person(
        db,
        time_zone=tz,
        inbound_age_seconds=3600,
        brief_local_time=f"{local_now.hour:02d}:00",
    )
    sandbox.say(person["phone"], "hi")
    add_document(db, person["id"], "Good morning.", kind="daily_brief", for_date=local_now.date())
    plan = add_document(db, person["id"], plan_body(1))
    db.execute(
        "UPDATE documents SET generated_at = now() + interval '1 second' WHERE id = %s",
        (plan["id"],),
    )
    result = sweep(night_settings(settings))  # 07:xx is inside 21:00-08:00
    assert texts(sandbox.inbox(person["phone"])) == ["Good morning."]
    assert result.held_quiet == 1, "the plan they did not ask for waits for 08:00"


@pytest.mark.engine
@pytest.mark.parametrize("wrote_since_the_claim", [False, True])
def test_a_message_while_the_hold_is_being_decided_is_not_slept_through(db, wrote_since_the_claim):
    """The sweep claimed the document to hold it for the night; the person wrote
    before the hold committed (the wake-up found nothing held yet). The hold
    sees the message on the person's row and gives the document back due now."""
    from delivery_pipeline.store.queries import QUERIES

    person = add_person(db, time_zone=zone_where_it_is(23), inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    db.execute(
        "UPDATE documents SET claim_token = gen_random_uuid(), claimed_at = now() - interval "
        "'2 seconds' WHERE id = %s",
        (doc["id"],),
    )
    if wrote_since_the_claim:
        db.execute("UPDATE people SET last_inbound_at = now() WHERE id = %s", (person["id"],))
    token = db.execute("SELECT claim_token FROM documents WHERE id = %s", (doc["id"],)).fetchone()
    morning = dt.datetime.now(UTC) + dt.timedelta(hours=9)
    [row] = db.execute(
        QUERIES.hold_quiet.sql,
        {"document_id": doc["id"], "token": token["claim_token"], "until": morning},
    ).fetchall()
    after = db.execute(
        "SELECT quiet_until IS NOT NULL AS held, next_attempt_at <= now() AS due, "
        "claim_token IS NULL AS released FROM documents WHERE id = %s",
        (doc["id"],),
    ).fetchone()
    if wrote_since_the_claim:
        assert row["held"] is False and after == {"held": False, "due": True, "released": True}
    else:
        assert row["held"] is True and after == {"held": True, "due": False, "released": True}


# ── a brief chosen late in the evening (sql/migrations/016) ────────────────────────


def brief_hour_reference(at: dt.datetime, zone: str, for_date: dt.date, brief: dt.time) -> bool:
    """Within the hour after the brief time on the brief's day, on the local wall clock."""
    local = at.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    starts = dt.datetime.combine(for_date, brief)
    return starts <= local <= starts + dt.timedelta(hours=1)


@given(
    at=instants(2025, 2027),
    zone=st.sampled_from(ZONES),
    brief=st.times(),
    days_back=st.integers(min_value=0, max_value=1),
)
@examples(300)
def test_the_brief_hour_agrees_with_zoneinfo(db, at, zone, brief, days_back):
    brief = brief.replace(microsecond=0)
    for_date = at.astimezone(ZoneInfo(zone)).date() - dt.timedelta(days=days_back)
    row = db.execute(
        "SELECT in_brief_hour(%s, %s, %s, %s) AS inside", (at, zone, for_date, brief)
    ).fetchone()
    assert row["inside"] == brief_hour_reference(at, zone, for_date, brief)


@pytest.mark.parametrize("minute", [0, 30, 59])
def test_a_brief_chosen_after_23_00_is_in_its_hour_until_midnight(db, minute):
    zone = "America/Sao_Paulo"
    for_date = dt.date(2026, 6, 10)
    brief = dt.time(23, minute)
    wall = dt.datetime.combine(for_date, brief) + dt.timedelta(seconds=30)
    at = wall.replace(tzinfo=ZoneInfo(zone))
    if minute == 59:
        at = at - dt.timedelta(seconds=30)  # 23:59:00, the brief's own minute
    row = db.execute(
        "SELECT in_brief_hour(%s, %s, %s, %s) AS inside", (at, zone, for_date, brief)
    ).fetchone()
    assert row["inside"] is True


@pytest.mark.engine
def test_a_daily_brief_chosen_for_23_00_goes_out_at_23_not_held_for_the_night(
    db, sandbox, settings
):
    tz = zone_where_it_is(23)
    local_now = dt.datetime.now(ZoneInfo(tz))
    person = add_person(db, time_zone=tz, inbound_age_seconds=3600, brief_local_time="23:00")
    sandbox.say(person["phone"], "hi")
    brief = add_document(
        db, person["id"], "Good night.", kind="daily_brief", for_date=local_now.date()
    )

    result = sweep(night_settings(settings))  # 23:xx is inside 21:00-08:00

    assert result.held_quiet == 0 and result.delivered == 1
    assert texts(sandbox.inbox(person["phone"])) == ["Good night."]
    state = db.execute("SELECT state FROM document_states WHERE id = %s", (brief["id"],))
    assert state.fetchone()["state"] == "delivered"
