"""The demo people ``up`` seeds: no quiet hours of their own, even when an older ``up``
made them; nobody else's quiet hours change."""

from __future__ import annotations

from delivery_pipeline.cli.demo import DEMO_PEOPLE, NO_QUIET_HOURS, seed_demo
from delivery_pipeline.store.queries import QUERIES


def _quiet_hours(db, phone: str) -> str | None:
    person = QUERIES.person_by_phone.one(db, {"phone": phone})
    assert person is not None
    return person.quiet_hours


def test_the_demo_people_have_no_quiet_hours_and_get_a_plan(db, database_url):
    people = seed_demo(database_url)
    assert [p.phone for p in people] == [d.phone for d in DEMO_PEOPLE]
    assert {p.quiet_hours for p in people} == {NO_QUIET_HOURS}
    plans = db.execute("SELECT count(*) AS n FROM documents WHERE kind = 'plan'").fetchone()
    assert plans["n"] == len(DEMO_PEOPLE)
    # Idempotent: a second up adds nothing.
    seed_demo(database_url)
    plans = db.execute("SELECT count(*) AS n FROM documents WHERE kind = 'plan'").fetchone()
    assert plans["n"] == len(DEMO_PEOPLE)


def test_an_older_demo_person_is_mended_and_nobody_else_is_touched(db, database_url):
    ana, lucia, *_ = DEMO_PEOPLE
    # As an older up made Ana (the default quiet hours), and somebody else on
    # Lucía's number with their own name: theirs are not the demo's to change.
    for phone, name, locale, zone in (
        (ana.phone, ana.name, ana.locale, ana.time_zone),
        (lucia.phone, "Lucía Real", lucia.locale, lucia.time_zone),
    ):
        db.execute(
            QUERIES.insert_person.sql,
            {
                "phone": phone,
                "name": name,
                "locale": locale,
                "time_zone": zone,
                "brief_opt_in": False,
                "brief_local_time": "07:00",
                "phone_number_id": None,
            },
        )

    seed_demo(database_url)

    assert _quiet_hours(db, ana.phone) == NO_QUIET_HOURS
    assert _quiet_hours(db, lucia.phone) is None


def test_the_tour_knocks_its_three_and_noah_gets_files(db, database_url):
    people = {p.name: p for p in seed_demo(database_url)}
    assert {name: p.outside_window for name, p in people.items()} == {
        "Ana Souza": None,
        "Lucía Gómez": None,
        "Sam Taylor": None,
        "Noah Brown": "file",
    }
