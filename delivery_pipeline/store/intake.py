"""People and documents as operators add them: the CLI and the Dagster jobs alike.

Every check of operator input lives here once (E.164 numbers, locales, time
zones, kinds, one brief per person and day), so a bad value gets the same
answer however it arrived, and nothing is written. The applications' API
(``store/handover.py``) adds people and documents through the same checks, on
an async connection: each error names the field it is about.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import Kind, Locale, bsuid, e164
from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.settings.parsing import QUIET_HOURS
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import Person
from delivery_pipeline.store.rows.core import Document, NewPerson

Conn = psycopg.Connection[Any]
AsyncConn = psycopg.AsyncConnection[Any]

# The longest text a person is handed as one document, however it arrives (the API, the
# CLI, a reviewer's edit): 16 messages at the platform's 4,096 characters.
BODY_MAX_CHARACTERS = 65_536


class InputError(ValueError):
    """Operator input that cannot be honoured; nothing was written. ``field`` names the
    value it is about (``phone``, ``time_zone``, …) when it is about one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def parse_phone(value: str) -> str:
    number = e164(value)
    if number is None:
        raise InputError(f"{value!r} is not an E.164 number (like +5511987654321)", "phone")
    return number


def parse_user_id(value: str) -> str:
    scoped = bsuid(value)
    if scoped is None:
        raise InputError(
            f"{value!r} is not a business-scoped user id (a country code, a period, letters "
            "and digits, like US.13491208655302741918)",
            "user_id",
        )
    return scoped


def parse_kind(value: str) -> Kind:
    try:
        return Kind(value)
    except ValueError:
        raise InputError(f"kind must be one of {', '.join(Kind)}, got {value!r}", "kind") from None


def find_person(conn: Conn, ref: str | int) -> Person:
    """A person by id or E.164 number."""
    text = str(ref).strip()
    if text.isdigit():
        person = QUERIES.person_by_id.one(conn, {"id": int(text)})
    elif (phone := e164(text)) is not None:
        person = QUERIES.person_by_phone.one(conn, {"phone": phone})
    elif (scoped := bsuid(text)) is not None:
        person = QUERIES.person_by_user_id.one(conn, {"user_id": scoped})
    else:
        raise InputError(f"{ref!r} is neither a person id, an E.164 number nor a user id")
    if person is None:
        raise InputError(f"no person {ref!r} (give an id or an E.164 number)")
    return person


@dataclass(frozen=True)
class NewPersonInput:
    """A person to add, checked (all but the time zone, which the database knows)."""

    values: NewPerson
    user_id: str | None
    quiet_hours: str | None


def new_person(
    *,
    phone: str | None,
    user_id: str | None = None,
    name: str | None = None,
    locale: str | None = None,
    time_zone: str | None = None,
    brief_opt_in: bool | None = None,
    brief_local_time: str | None = None,
    quiet_hours: str | None = None,
    whatsapp: WhatsAppSettings | None = None,
    phone_number_id: str | None = None,
) -> NewPersonInput:
    """Check a person to add, however they arrive (the CLI, a job, the applications' API);
    ``InputError`` names what is wrong, nothing is written. What is not said (None) is the
    default, here alone: no name, English, UTC, no daily brief (at 07:00 local once asked
    for), the deployment's quiet hours, the business number their calling code gives."""
    if phone is None and user_id is None:
        raise InputError("give the person's --phone, their --user-id (BSUID), or both", "phone")
    number = parse_phone(phone) if phone is not None else None
    scoped = parse_user_id(user_id) if user_id is not None else None
    check_quiet_hours(quiet_hours)
    bound = _bound_number(whatsapp, phone_number_id, phone)
    locale = Locale.EN if locale is None else locale
    check_locale(locale)
    values: NewPerson = {
        "phone": number,
        "name": "" if name is None else name,
        "locale": locale,
        "time_zone": "UTC" if time_zone is None else time_zone,
        "brief_opt_in": bool(brief_opt_in),
        "brief_local_time": parse_brief_time(
            "07:00" if brief_local_time is None else brief_local_time
        ),
        "phone_number_id": bound,
    }
    return NewPersonInput(values, scoped, quiet_hours)


