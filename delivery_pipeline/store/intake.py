"""People and documents as operators add them: the CLI and the Dagster jobs alike.

Every check of operator input lives here once (E.164 numbers, locales, time
zones, kinds, one brief per person and day), so a bad value gets the same
answer however it arrived, and nothing is written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

import psycopg

from delivery_pipeline.model import Kind, Locale, bsuid, e164
from delivery_pipeline.settings import QUIET_HOURS, WhatsAppSettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import Document, Person

Conn = psycopg.Connection[Any]


class InputError(ValueError):
    """Operator input that cannot be honoured; nothing was written."""


def parse_phone(value: str) -> str:
    number = e164(value)
    if number is None:
        raise InputError(f"{value!r} is not an E.164 number (like +5511987654321)")
    return number


def parse_user_id(value: str) -> str:
    scoped = bsuid(value)
    if scoped is None:
        raise InputError(
            f"{value!r} is not a business-scoped user id (a country code, a period, letters "
            "and digits, like US.13491208655302741918)"
        )
    return scoped


def parse_kind(value: str) -> Kind:
    try:
        return Kind(value)
    except ValueError:
        raise InputError(f"kind must be one of {', '.join(Kind)}, got {value!r}") from None


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


def add_person(
    conn: Conn,
    *,
    phone: str | None,
    user_id: str | None = None,
    name: str = "",
    locale: str = Locale.EN,
    time_zone: str = "UTC",
    brief_opt_in: bool = False,
    brief_local_time: str = "07:00",
    quiet_hours: str | None = None,
    whatsapp: WhatsAppSettings | None = None,
    phone_number_id: str | None = None,
) -> Person:
    """Add a person, bound to business number ``phone_number_id`` (one of
    ``whatsapp``'s), else to the
    number the calling-code rule gives their phone (WHATSAPP_NUMBERS); bound to the
    default number, the row says none (NULL), so it follows WHATSAPP_PHONE_NUMBER_ID."""
    if phone is None and user_id is None:
        raise InputError("give the person's --phone, their --user-id (BSUID), or both")
    number = parse_phone(phone) if phone is not None else None
    scoped = parse_user_id(user_id) if user_id is not None else None
    if quiet_hours is not None and not QUIET_HOURS.match(quiet_hours):
        raise InputError(
            f"quiet hours {quiet_hours!r} are not local HH:MM-HH:MM (like 22:00-07:30; "
            "00:00-00:00 for none)"
        )
    bound = _bound_number(whatsapp, phone_number_id, phone)
    if locale not in frozenset(Locale):
        raise InputError(f"locale must be one of {', '.join(Locale)}, got {locale!r}")
    try:
        brief_time = dt.time.fromisoformat(brief_local_time)
    except ValueError:
        raise InputError(f"brief time {brief_local_time!r} is not HH:MM") from None
    if not QUERIES.time_zone_is_valid.one(conn, {"time_zone": time_zone}):
        raise InputError(
            f"time zone {time_zone!r} is not an IANA time zone name: use one like "
            "America/Sao_Paulo, Europe/Lisbon or UTC (a fixed offset is Etc/GMT-3 for UTC+3)"
        )
    if number is not None and QUERIES.person_by_phone.one(conn, {"phone": number}):
        raise InputError(f"a person with number {number} already exists")
    if scoped is not None and QUERIES.person_by_user_id.one(conn, {"user_id": scoped}):
        raise InputError(f"a person with user id {scoped} already exists")
    person = QUERIES.insert_person.one(
        conn,
        {
            "phone": number,
            "name": name,
            "locale": locale,
            "time_zone": time_zone,
            "brief_opt_in": brief_opt_in,
            "brief_local_time": brief_time,
            "phone_number_id": bound,
        },
    )
    assert person is not None
    if scoped is not None:
        person = QUERIES.set_person_user_id.one(conn, {"person_id": person.id, "user_id": scoped})
        assert person is not None
    if quiet_hours is not None:
        person = QUERIES.set_quiet_hours.one(
            conn, {"person_id": person.id, "quiet_hours": quiet_hours}
        )
        assert person is not None
    return person


def _bound_number(
    whatsapp: WhatsAppSettings | None, number: str | None, phone: str | None
) -> str | None:
    """The number a new person is bound to; None: the default number."""
    if whatsapp is None:
        if number is not None:
            raise InputError("no business numbers configured to bind the person to")
        return None
    if number is not None:
        if whatsapp.business_number(number) is None:
            known = ", ".join(n.id for n in whatsapp.business_numbers)
            raise InputError(
                f"business number {number} is not configured (WHATSAPP_PHONE_NUMBER_ID, "
                f"WHATSAPP_NUMBERS): one of {known}"
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
        raise InputError(f"person {row.id} already has a brief for {for_date}")
    return doc


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
    if not body.strip():
        raise InputError("the document body is empty")
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
        raise InputError(f"person {row.id} already has a brief for {for_date}") from None
    assert doc is not None
    return doc
