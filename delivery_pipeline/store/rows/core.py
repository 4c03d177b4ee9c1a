"""Parameters and rows of ``sql/queries/core.sql``: the server and its migrations, people,
documents, the claim and its ledger, the knock, the sender's pause, the number's pacer,
alerts."""

import datetime as dt
import uuid
from typing import Any, NamedTuple, TypedDict

from psycopg.types.json import Jsonb

from delivery_pipeline.model import Action, ChunkState, Kind, ReviewDecision
from delivery_pipeline.settings.eligibility import Guard
from delivery_pipeline.store.rows.common import ById, ByPerson, ChunkRef, ClaimRef

# ── server and migrations ───────────────────────────────────────────────────


class ByName(TypedDict):
    name: str


class MigrationRecord(TypedDict):
    version: int
    name: str


# ── people ──────────────────────────────────────────────────────────────────


class NewPerson(TypedDict):
    phone: str | None
    name: str
    locale: str
    time_zone: str
    brief_opt_in: bool
    brief_local_time: dt.time
    phone_number_id: str | None  # the number they are bound to (None: the default)


class QuietHours(ByPerson):
    quiet_hours: str | None


class ByPhone(TypedDict):
    phone: str


class ByTimeZone(TypedDict):
    time_zone: str


# ── documents ───────────────────────────────────────────────────────────────


class Document(NamedTuple):
    """A ``documents`` row."""

    id: int
    person_id: int
    kind: str
    for_date: dt.date | None
    created_at: dt.datetime
    status: str
    body: str | None
    generated_at: dt.datetime | None
    generation_attempts: int
    generation_error: str | None
    generation_claim_token: uuid.UUID | None
    generation_claimed_at: dt.datetime | None
    next_generation_at: dt.datetime
    delivered_at: dt.datetime | None
    delivery_attempts: int
    last_delivery_error: str | None
    next_attempt_at: dt.datetime
    chunk_limit: int | None
    claim_token: uuid.UUID | None
    claimed_at: dt.datetime | None
    knock_sent_at: dt.datetime | None
    knock_message_id: str | None
    awaiting_reply_since: dt.datetime | None
    abandoned_at: dt.datetime | None
    abandon_reason: str | None
    generation_failed_at: dt.datetime | None
    awaiting_review_since: dt.datetime | None
    review_decision: ReviewDecision | None
    reviewed_by: str | None
    reviewed_at: dt.datetime | None
    review_reason: str | None
    approved_body: str | None
    in_queue: bool
    quiet_until: dt.datetime | None
    knock_held_since: dt.datetime | None
    # sql/migrations/026: the one reminder of an unanswered knock: when it is due, when it went
    remind_at: dt.datetime | None
    reminded_at: dt.datetime | None
    # sql/migrations/027: the business number its first claim sent it from
    phone_number_id: str | None
    # sql/migrations/028: failed statuses applied to its chunks (the finish compares it)
    chunk_failures: int
    # sql/migrations/039: the way it goes or went (parts, a file, after a knock), and the
    # document template of its file's latest send
    way: str | None
    file_template: str | None
    file_template_language: str | None


class PendingDocument(ByPerson):
    kind: str
    for_date: dt.date | None


class ReadyDocument(PendingDocument):
    body: str
    needs_review: bool


class Chunk(NamedTuple):
    """A chunk of the ledger, without its text (``documents show``)."""

    document_id: int
    chunk_index: int
    state: ChunkState
    callback_data: str
    wa_message_id: str | None
    send_attempts: int
    started_at: dt.datetime | None
    sent_at: dt.datetime | None
    unknown_since: dt.datetime | None
    delivered_at: dt.datetime | None
    read_at: dt.datetime | None
    failed_at: dt.datetime | None
    error_code: int | None


class OldestWaiting(NamedTuple):
    """The oldest document of a state that waits on someone."""

    state: str
    oldest_id: int
    oldest_last_error: str | None
    oldest_next_attempt_at: dt.datetime | None
    oldest_next_attempt_in_seconds: float | None


# ── eligibility and claim ───────────────────────────────────────────────────