def check_quiet_hours(quiet_hours: str | None) -> None:
    if quiet_hours is not None and not QUIET_HOURS.match(quiet_hours):
        raise InputError(
            f"quiet hours {quiet_hours!r} are not local HH:MM-HH:MM (like 22:00-07:30; "
            "00:00-00:00 for none)",
            "quiet_hours",
        )


def check_locale(locale: str) -> None:
    if locale not in frozenset(Locale):
        raise InputError(f"locale must be one of {', '.join(Locale)}, got {locale!r}", "locale")


def parse_brief_time(value: str) -> dt.time:
    try:
        return dt.time.fromisoformat(value)
    except ValueError:
        raise InputError(f"brief time {value!r} is not HH:MM", "brief_local_time") from None


def unknown_time_zone(time_zone: str) -> InputError:
    return InputError(
        f"time zone {time_zone!r} is not an IANA time zone name: use one like "
        "America/Sao_Paulo, Europe/Lisbon or UTC (a fixed offset is Etc/GMT-3 for UTC+3)",
        "time_zone",
    )


def add_person(conn: Conn, new: NewPersonInput) -> Person:
    """Add the person ``new_person`` checked; a number or user id another person has is an
    ``InputError`` naming it. Bound to the default number, the row says none (NULL), so
    it follows WHATSAPP_PHONE_NUMBER_ID."""
    time_zone = new.values["time_zone"]
    if not QUERIES.time_zone_is_valid.one(conn, {"time_zone": time_zone}):
        raise unknown_time_zone(time_zone)
    number, scoped = new.values["phone"], new.user_id
    if number is not None and QUERIES.person_by_phone.one(conn, {"phone": number}):
        raise InputError(f"a person with number {number} already exists", "phone")
    if scoped is not None and QUERIES.person_by_user_id.one(conn, {"user_id": scoped}):
        raise InputError(f"a person with user id {scoped} already exists", "user_id")
    person = QUERIES.insert_person.one(conn, new.values)
    assert person is not None
    if scoped is not None:
        person = QUERIES.set_person_user_id.one(conn, {"person_id": person.id, "user_id": scoped})
        assert person is not None
    if new.quiet_hours is not None:
        person = QUERIES.set_quiet_hours.one(
            conn, {"person_id": person.id, "quiet_hours": new.quiet_hours}
        )
        assert person is not None
    return person


async def add_person_async(conn: AsyncConn, new: NewPersonInput) -> Person:
    """``add_person`` on an async connection, for a person ``new_person`` checked (the
    applications' API). Inside the caller's transaction: a number or user id another
    person took meanwhile raises ``psycopg.errors.UniqueViolation``."""
    time_zone = new.values["time_zone"]
    if not await QUERIES.time_zone_is_valid.one(conn, {"time_zone": time_zone}):
        raise unknown_time_zone(time_zone)
    person = await QUERIES.insert_person.one(conn, new.values)
    assert person is not None
    if new.user_id is not None:
        person = await QUERIES.set_person_user_id.one(
            conn, {"person_id": person.id, "user_id": new.user_id}
        )
        assert person is not None
    if new.quiet_hours is not None:
        person = await QUERIES.set_quiet_hours.one(
            conn, {"person_id": person.id, "quiet_hours": new.quiet_hours}
        )
        assert person is not None
    return person


def _bound_number(
    whatsapp: WhatsAppSettings | None, number: str | None, phone: str | None
) -> str | None:
    """The number a new person is bound to; None: the default number."""
    if whatsapp is None:
        if number is not None:
            raise InputError("no business numbers configured to bind the person to", "number")
        return None
    if number is not None:
        if whatsapp.business_number(number) is None:
            known = ", ".join(n.id for n in whatsapp.business_numbers)
            raise InputError(
                f"business number {number} is not configured (WHATSAPP_PHONE_NUMBER_ID, "
                f"WHATSAPP_NUMBERS): one of {known}",
                "number",
            )
        bound = number
    else:
        bound = whatsapp.number_for(parse_phone(phone) if phone is not None else None)
    return None if bound == whatsapp.phone_number_id else bound


