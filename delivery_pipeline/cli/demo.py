"""The demo people ``up`` seeds: one per language and time zone, with no quiet hours.

Quiet hours keep unasked-for messages from a real person's night; these people
are the sandbox's, and the tour knocks them and answers for them whenever it is
tried. Living where they live (São Paulo, Mexico City, London) at 04:00 UTC,
they would all be asleep and the tour would have no knock to answer; moving
them to a zone where it is day now would make their zone, their brief time and
their number's country disagree, and tie the demo to the hour of the first
``up``. So their own quiet hours are none (``00:00-00:00``, the person's own
setting that ``people add --quiet-hours`` writes); everybody else keeps
``DELIVERY_QUIET_HOURS``.

``up`` configures a document template per locale, so a document whose
person's window is closed goes as one PDF (docs/design/files.md). The tour's
first three people are knocked all the same (their own ``outside_window`` is
``knock``): the tour answers their knocks. Noah never writes and is never
knocked: his plan reaches him as a file, which ``sandbox inbox`` shows with
the address that opens it.
"""

from __future__ import annotations

from dataclasses import dataclass

from delivery_pipeline.model import Kind
from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.intake import add_person, request_document
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import Person

NO_QUIET_HOURS = "00:00-00:00"


@dataclass(frozen=True)
class DemoPerson:
    phone: str
    name: str
    locale: str
    time_zone: str
    brief_local_time: str
    # Their documents outside the window: 'knock' (the tour answers the knock), or
    # None (the deployment's: a file, with up's document templates).
    outside_window: str | None = "knock"
    brief_opt_in: bool = True

    def ours(self, person: Person) -> bool:
        """Is ``person`` this demo person (not someone given their number since)?"""
        return (person.phone, person.name, person.locale, person.time_zone) == (
            self.phone,
            self.name,
            self.locale,
            self.time_zone,
        )

    def seeded(self, person: Person) -> bool:
        """Is ``person`` this demo person as ``up`` made them, quiet hours left at the
        default (an ``up`` from before the demo's own quiet hours)?"""
        return (person.phone, person.name, person.locale, person.time_zone) == (
            self.phone,
            self.name,
            self.locale,
            self.time_zone,
        ) and person.quiet_hours is None


DEMO_PEOPLE = (
    DemoPerson("+5511900000001", "Ana Souza", "pt", "America/Sao_Paulo", "07:00"),
    DemoPerson("+5215500000002", "Lucía Gómez", "es", "America/Mexico_City", "07:30"),
    DemoPerson("+447700900003", "Sam Taylor", "en", "Europe/London", "08:00"),
    DemoPerson(
        "+447700900004",
        "Noah Brown",
        "en",
        "Europe/London",
        "08:00",
        outside_window=None,
        brief_opt_in=False,
    ),
)


def seed_demo(database_url: str, whatsapp: WhatsAppSettings | None = None) -> list[Person]:
    """Demo people (one per language and zone, and Noah, who gets files), each with a plan
    requested; idempotent."""
    people = []
    with connect(database_url) as conn:
        for demo in DEMO_PEOPLE:
            person = QUERIES.person_by_phone.one(conn, {"phone": demo.phone})
            if person is None:
                person = add_person(
                    conn,
                    phone=demo.phone,
                    name=demo.name,
                    locale=demo.locale,
                    time_zone=demo.time_zone,
                    brief_opt_in=demo.brief_opt_in,
                    brief_local_time=demo.brief_local_time,
                    quiet_hours=NO_QUIET_HOURS,
                    whatsapp=whatsapp,
                )
                if demo.outside_window is not None:
                    person = QUERIES.set_outside_window.one(
                        conn, {"person_id": person.id, "outside_window": demo.outside_window}
                    )
                    assert person is not None  # it was just added
                request_document(conn, person.id, Kind.PLAN)
            elif demo.seeded(person):
                person = QUERIES.set_quiet_hours.one(
                    conn, {"person_id": person.id, "quiet_hours": NO_QUIET_HOURS}
                )
                assert person is not None  # it was just read
            if demo.ours(person) and person.outside_window is None and demo.outside_window:
                # Seeded by an up from before document templates: still knocked.
                person = QUERIES.set_outside_window.one(
                    conn, {"person_id": person.id, "outside_window": demo.outside_window}
                )
                assert person is not None  # it was just read
            people.append(person)
    return people
