"""Who an inbound webhook is from, and the platform's word that it changed.

Since 2026 a message carries the person's business-scoped user id
(``from_user_id``; ``contacts[].user_id``) beside their number (``from``;
``contacts[].wa_id``), and a person who uses a username may come with the
BSUID alone. A person is found by either, whichever the message carries (the
number first: it is what most people were added by). What a message teaches
us (a BSUID for a person we knew by number, a number for one we knew by
BSUID, a new BSUID after a number change) is written to the person row and
logged in ``person_identity_changes``; nothing is ever copied or merged.

``user_changed_number`` (a ``system`` message) moves the person to the new
number; ``user_changed_user_id`` and the ``user_id_update`` webhook move
their BSUID. Their documents, chunks and messages keep the person id and the
address each was sent to or from: history is not rewritten.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection

from delivery_pipeline.model import bsuid, e164
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import Person
from delivery_pipeline.whatsapp.webhook_bodies import dicts, text_or_none

log = logging.getLogger(__name__)

# "User Sheena Nelson changed from US.101… to US.134…": the old BSUID of a
# user_changed_user_id, which carries only the new one as a field.
_CHANGED_FROM = re.compile(r"\bfrom ([A-Z]{2}\.[A-Za-z0-9]{1,128}) to\b")


@asynccontextmanager
async def _savepoint(conn: AsyncConnection[Any], person_id: int | None) -> AsyncIterator[None]:
    """An identity write in its own savepoint: when another person's row took the
    same number or BSUID at the same moment (the unique index says so), the
    write is skipped and logged, and the message it came with is still stored."""
    try:
        async with conn.transaction():
            yield
    except psycopg.errors.UniqueViolation:
        log.warning(
            "an identifier of person %s was taken by another person meanwhile: left alone",
            person_id,
        )


@dataclass(frozen=True)
class Sender:
    """The identifiers a message carries, each None when absent or malformed."""

    phone: str | None
    user_id: str | None
    username: str | None

    @property
    def known(self) -> bool:
        return self.phone is not None or self.user_id is not None


def _phone(wa_id: Any) -> str | None:
    digits = text_or_none(wa_id)
    return e164(f"+{digits}") if digits and digits.isdigit() else None


def _bsuid(value: Any) -> str | None:
    text = text_or_none(value)
    return bsuid(text) if text else None


def sender_of(message: dict[str, Any], contacts: list[Any]) -> Sender:
    """The message's own fields first; its contact (the one with its number, or
    the only one) for what the message lacks."""
    phone = _phone(message.get("from"))
    user_id = _bsuid(message.get("from_user_id"))
    people = dicts(contacts)
    contact = next(
        (c for c in people if phone and _phone(c.get("wa_id")) == phone),
        people[0] if len(people) == 1 else None,
    )
    username = None
    if contact is not None:
        phone = phone or _phone(contact.get("wa_id"))
        user_id = user_id or _bsuid(contact.get("user_id"))
        profile = contact.get("profile")
        if isinstance(profile, dict):
            username = text_or_none(profile.get("username"))
            username = username[:100] if username else None
    return Sender(phone, user_id, username)


async def find_sender(conn: AsyncConnection[Any], sender: Sender) -> Person | None:
    if not sender.known:
        return None
    return await QUERIES.person_by_identity.one(
        conn, {"phone": sender.phone, "user_id": sender.user_id}
    )


async def learn(conn: AsyncConnection[Any], person: Person, sender: Sender, wamid: str) -> None:
    """Write down what the message told us about the person (nothing if nothing new)."""
    if (
        (sender.phone is None or sender.phone == person.phone)
        and (sender.user_id is None or sender.user_id == person.user_id)
        and (sender.username is None or sender.username == person.username)
    ):
        return
    async with _savepoint(conn, person.id):
        await QUERIES.learn_identity.one(
            conn,
            {
                "person_id": person.id,
                "phone": sender.phone,
                "user_id": sender.user_id,
                "username": sender.username,
                "wa_message_id": wamid,
            },
        )


async def apply_system(
    conn: AsyncConnection[Any],
    person: Person | None,
    message: dict[str, Any],
    sender: Sender,
    wamid: str,
) -> str | None:
    """A ``system`` message about the person's identity; what it changed, if anything."""
    system = message.get("system")
    if not isinstance(system, dict):
        return None
    change = text_or_none(system.get("type"))
    if change == "user_changed_number":
        new_phone = _phone(system.get("new_wa_id"))
        if person is None or new_phone is None:
            return None
        moved = None
        async with _savepoint(conn, person.id):
            moved = await QUERIES.change_number.one(
                conn,
                {
                    "person_id": person.id,
                    "new_phone": new_phone,
                    "cause": change,
                    "wa_message_id": wamid,
                },
            )
        if moved is None and person.phone != new_phone:
            log.warning(
                "person %s changed number, but the new one is another person's: left alone",
                person.id,
            )
        return "number" if moved is not None else None
    if change == "user_changed_user_id":
        new_user_id = _bsuid(system.get("user_id"))
        body = text_or_none(system.get("body")) or ""
        found = _CHANGED_FROM.search(body)
        old_user_id = sender.user_id or (found.group(1) if found else None)
        if new_user_id is None or (old_user_id is None and sender.phone is None):
            return None
        return await move_user_id(conn, old_user_id, sender.phone, new_user_id, change, wamid)
    return None


async def move_user_id(
    conn: AsyncConnection[Any],
    old_user_id: str | None,
    phone: str | None,
    new_user_id: str,
    cause: str,
    wamid: str | None,
) -> str | None:
    moved = None
    async with _savepoint(conn, None):
        moved = await QUERIES.change_user_id.one(
            conn,
            {
                "old_user_id": old_user_id,
                "phone": phone,
                "new_user_id": new_user_id,
                "cause": cause,
                "wa_message_id": wamid,
            },
        )
    return "user_id" if moved is not None else None


async def apply_user_id_update(conn: AsyncConnection[Any], update: dict[str, Any]) -> bool:
    """One ``user_id_update`` entry: ``user_id: {previous, current}`` for ``wa_id``."""
    ids = update.get("user_id")
    if not isinstance(ids, dict):
        return False
    new_user_id = _bsuid(ids.get("current"))
    old_user_id = _bsuid(ids.get("previous"))
    phone = _phone(update.get("wa_id"))
    if new_user_id is None or (old_user_id is None and phone is None):
        return False
    return (
        await move_user_id(conn, old_user_id, phone, new_user_id, "user_id_update", None)
        is not None
    )