def _brief_date(conn: Conn, person: Person, for_date: dt.date | None) -> dt.date:
    """A brief's day: the one given, else the person's local today."""
    if for_date is not None:
        return for_date
    local_today = QUERIES.person_local_today.one(conn, {"person_id": person.id})
    assert local_today is not None
    return local_today


def request_document(
    conn: Conn,
    person: str | int,
    kind: str = Kind.PLAN,
    for_date: dt.date | None = None,
) -> Document:
    """A document to be generated (``pending``); a brief defaults to the person's local today."""
    document_kind = parse_kind(kind)
    row = find_person(conn, person)
    if document_kind == Kind.DAILY_BRIEF:
        for_date = _brief_date(conn, row, for_date)
    doc = QUERIES.insert_pending_document.one(
        conn, {"person_id": row.id, "kind": document_kind, "for_date": for_date}
    )
    if doc is None:
        raise InputError(f"person {row.id} already has a brief for {for_date}", "day")
    return doc


def check_body(body: str, what: str = "the document body") -> None:
    """``InputError`` (field ``body``) for a text no document may have: empty, or over
    ``BODY_MAX_CHARACTERS``."""
    if not body.strip():
        raise InputError(f"{what} is empty", "body")
    if len(body) > BODY_MAX_CHARACTERS:
        raise InputError(
            f"{what} is {len(body):,} characters, over the {BODY_MAX_CHARACTERS:,} a document "
            "may have",
            "body",
        )


def add_ready_document(
    conn: Conn,
    person: str | int,
    body: str,
    kind: str = Kind.PLAN,
    for_date: dt.date | None = None,
    review_kinds: Collection[str] = frozenset(),
) -> Document:
    """A document generated elsewhere, ready for delivery, or awaiting review when its kind
    is one of ``review_kinds`` (``DELIVERY_REVIEW_KINDS``); a brief defaults to local today."""
    document_kind = parse_kind(kind)
    check_body(body)
    row = find_person(conn, person)
    if document_kind == Kind.DAILY_BRIEF:
        for_date = _brief_date(conn, row, for_date)
    try:
        doc = QUERIES.insert_ready_document.one(
            conn,
            {
                "person_id": row.id,
                "kind": document_kind,
                "for_date": for_date,
                "body": body,
                "needs_review": document_kind in review_kinds,
            },
        )
    except psycopg.errors.UniqueViolation:
        raise InputError(f"person {row.id} already has a brief for {for_date}", "day") from None
    assert doc is not None
    return doc


async def add_document_async(
    conn: AsyncConn,
    person: Person,
    kind: Kind,
    body: str | None,
    for_date: dt.date | None = None,
    review_kinds: Collection[str] = frozenset(),
) -> Document:
    """``add_ready_document`` (a body) or ``request_document`` (None: to be generated) for
    a person already found, on an async connection inside the caller's transaction (the
    applications' API): the same checks, each error naming its field."""
    if body is not None:
        check_body(body)
    if kind == Kind.DAILY_BRIEF and for_date is None:
        for_date = await QUERIES.person_local_today.one(conn, {"person_id": person.id})
    if body is None:
        doc = await QUERIES.insert_pending_document.one(
            conn, {"person_id": person.id, "kind": kind, "for_date": for_date}
        )
    else:
        try:
            async with conn.transaction():  # a savepoint: the caller's transaction goes on
                doc = await QUERIES.insert_ready_document.one(
                    conn,
                    {
                        "person_id": person.id,
                        "kind": kind,
                        "for_date": for_date,
                        "body": body,
                        "needs_review": kind in review_kinds,
                    },
                )
        except psycopg.errors.UniqueViolation:
            doc = None
    if doc is None:
        raise InputError(f"person {person.id} already has a brief for {for_date}", "day")
    return doc
