"""The people an application knows, by its own key (``api_people``, sql/migrations/036).

An application names a person by our id, their number, their BSUID or its own
user key, as it has them. A hand-over finds the person by whichever it gives
(all that it gives must name the same person), and adds one it gives a number
or a BSUID for that nobody has yet, with the defaults (``intake.new_person``:
the checks an operator's ``people add`` passes). From then on the application
knows the person: under its key when it gave one, and ``person.opted_out``
goes to every application that knows them.

``PUT /v1/people/{key}`` creates or changes the person an application's key
names: the values given replace the stored ones, the rest stay (a new person
starts from the defaults). A number, a user id or a business number, once a
person has one, is not changed here: a number moves when WhatsApp says so
(``user_changed_number``), and a person's business number is chosen once, since
their conversation and window live on it (docs/design/numbers.md).

Every change is inside the caller's transaction, under a lock on the key, so
two requests about one key never both add a person.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import e164
from delivery_pipeline.settings import WhatsAppSettings
from delivery_pipeline.store.intake import (
    InputError,
    NewPersonInput,
    add_person_async,
    check_locale,
    check_quiet_hours,
    new_person,
    parse_brief_time,
    parse_phone,
    parse_user_id,
    unknown_time_zone,
)
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import Person

AsyncConn = psycopg.AsyncConnection[Any]


class PersonConflict(InputError):
    """What the application says of a person contradicts what is known (another
    person's number, a key the person is not known by); nothing was written."""


@dataclass(frozen=True)
class PersonRef:
    """How an application names a person: any of these, all naming the same one."""

    id: int | None = None
    phone: str | None = None
    user_id: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class PersonValues:
    """What an application says of a person; None: not said (the stored value stays)."""

    phone: str | None = None
    user_id: str | None = None
    name: str | None = None
    locale: str | None = None
    time_zone: str | None = None
    brief_opt_in: bool | None = None
    brief_local_time: str | None = None
    quiet_hours_given: bool = False
    quiet_hours: str | None = None  # None with quiet_hours_given: the deployment's default
    number: str | None = None  # the business number (its phone number id)


@dataclass(frozen=True)
class KnownPerson:
    person: Person
    key: str | None
    created: bool


async def resolve(
    conn: AsyncConn, application: str, ref: PersonRef, whatsapp: WhatsAppSettings
) -> KnownPerson:
    """The person a hand-over is for: found, or added with the defaults when the
    application gives a number or a BSUID nobody has; known to the application from now on."""
    person = await _find(conn, application, ref)
    created = person is None
    if person is None:
        if ref.phone is None and ref.user_id is None:
            missing = f"no person {ref.id}" if ref.id is not None else f"no person {ref.key!r}"
            raise InputError(
                f"{missing}: give the person's phone or user_id (a new person is added), "
                "or PUT /v1/people/{key} first",
                "id" if ref.id is not None else "key",
            )
        new = new_person(phone=ref.phone, user_id=ref.user_id, whatsapp=whatsapp)
        person = await _add(conn, ref, lambda: add_person_async(conn, new))
    key = await _link(conn, application, person.id, ref.key)
    return KnownPerson(person, key, created)


async def put_person(
    conn: AsyncConn,
    application: str,
    key: str,
    values: PersonValues,
    whatsapp: WhatsAppSettings,
) -> KnownPerson:
    """Create or change the person ``key`` names for ``application``."""
    async with conn.transaction():
        await QUERIES.api_person_lock.run(conn, {"application": application, "user_key": key})
        person = await QUERIES.api_person_by_key.one(
            conn, {"application": application, "user_key": key}
        )
        if person is None:
            ref = PersonRef(phone=values.phone, user_id=values.user_id)
            person = await _find(conn, application, ref)
        if person is None:
            if values.phone is None and values.user_id is None:
                raise InputError(
                    f"no person {key!r} yet: give their phone or user_id to add them", "phone"
                )
            new = _new(values, whatsapp)
            ref = PersonRef(phone=values.phone, user_id=values.user_id, key=key)
            person = await _add(conn, ref, lambda: add_person_async(conn, new))
            await _link(conn, application, person.id, key)
            return KnownPerson(person, key, created=True)
        await _link(conn, application, person.id, key)
        return KnownPerson(await _update(conn, person, values, whatsapp), key, created=False)


async def person_by_key(conn: AsyncConn, application: str, key: str) -> Person | None:
    """The person ``application`` knows by ``key``."""
    return await QUERIES.api_person_by_key.one(conn, {"application": application, "user_key": key})


def _new(values: PersonValues, whatsapp: WhatsAppSettings) -> NewPersonInput:
    """A new person from what the application says (``new_person`` has the defaults)."""
    return new_person(
        phone=values.phone,
        user_id=values.user_id,
        name=values.name,
        locale=values.locale,
        time_zone=values.time_zone,
        brief_opt_in=values.brief_opt_in,
        brief_local_time=values.brief_local_time,
        quiet_hours=values.quiet_hours,
        whatsapp=whatsapp,
        phone_number_id=values.number,
    )


async def _update(
    conn: AsyncConn, person: Person, values: PersonValues, whatsapp: WhatsAppSettings
) -> Person:
    phone = parse_phone(values.phone) if values.phone is not None else None
    user_id = parse_user_id(values.user_id) if values.user_id is not None else None
    await _same_identity(conn, person, phone, user_id)
    if values.locale is not None:
        check_locale(values.locale)
    if values.quiet_hours_given:
        check_quiet_hours(values.quiet_hours)
    brief_time = (
        parse_brief_time(values.brief_local_time) if values.brief_local_time is not None else None
    )
    if values.time_zone is not None and not await QUERIES.time_zone_is_valid.one(
        conn, {"time_zone": values.time_zone}
    ):
        raise unknown_time_zone(values.time_zone)
    bound = person.phone_number_id or whatsapp.phone_number_id
    if values.number is not None and values.number != bound:
        raise PersonConflict(
            f"person {person.id} sends and hears on business number {bound}: a person's "
            "business number is chosen once (their conversation and window live on it)",
            "number",
        )
    updated = await QUERIES.api_update_person.one(
        conn,
        {
            "person_id": person.id,
            "name": values.name,
            "locale": values.locale,
            "time_zone": values.time_zone,
            "brief_opt_in": values.brief_opt_in,
            "brief_local_time": brief_time,
            "quiet_hours_given": values.quiet_hours_given,
            "quiet_hours": values.quiet_hours,
            "phone": phone,
            "user_id": user_id,
        },
    )
    assert updated is not None
    return updated


async def _same_identity(
    conn: AsyncConn, person: Person, phone: str | None, user_id: str | None
) -> None:
    """A number or user id given for a person who has one must be theirs; one they lack
    is learnt only when nobody else has it."""
    for field, given, theirs in (
        ("phone", phone, person.phone),
        ("user_id", user_id, person.user_id),
    ):
        if given is None or given == theirs:
            continue
        if theirs is not None:
            raise PersonConflict(
                f"person {person.id} has {field} {theirs}: it changes when WhatsApp says so, "
                "not here",
                field,
            )
        other = (
            await QUERIES.person_by_phone.one(conn, {"phone": given})
            if field == "phone"
            else await QUERIES.person_by_user_id.one(conn, {"user_id": given})
        )
        if other is not None:
            raise PersonConflict(f"{field} {given} is another person's ({other.id})", field)


async def _find(conn: AsyncConn, application: str, ref: PersonRef) -> Person | None:
    """The one person every identifier given names (None: none of them names anyone)."""
    found: list[tuple[str, Person | None]] = []
    if ref.key is not None:
        by_key = await QUERIES.api_person_by_key.one(
            conn, {"application": application, "user_key": ref.key}
        )
        found.append(("key", by_key))
    if ref.id is not None:
        by_id = await QUERIES.person_by_id.one(conn, {"id": ref.id})
        if by_id is None:
            raise InputError(f"no person {ref.id}", "id")
        found.append(("id", by_id))
    if ref.phone is not None:
        found.append(("phone", await QUERIES.person_by_phone.one(conn, {"phone": _phone(ref)})))
    if ref.user_id is not None:
        scoped = parse_user_id(ref.user_id)
        found.append(("user_id", await QUERIES.person_by_user_id.one(conn, {"user_id": scoped})))
    people = {person.id: person for _, person in found if person is not None}
    if len(people) > 1:
        named = ", ".join(f"{field} → person {p.id}" for field, p in found if p is not None)
        raise PersonConflict(f"the identifiers given name different people ({named})", found[-1][0])
    if not people:
        return None
    (person,) = people.values()
    for field, match in found:
        if match is None and field in ("phone", "user_id") and getattr(person, field) is not None:
            raise PersonConflict(
                f"person {person.id} has another {field} ({getattr(person, field)})", field
            )
    return person


def _phone(ref: PersonRef) -> str:
    assert ref.phone is not None
    number = e164(ref.phone)
    return number if number is not None else parse_phone(ref.phone)


async def _add(conn: AsyncConn, ref: PersonRef, add: Any) -> Person:
    """Add a person in a savepoint; one added meanwhile by another request under the same
    number or user id is found instead."""
    try:
        async with conn.transaction():
            person: Person = await add()
            return person
    except psycopg.errors.UniqueViolation:
        person_found = await _find(conn, "", dataclasses.replace(ref, key=None))
        if person_found is None:
            raise
        return person_found


async def _link(conn: AsyncConn, application: str, person_id: int, key: str | None) -> str | None:
    """The application knows the person (under ``key``, when given); returns the key."""
    try:
        async with conn.transaction():
            row = await QUERIES.api_link_person.one(
                conn, {"application": application, "person_id": person_id, "user_key": key}
            )
    except psycopg.errors.UniqueViolation:
        raise PersonConflict(f"key {key!r} names another person", "key") from None
    assert row is not None
    if key is not None and row.user_key != key:
        raise PersonConflict(
            f"person {person_id} is known to {application} as {row.user_key!r}, not {key!r}",
            "key",
        )
    return row.user_key
