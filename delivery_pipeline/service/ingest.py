"""Applying a signed webhook body: inbound messages and statuses.

Meta batches up to 1000 updates per POST, redelivers anything not answered
200 for days, and sends duplicates anyway; so every write here is idempotent
(inbound by message id, statuses by (message id, status)) and a state never
moves backwards. A ``failed`` status means what the same error on the send
call would: ``chunk_status`` and ``knock_status`` hand it to the one completer.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from delivery_pipeline.delivery.callback import parse_chunk, parse_knock, parse_knock_id
from delivery_pipeline.delivery.chunk_status import chunk_failed, find_chunk
from delivery_pipeline.delivery.inbound import answer_inbound
from delivery_pipeline.delivery.knock_status import find_knock, knock_failed, knock_status
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.delivery.template_events import apply_template_change
from delivery_pipeline.service.log_limit import RateLimitedLog
from delivery_pipeline.service.pricing import pricing_records
from delivery_pipeline.service.sender_identity import (
    apply_system,
    apply_user_id_update,
    find_sender,
    learn,
    sender_of,
)
from delivery_pipeline.settings import DeliverySettings, WhatsAppSettings
from delivery_pipeline.store.db import database_unavailable
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.webhooks import StatusEvent
from delivery_pipeline.whatsapp.errors import from_error_object
from delivery_pipeline.whatsapp.webhook_bodies import (
    dicts,
    iter_changes,
    message_body,
    parse_timestamp,
    text_or_none,
)
from delivery_pipeline.whatsapp.webhook_values import (
    TEMPLATE_FIELDS,
    InboundMessage,
    Unreadable,
    template_change,
)

log = logging.getLogger(__name__)
# Anyone can write to a business number: a flood of strangers is a few lines a minute
# and a count, per process (log_limit.py).
_strangers = RateLimitedLog(log)

# Messages that are not the person writing to us: they open no window.
_NOT_FROM_THE_PERSON = {"system", "ephemeral"}


@dataclass
class WebhookOutcome:
    """What one POST held and what it changed."""

    inbound_stored: int = 0
    inbound_duplicates: int = 0
    statuses_stored: int = 0
    status_duplicates: int = 0
    # What to sweep once the body is committed: people who wrote, documents due again.
    to_sweep: set[SweepTarget] = field(default_factory=set)
    # A failed status abandoned or un-delivered a document: an outbox row to record.
    documents_changed: bool = False
    unhandled: list[str] = field(default_factory=list)

    def absorb(self, part: WebhookOutcome) -> None:
        """Add what one committed part of the body did."""
        self.inbound_stored += part.inbound_stored
        self.inbound_duplicates += part.inbound_duplicates
        self.statuses_stored += part.statuses_stored
        self.status_duplicates += part.status_duplicates
        self.to_sweep |= part.to_sweep
        self.documents_changed |= part.documents_changed
        self.unhandled.extend(part.unhandled)


# Names from the body are quoted in reasons and log lines, never at length.
_NAME_MAX = 40
# A timestamp later than our clock allows (payloads.MAX_CLOCK_SKEW): taken as
# our now, and the body kept raw to show what it said.
_FUTURE = "timestamp-in-the-future"


@dataclass(frozen=True, slots=True)
class OurNumbers:
    """The business numbers we send from: a person's window is with the number they
    wrote to, and their documents go out from the number they are bound to."""

    default: str
    every: frozenset[str]

    @classmethod
    def of(cls, whatsapp: WhatsAppSettings) -> OurNumbers:
        return cls(whatsapp.phone_number_id, frozenset(n.id for n in whatsapp.business_numbers))

    def opens_their_window(self, bound: str | None, to: str | None) -> bool:
        """Does a message to the number ``to`` from a person bound to ``bound`` (None:
        the default number) open the window their documents are sent in? A body
        without a number, or naming one we do not send from, counts as to theirs:
        one number configured works as it always did."""
        if to is None or to not in self.every:
            return True
        return to == (bound or self.default)


async def apply_payload(
    conn: AsyncConnection[Any],
    payload: Any,
    settings: DeliverySettings,
    numbers: OurNumbers | None = None,
) -> WebhookOutcome:
    """Store and apply every message and status in a parsed webhook body.

    ``payload`` is what ``webhook_bodies.storable`` returned. Each inbound message
    is one transaction, and all the statuses of a change are one (one
    statement and one commit for a batch of up to 1000). A part that cannot
    be applied is rolled back alone and reported in ``unhandled``; the rest of
    the body still lands. ``UnusableBody``: nothing in it could be read.
    """
    outcome = WebhookOutcome()
    for field_name, value, entry_time in iter_changes(payload):
        if field_name in TEMPLATE_FIELDS:
            await _isolated(
                outcome, partial(_apply_template_change, conn, field_name, value, entry_time)
            )
            continue
        if field_name == "user_id_update":
            for update in dicts(value.get("user_id_update")):
                await _isolated(outcome, partial(_apply_user_id_update, conn, update))
            continue
        if field_name != "messages":
            outcome.unhandled.append(f"field:{field_name[:_NAME_MAX] or '?'}")
            continue
        raw_contacts = value.get("contacts")
        contacts: list[Any] = raw_contacts if isinstance(raw_contacts, list) else []
        metadata = value.get("metadata")
        to = text_or_none(metadata.get("phone_number_id")) if isinstance(metadata, dict) else None
        inbound = _Inbound(contacts, to, numbers, settings)
        for message in dicts(value.get("messages")):
            await _isolated(outcome, partial(_apply_inbound, conn, message, inbound))
        statuses = dicts(value.get("statuses"))
        if statuses:
            await _apply_status_batch(conn, statuses, settings, outcome)
        for error in dicts(value.get("errors")):
            outcome.unhandled.append(f"platform-error:{from_error_object(error).code}")
    return outcome


def _unstorable(exc: Exception) -> bool:
    """The update's data does not fit the database (a value out of range, an id
    longer than an index entry may be): expected of hostile input, not a bug."""
    return isinstance(
        exc,
        psycopg.DataError | psycopg.IntegrityError | psycopg.errors.ProgramLimitExceeded,
    ) or isinstance(exc, UnicodeError)


async def _isolated(
    outcome: WebhookOutcome, apply: Callable[[WebhookOutcome], Awaitable[None]]
) -> bool:
    """Apply one part of a body; what it did counts only once it committed.

    A part whose data does not fit is reported in ``unhandled`` and costs only
    itself; any other error is our bug (logged with its traceback) and costs
    only itself too. The database being unavailable (or a deadlock) aborts
    the whole body, so the caller can apply it again or answer 503.
    """
    part = WebhookOutcome()
    try:
        await apply(part)
    except Exception as exc:
        if database_unavailable(exc):
            raise
        if _unstorable(exc):
            outcome.unhandled.append(f"failed:{type(exc).__name__}")
        else:
            log.exception("a webhook update could not be applied (a bug); the body is kept raw")
            outcome.unhandled.append(f"internal:{type(exc).__name__}")
        return False
    outcome.absorb(part)
    return True


# ── inbound messages ────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class _Inbound:
    """What a change's messages share: its contacts and the business number written to."""

    contacts: list[Any]
    to: str | None
    numbers: OurNumbers | None
    settings: DeliverySettings