class Eligible(NamedTuple):
    """What a sweep would act on now, and how."""

    id: int
    action: Action
    quiet_until: dt.datetime | None


class ClaimBatch(Guard):
    document_id: int | None
    person_id: int | None
    limit: int
    token: uuid.UUID
    chunk_limit: int
    # this sweep holds the probe of this pause ('*' or a number): it may claim one
    # document while it lasts
    probe_number: str | None
    # only this number's documents (``sweep --number``); None: every number's
    number: str | None


class Claim(NamedTuple):
    """A document this sweep holds, what the eligibility function said to do, and
    what delivering it needs (the claim returns it: no second read)."""

    document_id: int
    action: Action
    # The action is hold_quiet: when the person's quiet hours end.
    quiet_until: dt.datetime | None
    chunk_limit: int | None
    delivery_attempts: int
    knock_sent_at: dt.datetime | None
    person_id: int
    # Both None only with the action abandon_unreachable: nothing is sent to them.
    phone: str | None
    # The BSUID: the address when there is no number (sent with ``recipient``).
    user_id: str | None
    name: str
    locale: str
    # Only while the ledger holds no chunk text: the first claim cuts it.
    body: str | None
    token: uuid.UUID
    kind: Kind
    # The person pressed Stop (sql/migrations/026): no knock, no daily brief for them.
    knocks_stopped: bool
    # Woken for the one reminder of a delivered, unanswered knock (sql/migrations/026).
    remind: bool
    # The business number it goes out from (sql/migrations/027), written by its first claim.
    phone_number_id: str
    # The form its ledger holds (sql/migrations/039: 'parts', 'file', 'file_in_window'; None:
    # not decided), and whether it has a ledger: what began goes on as it began.
    way: str | None
    has_ledger: bool
    # The person's own choice outside the window (sql/migrations/039): 'knock', 'file', None.
    outside_window: str | None


class BeginItem(TypedDict):
    """One document of ``begin_delivery``'s batch (a JSON object)."""

    document_id: int
    token: str
    phone_number_id: str
    fresh: bool  # its first claim: its chunks come with it


class ChunkItem(TypedDict):
    """One chunk of a fresh document of ``begin_delivery``'s batch (a JSON object)."""

    document_id: int
    chunk_index: int
    body: str | None  # None: a file's one row (sql/migrations/039)
    tag: str


class BeginDelivery(TypedDict):
    """Several claimed documents at once (the ledger writer's batch), as JSON: one
    array decodes in one C call where ten typed arrays each cost Python work."""

    documents: Jsonb  # list[BeginItem]
    chunks: Jsonb  # list[ChunkItem]
    lease: dt.timedelta


class LedgerEntry(NamedTuple):
    """One row of ``begin_delivery``: for its document, the person is busy (then
    nothing else), or a chunk."""

    document_id: int
    person_busy: bool
    written_now: bool | None
    chunk_index: int | None
    state: ChunkState | None
    send_attempts: int | None
    callback_data: str | None
    body: str | None
    ambiguous_age_seconds: float | None


class AdvanceItem(TypedDict):
    """One document of ``advance_delivery``'s batch (a JSON object)."""

    document_id: int
    token: str
    phone_number_id: str
    sent_index: int | None
    sent_callback: str | None
    wa_message_id: str | None
    next_index: int | None
    next_callback: str | None
    resend_ambiguous: bool
    finish: bool


class AdvanceDelivery(TypedDict):
    """Several claimed documents at once (the ledger writer's batch), as JSON."""

    requests: Jsonb  # list[AdvanceItem]
    renew_after: dt.timedelta


class Advance(NamedTuple):
    """What ``advance_delivery`` did for a document: is the claim ours, was the
    chunk fenced, is the document delivered."""

    document_id: int
    ours: bool
    fenced: bool
    delivered: bool
    paused: bool  # sending is paused for this document: nothing fenced
    every: bool  # ...by the pause of every number, not only its own


class ChunkFailed(ChunkRef):
    error_code: int | None


class ReleaseForRetry(ClaimRef):
    delay_seconds: float
    attempt: int
    error: str


