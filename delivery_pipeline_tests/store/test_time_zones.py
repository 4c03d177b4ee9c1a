"""A person's time zone is an IANA name: at the door (the CLI), in the schema, and
for the rows an older check let in (sql/migrations/016)."""

from __future__ import annotations

import zoneinfo

import psycopg
import pytest

from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.postgres import upgrade_before
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.data import new_phone

pytestmark = pytest.mark.engine

# POSIX strings ('UTC+3' is three hours *behind* UTC to Postgres), nonsense that
# parses as one, abbreviations, the tz database's copies and the host's aliases,
# a wrong case.
NOT_IANA = [
    "UTC+3",
    "abc+3",
    "UTC+99",
    "EST5",
    "PST",
    "CEST",
    "posix/Europe/Berlin",
    "right/UTC",
    "posixrules",
    "localtime",
    "america/sao_paulo",
    "Mars/Olympus",
    "",
]
IANA = ["America/Sao_Paulo", "Europe/Lisbon", "UTC", "Etc/GMT-3", "Asia/Kolkata", "EST5EDT"]


def valid(db: psycopg.Connection, zone: str) -> bool:
    return bool(db.execute(QUERIES.time_zone_is_valid.sql, {"time_zone": zone}).fetchone()["valid"])


def insert(db: psycopg.Connection, zone: str) -> None:
    db.execute("INSERT INTO people (phone, time_zone) VALUES (%s, %s)", (new_phone("+4930"), zone))


@pytest.mark.parametrize("zone", NOT_IANA)
def test_the_schema_refuses_what_is_not_an_iana_name(db, zone):
    assert not valid(db, zone)
    with pytest.raises(psycopg.errors.CheckViolation):
        insert(db, zone)


def test_every_iana_name_postgres_can_use_is_accepted(db):
    usable = {row["name"] for row in db.execute("SELECT name FROM pg_timezone_names")}
    keys = sorted((zoneinfo.available_timezones() - {"localtime"}) & usable)
    assert len(keys) > 400
    refused = [k for k in keys if not valid(db, k)]
    assert refused == []
    for zone in IANA:
        insert(db, zone)


@pytest.mark.parametrize("zone", ["UTC+3", "abc+3", "UTC+99", "PST"])
def test_people_add_says_in_one_line_what_a_time_zone_must_be(database_url, db, zone):
    result = run(database_url, "people", "add", "--phone", new_phone(), "--time-zone", zone)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line == (
        f"error: time zone {zone!r} is not an IANA time zone name: use one like "
        "America/Sao_Paulo, Europe/Lisbon or UTC (a fixed offset is Etc/GMT-3 for UTC+3)"
    )
    assert db.execute("SELECT count(*) AS n FROM people").fetchone()["n"] == 0


def test_the_migration_gives_a_bad_zone_the_local_time_it_had_and_keeps_the_old_one(
    empty_database, tmp_path
):
    upgrade_before(empty_database, 16, tmp_path)
    zones = {"UTC+3": "Etc/GMT+3", "abc+3": "Etc/GMT+3", "PST": "Etc/GMT+8", "UTC+99": "UTC"}
    with psycopg.connect(empty_database, autocommit=True) as conn:
        ids = {}
        for zone in [*zones, "America/Sao_Paulo"]:
            ids[zone] = conn.execute(
                "INSERT INTO people (phone, time_zone) VALUES (%s, %s) RETURNING id",
                (new_phone("+4930"), zone),
            ).fetchone()[0]

    upgrade(empty_database)

    with psycopg.connect(empty_database) as conn:
        now = {
            row[0]: row[1]
            for row in conn.execute("SELECT id, time_zone FROM people ORDER BY id").fetchall()
        }
        for old, new in zones.items():
            assert now[ids[old]] == new
            if new != "UTC":  # the same local wall clock as before, to the second
                same = conn.execute(
                    "SELECT (now() AT TIME ZONE %s) = (now() AT TIME ZONE %s)", (old, new)
                ).fetchone()[0]
                assert same, (old, new)
        assert now[ids["America/Sao_Paulo"]] == "America/Sao_Paulo"
        repairs = conn.execute(
            "SELECT person_id, old_time_zone, new_time_zone FROM people_time_zone_repairs"
        ).fetchall()
        assert sorted(repairs) == sorted((ids[old], old, new) for old, new in zones.items())
        [alert] = conn.execute(
            "SELECT severity, message, details FROM ops_alerts "
            "WHERE dedup_key = 'migration:016:time_zones'"
        ).fetchall()
        assert alert[0] == "warning" and alert[1].startswith("4 people had a time zone")
        assert {p["was"] for p in alert[2]["people"]} == set(zones)