async def _apply_inbound(
    conn: AsyncConnection[Any],
    message: dict[str, Any],
    inbound: _Inbound,
    outcome: WebhookOutcome,
) -> None:
    contacts, settings = inbound.contacts, inbound.settings
    wamid = text_or_none(message.get("id"))
    if not wamid:
        outcome.unhandled.append("message-without-id")
        return
    sender = sender_of(message, contacts)
    sent = parse_timestamp(message.get("timestamp"))
    if sent.from_the_future:
        outcome.unhandled.append(_FUTURE)
    sent_at = sent.at
    kind = text_or_none(message.get("type")) or "unknown"
    async with conn.transaction():
        person = await find_sender(conn, sender)
        stored = await QUERIES.insert_inbound.one(
            conn,
            {
                "wa_message_id": wamid,
                "person_id": person.id if person else None,
                "from_number": sender.phone,
                "from_user_id": sender.user_id or text_or_none(message.get("from_user_id")),
                "message_type": kind,
                "body": message_body(message),
                "sent_at": sent_at,
                "unknown_sender": person is None,
                "to_phone_number_id": inbound.to,
                "payload": Jsonb({"message": message, "contacts": contacts}),
            },
        )
        if stored is None:
            outcome.inbound_duplicates += 1
            return
        outcome.inbound_stored += 1
        if kind == "system":
            await apply_system(conn, person, message, sender, wamid)
        elif person is not None:
            await learn(conn, person, sender, wamid)
        if person is None:
            _strangers.log(
                logging.INFO,
                "unknown-sender",
                "inbound %s from an unknown sender stored and flagged",
                "".join(c if c.isprintable() else " " for c in wamid[:80]),
            )
            return
        if kind in _NOT_FROM_THE_PERSON or message.get("group_id"):
            return
        to_theirs = inbound.numbers is None or inbound.numbers.opens_their_window(
            person.phone_number_id, inbound.to
        )
        if not to_theirs:
            log.info(
                "inbound %.80s from person %s went to number %s, not theirs: no window opens",
                wamid,
                person.id,
                inbound.to,
            )
        # A reply to a knock may ask for something (reply.py): Later, Stop, Start.
        target = await answer_inbound(
            conn,
            person.id,
            wamid,
            InboundMessage.of(message),
            sent_at,
            later_seconds=settings.later_seconds,
            quiet_hours=settings.quiet_hours or None,
            to_their_number=to_theirs,
        )
    if target is not None:
        outcome.to_sweep.add(target)


