"""The demo people ``up`` seeds on the embedded database: one per language and time zone."""

from __future__ import annotations

from dataclasses import dataclass

from delivery_pipeline.model import Kind
from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.intake import add_person, request_document
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import Person


@dataclass(frozen=True)
class DemoPerson:
    phone: str
    name: str
    locale: str
    time_zone: str
    brief_local_time: str


DEMO_PEOPLE = (
    DemoPerson("+5511900000001", "Ana Souza", "pt", "America/Sao_Paulo", "07:00"),
    DemoPerson("+5215500000002", "Lucía Gómez", "es", "America/Mexico_City", "07:30"),
    DemoPerson("+447700900003", "Sam Taylor", "en", "Europe/London", "08:00"),
)


def seed_demo(database_url: str, whatsapp: WhatsAppSettings | None = None) -> list[Person]:
    """Demo people (one per language and zone), each with a plan requested; idempotent."""
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
                    brief_opt_in=True,
                    brief_local_time=demo.brief_local_time,
                    whatsapp=whatsapp,
                )
                request_document(conn, person.id, Kind.PLAN)
            people.append(person)
    return people
