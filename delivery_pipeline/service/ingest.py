"""Webhook payloads: verify, parse, and apply inbound messages and statuses.

Meta batches up to 1000 updates per POST, redelivers anything not answered
200 for days, and sends duplicates anyway; so every write here is idempotent
(inbound by message id, statuses by (message id, status)) and a state never
moves backwards.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from delivery_pipeline.store.db import QUERIES
from delivery_pipeline.watch.alerts import record_alert
from delivery_pipeline.whatsapp.errors import (
    CloudApiError,
    GlobalSendError,
    RecipientOptedOut,
    RecipientUnreachable,
    ReEngagementRequired,
    from_error_object,
)

log = logging.getLogger(__name__)

_CALLBACK = re.compile(r"^dp:(\d+):(\d+):(\d+)$")
_KNOCK_CALLBACK = re.compile(r"^dp:(\d+):knock$")
# Messages that are not the person writing to us: they open no window.
_NOT_FROM_THE_PERSON = {"system", "ephemeral"}
ASYNC_TRANSIENT_RETRY_SECONDS = 60.0
ECOSYSTEM_RETRY_SECONDS = 24 * 3600.0


def signature_valid(secret: str, body: bytes, header: str) -> bool:
    """``X-Hub-Signature-256: sha256=<hex>`` over the raw bytes, compared in constant time."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode())


def sign(secret: str, body: bytes) -> str:
    """The header value Meta would send for ``body`` (tests and the sandbox)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def parse_timestamp(raw: Any) -> dt.datetime:
    """Unix seconds as a string (a few arrive in milliseconds); now() if unreadable."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return dt.datetime.now(dt.UTC)
    if value > 1e11:
        value /= 1000.0
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return dt.datetime.now(dt.UTC)


@dataclass
class WebhookOutcome:
    """What one POST held and what it changed."""

    inbound_stored: int = 0
    inbound_duplicates: int = 0
    statuses_stored: int = 0
    status_duplicates: int = 0
    persons_to_sweep: set[int] = field(default_factory=set)
    documents_to_sweep: set[int] = field(default_factory=set)
    unhandled: list[str] = field(default_factory=list)


