"""The ``pricing`` of each status, kept once per message (sql/migrations/023).

Per-message pricing (since 2025-07) puts ``pricing: {billable, pricing_model,
category, type}`` on a message's ``sent`` status, and the same object on its
``delivered``; whichever arrives first is kept (statuses are not ordered).
The callback tag says what the message was for (a chunk or the knock of a
document); the recipient says the country it is priced in.
"""

from __future__ import annotations

from typing import Any

from delivery_pipeline.delivery.callback import parse_chunk, parse_knock, parse_knock_id
from delivery_pipeline.model import bsuid, country_of, e164
from delivery_pipeline.store.rows.cost import PricingRecord
from delivery_pipeline.store.rows.webhooks import StatusEvent
from delivery_pipeline.whatsapp.webhook_bodies import text_or_none

_PRICED_STATUSES = {"sent", "delivered"}
_TEXT_MAX = 64


def _short(value: Any) -> str | None:
    text = text_or_none(value)
    return text[:_TEXT_MAX] if text else None


def pricing_record(event: StatusEvent) -> PricingRecord | None:
    """The message's pricing, if this status carries it."""
    status = event["payload"]
    pricing = status.get("pricing")
    if event["status"] not in _PRICED_STATUSES or not isinstance(pricing, dict):
        return None
    callback = event["callback_data"]
    chunk, knock = parse_chunk(callback), parse_knock(callback)
    knock_id = parse_knock_id(callback)
    recipient = text_or_none(status.get("recipient_id"))
    phone = e164(f"+{recipient}") if recipient and recipient.isdigit() else None
    user_id = text_or_none(status.get("recipient_user_id"))
    billable = pricing.get("billable")
    return {
        "wa_message_id": event["wa_message_id"],
        "document_id": chunk.document_id if chunk else knock,
        "knock_id": knock_id,
        "part": "chunk"
        if chunk
        else "knock"
        if knock is not None or knock_id is not None
        else "other",
        "chunk_index": chunk.chunk_index if chunk else None,
        "country": country_of(phone, bsuid(user_id) if user_id else None),
        "billable": billable if isinstance(billable, bool) else None,
        "category": _short(pricing.get("category")),
        "pricing_model": _short(pricing.get("pricing_model")),
        "pricing_type": _short(pricing.get("type")),
        "priced_at": event["occurred_at"],
    }


def pricing_records(events: list[StatusEvent]) -> list[PricingRecord]:
    return [record for event in events if (record := pricing_record(event)) is not None]
