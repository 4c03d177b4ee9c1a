"""Parameters and rows of ``sql/queries/replies.sql``: a person's reply to a knock (026)
and the answer to Later and Stop (038)."""

import datetime as dt
from typing import NamedTuple, TypedDict

from delivery_pipeline.store.rows.common import ByKnock, ByPerson

# ── a reply to a knock (026) ────────────────────────────────────────────────


class KnockAnswered(ByPerson):
    context_id: str | None


class KnockReply(TypedDict):
    inbound_message_id: str
    person_id: int
    knock_id: int | None
    action: str
    via: str
    at: dt.datetime
    snoozed_until: dt.datetime | None
    documents: int


class SnoozeDocuments(ByPerson):
    later_seconds: float | None
    quiet_hours: str | None


class NoReplyAfter(TypedDict):
    after_seconds: float


# ── the answer to Later and Stop (038) ──────────────────────────────────────


class KnockDeadline(ByKnock):
    ttl_seconds: float


class ExpireAfter(TypedDict):
    grace_seconds: float


class PartDeadline(TypedDict):
    document_id: int
    chunk_index: int
    ttl_seconds: float


class TakeReadMark(ByPerson):
    number: str | None
    fresh_seconds: float


class OweAcknowledgement(TypedDict):
    inbound_message_id: str
    to_their_number: bool
    fresh_seconds: float


class ClaimAcknowledgements(TypedDict):
    limit: int
    person_id: int | None
    number: str | None
    default_number: str


class AcknowledgementClaim(NamedTuple):
    """An answer to a press, taken to be sent (``claim_acknowledgements``)."""

    reply_id: int
    phone_number_id: str
    attempts: int
    person_id: int
    action: str
    documents: int
    snoozed_until: dt.datetime | None
    phone: str | None
    user_id: str | None
    locale: str
    time_zone: str


class AcknowledgementSent(TypedDict):
    reply_id: int
    state: str  # 'sent', or 'unknown' (no answer came)
    wa_message_id: str | None


class AcknowledgementRefused(TypedDict):
    reply_id: int
    retry_seconds: float | None  # None: never again ('failed')
    counts_attempt: bool
    error_code: int | None
    error: str


class AcknowledgementGivenUp(TypedDict):
    reply_id: int