def iter_values(payload: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every ``entry[].changes[]`` as (field, value); malformed parts are skipped."""
    out: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(payload, dict):
        raise ValueError("payload is not a JSON object")
    entries = payload.get("entry")
    if not isinstance(entries, list):
        raise ValueError("payload has no entry list")
    for entry in entries:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        if not isinstance(changes, list):
            continue
        for change in changes:
            if isinstance(change, dict) and isinstance(change.get("value"), dict):
                out.append((str(change.get("field", "")), change["value"]))
    return out


async def apply_payload(conn: AsyncConnection, payload: Any) -> WebhookOutcome:
    """Store and apply every message and status in a parsed webhook body.

    Each inbound message is one transaction, and all the statuses of a change
    are one (one statement and one commit for a batch of up to 1000). A part
    that cannot be applied is rolled back alone and reported in ``unhandled``;
    the rest of the body still lands.
    """
    outcome = WebhookOutcome()
    for field_name, value in iter_values(payload):
        if field_name != "messages":
            outcome.unhandled.append(f"field:{field_name or '?'}")
            continue
        contacts = value.get("contacts") if isinstance(value.get("contacts"), list) else []
        for message in _dicts(value.get("messages")):
            await _isolated(_apply_inbound(conn, message, contacts, outcome), outcome)
        statuses = _dicts(value.get("statuses"))
        if statuses:
            await _isolated(_apply_statuses(conn, statuses, outcome), outcome)
        for error in _dicts(value.get("errors")):
            outcome.unhandled.append(f"errors:{error.get('code')}")
            log.warning("webhook carried a platform error: %s", from_error_object(error))
    return outcome


async def _isolated(step: Any, outcome: WebhookOutcome) -> None:
    """Run one update; a data error in it is reported, not fatal to the batch.

    Connection and locking errors (deadlock, lost connection) still abort the
    whole body, so the caller can retry it or answer 503.
    """
    try:
        await step
    except psycopg.OperationalError:  # includes deadlocks and serialization failures
        raise
    except (
        psycopg.DataError,
        psycopg.IntegrityError,
        psycopg.ProgrammingError,
        ValueError,
        TypeError,
        KeyError,
    ) as exc:
        log.exception("one webhook update could not be applied")
        outcome.unhandled.append(f"failed:{type(exc).__name__}")


def _dicts(items: Any) -> list[dict[str, Any]]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


# ── inbound messages ────────────────────────────────────────────────────


def _message_body(message: dict[str, Any]) -> str | None:
    kind = message.get("type")
    part = message.get(kind) if isinstance(kind, str) else None
    if not isinstance(part, dict):
        return None
    if kind == "text":
        return _str(part.get("body"))
    if kind == "button":
        return _str(part.get("text"))
    if kind == "interactive":
        for key in ("button_reply", "list_reply"):
            if isinstance(part.get(key), dict):
                return _str(part[key].get("title"))
    if kind in ("image", "video", "document"):
        return _str(part.get("caption"))
    if kind == "reaction":
        return _str(part.get("emoji"))
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


async def _apply_inbound(
    conn: AsyncConnection, message: dict[str, Any], contacts: list[Any], outcome: WebhookOutcome
) -> None:
    wamid = _str(message.get("id"))
    if not wamid:
        outcome.unhandled.append("message-without-id")
        return
    sender = _str(message.get("from"))
    phone = f"+{sender}" if sender and sender.isdigit() else None
    sent_at = parse_timestamp(message.get("timestamp"))
    kind = _str(message.get("type")) or "unknown"
    async with conn.transaction():
        person = None
        if phone:
            cur = await conn.execute(QUERIES.person_by_phone, {"phone": phone})
            person = await cur.fetchone()
        cur = await conn.execute(
            QUERIES.insert_inbound,
            {
                "wa_message_id": wamid,
                "person_id": person["id"] if person else None,
                "from_number": phone,
                "from_user_id": _str(message.get("from_user_id")),
                "message_type": kind,
                "body": _message_body(message),
                "sent_at": sent_at,
                "unknown_sender": person is None,
                "payload": Jsonb({"message": message, "contacts": contacts}),
            },
        )
        if await cur.fetchone() is None:
            outcome.inbound_duplicates += 1
            return
        outcome.inbound_stored += 1
        if person is None:
            log.info("inbound %s from an unknown sender stored and flagged", wamid)
            return
        if kind in _NOT_FROM_THE_PERSON or message.get("group_id"):
            return
        # Same order as inbound.note_inbound: window first, then wake (see there).
        await conn.execute(
            QUERIES.raise_last_inbound, {"person_id": person["id"], "sent_at": sent_at}
        )
        await conn.execute(QUERIES.wake_awaiting_documents, {"person_id": person["id"]})
    outcome.persons_to_sweep.add(person["id"])


# ── statuses ────────────────────────────────────────────────────────────


async def _apply_statuses(
    conn: AsyncConnection, statuses: list[dict[str, Any]], outcome: WebhookOutcome
) -> None:
    """A batch of statuses: stored, settled and applied set-based; failures one by one."""
    events: list[dict[str, Any]] = []
    for status in statuses:
        wamid, state = _str(status.get("id")), _str(status.get("status"))
        if not wamid or not state:
            outcome.unhandled.append("status-without-id")
            continue
        errors = _dicts(status.get("errors"))
        error = from_error_object(errors[0]) if errors else None
        events.append(
            {
                "wa_message_id": wamid,
                "status": state,
                "occurred_at": parse_timestamp(status.get("timestamp")).isoformat(),
                "recipient_id": _str(status.get("recipient_id")),
                "callback_data": _str(status.get("biz_opaque_callback_data")),
                "error_code": error.code if error else None,
                "error_title": error.message[:500] if error else None,
                "payload": status,
            }
        )
    if not events:
        return
    async with conn.transaction():
        cur = await conn.execute(QUERIES.apply_statuses, {"events": Jsonb(events)})
        rows = await cur.fetchall()
        stored = {(r["wa_message_id"], r["status"]) for r in rows if r["wa_message_id"]}
        settled = sorted({r["settled_document_id"] for r in rows if r["settled_document_id"]})
        outcome.statuses_stored += len(stored)
        outcome.status_duplicates += len(events) - len(stored)
        if settled:
            await conn.execute(QUERIES.resume_documents, {"document_ids": settled})
            outcome.documents_to_sweep.update(settled)
        fresh = [e for e in events if (e["wa_message_id"], e["status"]) in stored]
        for event in fresh:
            wamid, callback = event["wa_message_id"], event["callback_data"]
            if event["status"] == "failed":
                chunk = await _find_chunk(conn, wamid, callback)
                if chunk is not None:
                    errors = _dicts(event["payload"].get("errors"))
                    error = from_error_object(errors[0]) if errors else None
                    key = {
                        "document_id": chunk["document_id"],
                        "chunk_index": chunk["chunk_index"],
                        "at": parse_timestamp(event["payload"].get("timestamp")),
                    }
                    await _apply_failure(conn, chunk, key, error, outcome)
            elif callback and _KNOCK_CALLBACK.match(callback):
                await _maybe_settle_knock(conn, wamid, callback)


async def _find_chunk(
    conn: AsyncConnection, wamid: str, callback: str | None
) -> dict[str, Any] | None:
    cur = await conn.execute(QUERIES.chunk_by_wamid, {"wa_message_id": wamid})
    row = await cur.fetchone()
    if row is not None or not callback:
        return row
    match = _CALLBACK.match(callback)
    if not match:
        return None
    cur = await conn.execute(
        QUERIES.chunk_by_callback,
        {
            "document_id": int(match.group(1)),
            "chunk_index": int(match.group(2)),
            "callback_data": callback,
        },
    )
    return await cur.fetchone()


async def _maybe_settle_knock(conn: AsyncConnection, wamid: str, callback: str | None) -> None:
    match = _KNOCK_CALLBACK.match(callback or "")
    if match:
        await conn.execute(
            QUERIES.settle_knock, {"document_id": int(match.group(1)), "wa_message_id": wamid}
        )


async def _apply_failure(
    conn: AsyncConnection,
    chunk: dict[str, Any],
    key: dict[str, Any],
    error: CloudApiError | None,
    outcome: WebhookOutcome,
) -> None:
    """Accepted, then failed: the chunk never arrived; the error's class decides the rest."""
    refused = await conn.execute(
        QUERIES.chunk_refused,
        {
            **key,
            "callback_data": chunk["callback_data"],
            "error_code": error.code if error else None,
        },
    )
    if await refused.fetchone() is None:
        return  # an old attempt, or already delivered/read: nothing to undo
    document_id, person_id = chunk["document_id"], chunk["person_id"]
    reason = str(error) if error else "failed status without an error"
    if isinstance(error, ReEngagementRequired):
        await conn.execute(QUERIES.refuse_window, {"person_id": person_id, "at": key["at"]})
        await conn.execute(
            QUERIES.undeliver_document,
            {"document_id": document_id, "error": reason, "delay_seconds": 0},
        )
        outcome.documents_to_sweep.add(document_id)
        return
    if isinstance(error, RecipientUnreachable):
        if isinstance(error, RecipientOptedOut):
            await conn.execute(QUERIES.person_opted_out, {"person_id": person_id})
        await conn.execute(
            QUERIES.abandon_document_async,
            {"document_id": document_id, "reason": error.abandon_reason, "error": reason},
        )
        await record_alert(
            conn,
            f"recipient:{person_id}",
            "warning",
            f"Person {person_id} cannot receive WhatsApp messages ({reason}); "
            f"document {document_id} abandoned.",
            {"document_id": document_id, "person_id": person_id, "code": error.code},
        )
        return
    if isinstance(error, GlobalSendError):
        await conn.execute(QUERIES.pause_sender, {"code": error.code, "reason": reason})
        await record_alert(
            conn,
            f"sender_paused:{error.code}",
            "error",
            f"Sending paused: a status reported a global error ({reason}).",
            {"code": error.code, "document_id": document_id},
        )
    delay = (
        ECOSYSTEM_RETRY_SECONDS
        if error is not None and error.code == 131049
        else (ASYNC_TRANSIENT_RETRY_SECONDS)
    )
    await conn.execute(
        QUERIES.undeliver_document,
        {"document_id": document_id, "error": reason, "delay_seconds": delay},
    )