async def _apply_user_id_update(
    conn: AsyncConnection[Any], update: dict[str, Any], outcome: WebhookOutcome
) -> None:
    async with conn.transaction():
        if not await apply_user_id_update(conn, update):
            outcome.unhandled.append("user-id-update-unmatched")


# ── statuses ────────────────────────────────────────────────────────────


async def _apply_status_batch(
    conn: AsyncConnection[Any],
    statuses: list[dict[str, Any]],
    settings: DeliverySettings,
    outcome: WebhookOutcome,
) -> None:
    """A change's statuses in one statement; if the database refuses one of them,
    one statement each, so that one costs only itself."""
    events = [event for status in statuses if (event := _status_event(status, outcome))]
    if not events:
        return
    batch = WebhookOutcome()
    applied = await _isolated(batch, partial(_apply_statuses, conn, events, settings))
    if applied or len(events) == 1:
        outcome.absorb(batch)
        return
    for event in events:
        await _isolated(outcome, partial(_apply_statuses, conn, [event], settings))


def _status_event(status: dict[str, Any], outcome: WebhookOutcome) -> StatusEvent | None:
    wamid, state = text_or_none(status.get("id")), text_or_none(status.get("status"))
    if not wamid or not state:
        outcome.unhandled.append("status-without-id")
        return None
    errors = dicts(status.get("errors"))
    error = from_error_object(errors[0]) if errors else None
    callback = text_or_none(status.get("biz_opaque_callback_data"))
    tag = parse_chunk(callback)
    occurred = parse_timestamp(status.get("timestamp"))
    if occurred.from_the_future:
        outcome.unhandled.append(_FUTURE)
    return {
        "wa_message_id": wamid,
        "status": state,
        "occurred_at": occurred.at.isoformat(),
        "recipient_id": text_or_none(status.get("recipient_id")),
        "callback_data": callback,
        "document_id": tag.document_id if tag else None,
        "chunk_index": tag.chunk_index if tag else None,
        "error_code": error.code if error else None,
        "error_title": error.message[:500] if error else None,
        "payload": status,
    }


async def _apply_statuses(
    conn: AsyncConnection[Any],
    events: list[StatusEvent],
    settings: DeliverySettings,
    outcome: WebhookOutcome,
) -> None:
    """A batch of statuses: stored, settled and applied set-based; failures one by one."""
    async with conn.transaction():
        rows = await QUERIES.apply_statuses.all(conn, {"events": Jsonb(events)})
        stored = {(r.wa_message_id, r.status) for r in rows if r.wa_message_id}
        settled = sorted({r.settled_document_id for r in rows if r.settled_document_id})
        outcome.statuses_stored += len(stored)
        outcome.status_duplicates += len(events) - len(stored)
        if settled:
            await QUERIES.resume_documents.run(conn, {"document_ids": settled})
            outcome.to_sweep |= SweepTarget.documents(settled)
        fresh = [e for e in events if (e["wa_message_id"], e["status"]) in stored]
        if priced := pricing_records(fresh):
            await QUERIES.record_pricing.run(conn, {"records": Jsonb(priced)})
        for event in fresh:
            wamid, callback = event["wa_message_id"], event["callback_data"]
            knock_id = parse_knock_id(callback)
            at = dt.datetime.fromisoformat(event["occurred_at"])
            if event["status"] == "failed":
                errors = dicts(event["payload"].get("errors"))
                error = from_error_object(errors[0]) if errors else None
                chunk = None if knock_id is not None else await find_chunk(conn, wamid, callback)
                due = None
                if chunk is not None:
                    due = await chunk_failed(conn, chunk, at, error, settings)
                elif (knock := await find_knock(conn, knock_id, wamid)) is not None:
                    due = await knock_failed(conn, knock, wamid, at, error, settings)
                if due is not None:
                    outcome.documents_changed = True
                    outcome.to_sweep |= SweepTarget.documents(due)
            elif knock_id is not None:
                knock = await find_knock(conn, knock_id, wamid)
                if knock is not None:
                    await knock_status(conn, knock, wamid, event["status"], at)
            elif (document_id := parse_knock(callback)) is not None:
                # A knock whose send answer was lost: remember its id.
                await QUERIES.settle_knock.run(
                    conn, {"document_id": document_id, "wa_message_id": wamid}
                )


# ── template lifecycle ──────────────────────────────────────────────────


async def _apply_template_change(
    conn: AsyncConnection[Any],
    field_name: str,
    value: dict[str, Any],
    entry_time: Any,
    outcome: WebhookOutcome,
) -> None:
    occurred = parse_timestamp(entry_time)
    if occurred.from_the_future:
        outcome.unhandled.append(_FUTURE)
    change = template_change(field_name, value)
    if isinstance(change, Unreadable):
        outcome.unhandled.append(change.problem)
        return
    async with conn.transaction():
        applied = await apply_template_change(conn, change, occurred.at)
    outcome.to_sweep |= applied.woken
