"""Parameters and rows of ``sql/queries/webhooks.sql``: the webhook service's inbound
messages, statuses and raw bodies."""

import datetime as dt
from typing import Any, NamedTuple, TypedDict

from psycopg.types.json import Jsonb

from delivery_pipeline.model import ChunkState
from delivery_pipeline.store.rows.common import ByDocument, ChunkRef


class ChunkOwner(NamedTuple):
    """A chunk as a status webhook finds it, with its document's person."""

    document_id: int
    chunk_index: int
    state: ChunkState
    callback_data: str
    person_id: int
    delivery_attempts: int  # the document's attempts counted so far
    phone_number_id: str | None  # the number it was sent from (sql/migrations/027)
    way: str | None  # its document's (sql/migrations/039): a file's failure is a file's
    file_template: str | None  # the document template of the file's latest send
    file_template_language: str | None


class NewInbound(TypedDict):
    wa_message_id: str
    person_id: int | None
    from_number: str | None
    from_user_id: str | None
    message_type: str
    body: str | None
    sent_at: dt.datetime
    unknown_sender: bool
    payload: Jsonb
    # sql/migrations/033: the business number written to (the change's metadata)
    to_phone_number_id: str | None


class StatusEvent(TypedDict):
    """One status as ``apply_statuses`` reads it (its ``jsonb_to_recordset`` columns)."""

    wa_message_id: str
    status: str
    occurred_at: str  # ISO 8601
    recipient_id: str | None
    callback_data: str | None
    document_id: int | None
    chunk_index: int | None
    error_code: int | None
    error_title: str | None
    payload: dict[str, Any]


class ApplyStatuses(TypedDict):
    events: Jsonb  # list[StatusEvent]


class AppliedStatus(NamedTuple):
    """A status stored now (message id and status), or a document whose chunk it settled."""

    wa_message_id: str | None
    status: str | None
    settled_document_id: int | None


class ByWaMessageId(TypedDict):
    wa_message_id: str


class ChunkRefused(ChunkRef):
    at: dt.datetime
    error_code: int | None


class UndeliverDocument(ByDocument):
    error: str
    delay_seconds: float
    attempt: int  # 1: the failure counts against DELIVERY_MAX_ATTEMPTS
    chunk_index: int  # the chunk that failed (others of its pass already failed: no count)


class AbandonDocument(ByDocument):
    reason: str
    error: str


class SettleKnock(ByDocument):
    wa_message_id: str


class RawWebhook(TypedDict):
    reason: str
    body: bytes


class KeptRaw(NamedTuple):
    """The raw body's row, stored now or counted again (a replay of the same bytes)."""

    id: int
    received_count: int