class ReleaseUnknown(ChunkRef):
    token: uuid.UUID
    delay_seconds: float
    error: str


class HoldQuiet(ClaimRef):
    until: dt.datetime | None


class AbandonClaimed(ClaimRef):
    reason: str
    error: str


# ── knock ───────────────────────────────────────────────────────────────────


class KnockReservation(NamedTuple):
    previous: dt.datetime | None
    reserved: dt.datetime


class UnreserveKnock(ByPerson):
    previous: dt.datetime | None
    reserved: dt.datetime


class AwaitReply(ClaimRef):
    knocked: bool
    knock_message_id: str | None
    service_window: dt.timedelta


class AwaitingReply(NamedTuple):
    """NULL: the person wrote meanwhile, the document is due again.
    ``failed_knock_id``: the knock just sent had already failed by status."""

    awaiting_reply_since: dt.datetime | None
    failed_knock_id: int | None


class RefuseWindow(ByPerson):
    at: dt.datetime | None


class RaiseLastInbound(ByPerson):
    sent_at: dt.datetime


# ── sender state ────────────────────────────────────────────────────────────


class PauseSender(TypedDict):
    phone_number_id: str  # '*': every number
    code: int | None
    reason: str
    document_id: int | None  # the refused send's document (a probe's grows the interval)
    first_seconds: float
    max_seconds: float


class Paused(NamedTuple):
    """What ``pause_sender`` did: ``fresh`` when this refusal started the pause."""

    fresh: bool
    paused_at: dt.datetime
    next_probe_at: dt.datetime
    probes: int
    refused_sends: int


class ResumeSender(TypedDict):
    phone_number_id: str  # the number the accepted send went from
    send_started_at: dt.datetime
    by: str


class SenderRow(TypedDict):
    phone_number_id: str


class SenderState(NamedTuple):
    paused_at: dt.datetime | None
    pause_code: int | None
    pause_reason: str | None
    resumed_at: dt.datetime | None
    next_probe_at: dt.datetime | None
    probe_interval_seconds: float | None
    probes: int
    refused_sends: int
    resumed_by: str | None
    next_probe_in_seconds: float | None
    phone_number_id: str  # '*': every number


# ── the number's shared pacer ───────────────────────────────────────────────


class ByPhoneNumber(TypedDict):
    """The business number's id (the pacer's row)."""

    phone_number_id: str


class ReserveSendSlots(ByPhoneNumber):
    count: int
    spacing: float


class SendSlots(NamedTuple):
    first_slot: dt.datetime
    first_slot_in: float


class PacerState(NamedTuple):
    booked_ahead_seconds: float
    throttled_seconds_ago: float | None
    throttles: int


class ThrottlePacer(ByPhoneNumber):
    seconds: float


# ── alerts ──────────────────────────────────────────────────────────────────


class ByDedupKey(TypedDict):
    dedup_key: str


class NewAlert(ByDedupKey):
    severity: str
    kind: str
    message: str
    details: Jsonb
    channel: str
    episode: bool  # a row of an episode (watch/episodes.py), kept while the episode is open
    observed_at: dt.datetime | None  # when what it says was seen; None: now


class OpsAlert(NamedTuple):
    """An ``ops_alerts`` row."""

    id: int
    dedup_key: str
    severity: str
    kind: str
    message: str
    details: dict[str, Any]
    created_at: dt.datetime
    sent_at: dt.datetime | None
    send_attempts: int
    last_send_error: str | None
    channel: str
    episode: bool
    observed_at: dt.datetime


class LastAlert(NamedTuple):
    """The newest ``ops_alerts`` row of a key: what decides whether to raise it again."""

    kind: str
    severity: str
    age_seconds: float


class EpisodeState(NamedTuple):
    """An episode's key as it stands (``watch/episodes.py``); the row's fields are None
    while the key has no row."""

    kind: str | None
    severity: str | None
    observed_at: dt.datetime | None
    age_seconds: float | None
    opened_at: dt.datetime | None
    resolved_at: dt.datetime | None
    now: dt.datetime


class AlertSendFailed(ById):
    error: str
