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

``up`` configures a document template per locale and no kind that goes as a
file outside the window by itself (docs/design/files.md): the tour's first
three people, and anyone a newcomer adds, are knocked, and the tour answers
their knocks. Noah never writes, and his own ``outside_window`` is ``file``:
his plan reaches him as one PDF with no reply needed, which ``sandbox inbox``
shows with the address that opens it.
"""

from __future__ import annotations

from dataclasses import dataclass

from delivery_pipeline.model import Kind
from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.intake import (
    NewPersonInput,
    add_person,
    new_person,
    request_document,
)
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import Person

NO_QUIET_HOURS = "00:00-00:00"


@dataclass(frozen=True)
class DemoPerson:
    phone: str
    name: str
    locale: str
    time_zone: str
    brief_local_time: str
    # Their documents outside the window: None (up's choice: the knock, which the
    # tour answers), or 'file' (one PDF on a document template, no reply needed).
    outside_window: str | None = None
    brief_opt_in: bool = True

    def new(self, whatsapp: WhatsAppSettings | None) -> NewPersonInput:
        """The demo person to add, with no quiet hours of their own."""
        return new_person(
            phone=self.phone,
            name=self.name,
            locale=self.locale,
            time_zone=self.time_zone,
            brief_opt_in=self.brief_opt_in,
            brief_local_time=self.brief_local_time,
            quiet_hours=NO_QUIET_HOURS,
            whatsapp=whatsapp,
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
        outside_window="file",
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
                person = add_person(conn, demo.new(whatsapp))
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
            people.append(person)
    return people
