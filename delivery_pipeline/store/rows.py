"""What every named query takes and returns: its parameters and its row.

Parameters are a ``TypedDict`` per shape, so mypy checks each call's names
and types (a ``NotRequired`` key is one that some queries of a shared shape
do not read); a row is a ``NamedTuple`` whose fields are the query's result
columns, in order and by name (a query of one column returns the value
itself). ``store.queries`` pairs each query with its two types;
``delivery_pipeline_tests/store/test_queries.py`` describes every query on a
migrated database and fails when a type and its SQL disagree. Shapes shared
by several queries are declared once, first; the rest follow the order of
``sql/queries*.sql``. A field typed with one of ``model``'s enums is loaded as
that enum (the CHECK constraint guarantees the value).

Every process builds all of these classes at import, and a sender's start-up
is part of what each of its messages costs (docs/benchmarks.md, "Start-up"):
so rows are named tuples, not frozen dataclasses (whose methods are compiled
from generated source, class by class), and annotations here are evaluated,
not postponed (``typing`` compiles each string annotation of a ``TypedDict``
or a ``NamedTuple`` into a forward reference).
"""

import datetime as dt
import uuid
from typing import Any, NamedTuple, NotRequired, TypedDict

from psycopg.types.json import Jsonb

from delivery_pipeline.model import Action, ChunkState, Kind, ReviewDecision
from delivery_pipeline.settings.eligibility import Eligibility, Guard

# ── parameters shared by several queries ────────────────────────────────


class NoParams(TypedDict):
    """A query without parameters: call it with ``{}``."""


class ById(TypedDict):
    id: int


class ByPerson(TypedDict):
    person_id: int


class ByDocument(TypedDict):
    document_id: int


class ByPhoneNumber(TypedDict):
    """The business number's id (the pacer's row)."""

    phone_number_id: str


class ByDedupKey(TypedDict):
    dedup_key: str


class ClaimRef(TypedDict):
    """A write fenced by the delivery claim: the document and our claim token."""

    document_id: int
    token: uuid.UUID


class ChunkRef(TypedDict):
    """One chunk's current send attempt (its callback tag)."""

    document_id: int
    chunk_index: int
    callback_data: str


class Sample(TypedDict):
    """How many of the oldest rows a check lists."""

    sample: int


class AgedCheck(Sample):
    """A waiting state's check: its thresholds."""

    warn: dt.timedelta
    error: dt.timedelta


class DayBounds(TypedDict):
    """One report day, ``[start, end)``."""

    start: dt.datetime
    end: dt.datetime


# ── rows shared by several queries ──────────────────────────────────────


class Person(NamedTuple):
    """A ``people`` row."""

    id: int
    phone: str | None
    name: str
    locale: str
    time_zone: str
    brief_opt_in: bool
    brief_local_time: dt.time
    opted_out_at: dt.datetime | None
    last_inbound_at: dt.datetime | None
    last_knock_at: dt.datetime | None
    window_refused_at: dt.datetime | None
    created_at: dt.datetime
    quiet_hours: str | None
    # sql/migrations/022: a business-scoped user id (BSUID), and the username shown with it
    user_id: str | None
    username: str | None
    # sql/migrations/026: the person pressed Stop (no knocks, no briefs) until they write Start
    knocks_stopped_at: dt.datetime | None
    # sql/migrations/027: the business number they are bound to (None: the default number)
    phone_number_id: str | None
    # sql/migrations/039: their documents outside the window: 'knock', 'file' (None: by kind)
    outside_window: str | None


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


class StateCount(NamedTuple):
    """Documents in one state (abandoned: per reason, else ``''``) and the oldest's age."""

    state: str
    reason: str
    count: int  # type: ignore[assignment]  # shadows tuple.count, never called
    oldest_age_seconds: float


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


class DeliveryEvent(NamedTuple):
    """One outbox row (``delivery_events``, sql/migrations/008)."""

    id: int
    occurred_at: dt.datetime
    document_id: int
    person_id: int
    kind: str
    event: str
    reason: str | None
    chunks: int | None
    source: str
    claimed_by: str | None
    claimed_at: dt.datetime | None


# ── sql/queries/core.sql: server and migrations ──────────────────────────────


class ByName(TypedDict):
    name: str


class MigrationRecord(TypedDict):
    version: int
    name: str


# ── sql/queries/core.sql: people ─────────────────────────────────────────────


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


# ── sql/queries/core.sql: documents ──────────────────────────────────────────


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


# ── sql/queries/core.sql: eligibility and claim ──────────────────────────────


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


# ── sql/queries/core.sql: knock ──────────────────────────────────────────────


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


# ── sql/queries/core.sql: sender state ───────────────────────────────────────


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


# ── sql/queries/core.sql: the number's shared pacer ──────────────────────────


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


# ── sql/queries/core.sql: alerts ─────────────────────────────────────────────


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


# ── sql/queries/checks.sql ──────────────────────────────────────────────


class PendingCheck(NamedTuple):
    id: int
    person_id: int
    kind: str
    attempts: int
    error: str | None
    age_seconds: float
    total: int
    over_warn: int
    over_error: int


class GeneratingCheck(NamedTuple):
    id: int
    person_id: int
    kind: str
    attempts: int
    claimed_at: dt.datetime | None
    age_seconds: float
    total: int
    over_warn: int
    over_error: int


class UndeliveredCheckParams(Eligibility, AgedCheck):
    slow: dt.timedelta


class UndeliveredCheck(NamedTuple):
    id: int
    person_id: int
    kind: str
    eligible: bool
    action: Action | None
    attempts: int
    error: str | None
    age_seconds: float
    oldest_age_seconds: float
    stranded_seconds: float | None
    total: int
    eligible_total: int
    over_warn: int
    over_error: int
    over_slow: int


class AwaitingReviewCheck(NamedTuple):
    id: int
    person_id: int
    kind: str
    age_seconds: float
    total: int
    over_warn: int
    over_error: int


class AwaitingReplyCheck(NamedTuple):
    id: int
    person_id: int
    kind: str
    knock_sent_at: dt.datetime | None
    age_seconds: float
    total: int


class KnockHealthParams(Sample):
    period: dt.timedelta
    settle: dt.timedelta
    answer_grace: dt.timedelta
    overdue: dt.timedelta


class KnockHealth(NamedTuple):
    knocked: int
    settled: int
    not_delivered: int
    failed: int
    answerable: int
    unanswered: int
    not_delivered_ids: list[int]
    expired: int  # taken as dropped at their time to live (040)
    overdue: int  # past their deadline and its grace, not ended by their owner


class PeriodSample(Sample):
    period: dt.timedelta


class AbandonedCheck(NamedTuple):
    reason: str
    count: int  # type: ignore[assignment]  # shadows tuple.count, never called
    oldest_age_seconds: float
    oldest_ids: list[int]


class TierCheck(NamedTuple):
    person_id: int
    age_seconds: float
    total: int


class SenderPausedCheck(NamedTuple):
    paused_at: dt.datetime | None
    pause_code: int | None
    pause_reason: str | None
    age_seconds: float | None
    waiting: int
    waiting_ids: list[int]
    paused_numbers: list[str]  # numbers paused on their own (sql/migrations/027)


class PosterToken(TypedDict):
    token: uuid.UUID


class AlertPosterLease(PosterToken):
    lease: dt.timedelta


class AlertsToSend(TypedDict):
    channel: str
    max_age: dt.timedelta
    limit: int


class UnsentAlert(NamedTuple):
    id: int
    dedup_key: str
    severity: str
    kind: str
    message: str
    details: dict[str, Any]
    created_at: dt.datetime
    send_attempts: int
    channel: str


class DeliveryEventsCheck(NamedTuple):
    id: int
    event: str
    source: str
    claimed_by: str | None
    age_seconds: float
    total: int
    over_warn: int
    over_error: int


# ── sql/queries/generation.sql ──────────────────────────────────────────


class MaxAttempts(TypedDict):
    max_attempts: int


class ClaimGenerationBatch(MaxAttempts):
    token: uuid.UUID
    lease: dt.timedelta
    limit: int
    document_id: int | None


class GenerationClaim(NamedTuple):
    """A document claimed for generation, with what the generator needs of its person."""

    id: int
    person_id: int
    kind: Kind
    for_date: dt.date | None
    generation_attempts: int
    name: str
    locale: str
    time_zone: str
    local_today: dt.date


class GenerationSucceeded(TypedDict):
    document_id: int
    token: uuid.UUID
    body: str
    needs_review: bool


class Generated(NamedTuple):
    id: int
    person_id: int
    abandoned_at: dt.datetime | None
    awaiting_review_since: dt.datetime | None


class GenerationFailed(TypedDict):
    document_id: int
    token: uuid.UUID
    error: str
    final: bool
    refund: int
    delay_seconds: float


class Delay(TypedDict):
    delay_seconds: float


class BriefDueDate(TypedDict):
    at: dt.datetime
    time_zone: str
    brief_local_time: dt.time


class At(TypedDict):
    """An instant, or None: the database's now."""

    at: dt.datetime | None


class EnqueuedBrief(NamedTuple):
    id: int
    person_id: int
    for_date: dt.date


class StaleBriefs(At):
    lease: dt.timedelta


class AbandonedBrief(NamedTuple):
    id: int
    person_id: int
    for_date: dt.date
    status: str


# ── sql/queries/record.sql ──────────────────────────────────────────────


class OutboxRuns(TypedDict):
    run_source: str
    run_claimant: str


class OutboxPending(TypedDict):
    lease: dt.timedelta
    push_claimant: str
    running_sources: list[str]
    running_claimants: list[str]
    limit: int


class OutboxClaimSource(TypedDict):
    source: str
    claimant: str
    limit: int


class OutboxClaimSeen(TypedDict):
    seen: Jsonb  # [{id, claimed_by}]
    claimant: str


class ByIds(TypedDict):
    ids: list[int]


class OutboxRelease(ByIds):
    claimant: str


class OutboxForget(TypedDict):
    keep: dt.timedelta
    limit: int


class BySource(TypedDict):
    source: str


class HeartbeatIdle(NamedTuple):
    """Why the heartbeat finds nothing eligible (``heartbeat_idle``)."""

    queued: int
    knock_held: int
    quiet: int
    next_due: dt.datetime | None
    paused_at: dt.datetime | None
    pause_code: int | None
    pause_reason: str | None
    next_probe_at: dt.datetime | None
    numbers_paused: int


class Beat(NamedTuple):
    at: dt.datetime  # the database's now when the beat was left


class Heartbeat(NamedTuple):
    source: str
    seen_at: dt.datetime
    age_seconds: float


# ── sql/queries/report.sql ──────────────────────────────────────────────


class ReportDocument(NamedTuple):
    id: int
    kind: str
    generated_at: dt.datetime
    delivered_at: dt.datetime | None
    generated_in_day: bool | None
    delivered_in_day: bool | None
    phone_number_id: str  # '' before its first claim (sql/migrations/027)
    way: str  # how it went (sql/migrations/039); '' while not delivered


class ReportChunk(NamedTuple):
    document_id: int
    chunk_index: int
    state: str
    delivered: bool
    read: bool
    phone_number_id: str  # '' for a document claimed before sql/migrations/027


class ReportKnock(NamedTuple):
    id: int
    person_id: int
    knock_sent_at: dt.datetime
    delivered: bool
    seen: bool
    answered: bool


class ReportAbandoned(NamedTuple):
    id: int
    reason: str | None


# ── sql/queries/retention.sql ───────────────────────────────────────────


class PruneBatch(TypedDict):
    """One prune batch: rows older than ``keep``, after the previous batch's last key
    (all None: from the oldest). The key is an id or a text, per table; only
    status_events' has a third part, which the other tables' queries do not read."""

    keep: dt.timedelta
    limit: int
    after_at: dt.datetime | None
    after_key: int | str | None
    after_sub: NotRequired[str | None]


class BatchPruned(NamedTuple):
    """What one prune batch did, and the key the next one continues after."""

    deleted: int
    examined: int
    after_at: dt.datetime | None
    after_key: int | str | None
    after_sub: str | None


class OldestKept(NamedTuple):
    """How old each pruned table's oldest row is (seconds; None: the table is empty)."""

    raw_webhooks: float | None
    status_events: float | None
    inbound_messages: float | None
    ops_alerts: float | None
    document_files: float | None


# ── sql/queries/review.sql ──────────────────────────────────────────────


class DecideReview(ByDocument):
    decision: ReviewDecision
    reviewer: str
    reason: str | None
    body: str | None


class ReviewDecided(NamedTuple):
    id: int
    person_id: int
    review_decision: ReviewDecision
    reviewed_by: str
    reviewed_at: dt.datetime


class DocumentReview(NamedTuple):
    """Where one document stands with the reviewers."""

    id: int
    kind: str
    status: str
    awaiting_review_since: dt.datetime | None
    review_decision: ReviewDecision | None
    reviewed_by: str | None
    reviewed_at: dt.datetime | None
    review_reason: str | None
    edited: bool
    abandoned_at: dt.datetime | None
    abandon_reason: str | None
    delivered_at: dt.datetime | None


class Limit(TypedDict):
    limit: int


class Waiting(NamedTuple):
    """A document awaiting review, as a reviewer sees it."""

    id: int
    kind: str
    for_date: dt.date | None
    body: str
    awaiting_review_since: dt.datetime
    age_seconds: float
    person_id: int
    name: str
    phone: str | None
    locale: str
    time_zone: str
    opted_out: bool
    total: int


class SignInFailure(TypedDict):
    """A wrong token from ``client``; failures older than ``window`` count no more."""

    client: str
    window: dt.timedelta


class SignInAttempt(SignInFailure):
    """The sign-in limits for ``client`` (``store.review.SignInLimits``)."""

    client_limit: int
    overall_limit: int
    known_for: dt.timedelta


class SignInState(NamedTuple):
    """Where a sign-in attempt stands: until when this client, and clients not known,
    are held (None: not held), and whether this client signed in lately."""

    client_held_until: dt.datetime | None
    strangers_held_until: dt.datetime | None
    known: bool
    now: dt.datetime


class NewSession(TypedDict):
    """A session to start: its cookie key's hash, its person, whether they are an operator,
    its CSRF token and lifetime."""

    key_hash: bytes
    reviewer: str
    operator: bool
    csrf: str
    lifetime: dt.timedelta


class StartSession(NewSession):
    client: str
    known_for: dt.timedelta


class ByKeyHash(TypedDict):
    key_hash: bytes


class StoredSession(NamedTuple):
    """A live review session."""

    reviewer: str
    operator: bool
    csrf: str
    expires_at: dt.datetime


# ── sql/queries/webhooks.sql ────────────────────────────────────────────


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


class DocumentIds(TypedDict):
    document_ids: list[int]


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


# ── sql/queries/pause.sql: the fleet-wide pause ─────────────────────────


class GateParams(TypedDict):
    token: uuid.UUID
    first_seconds: float  # a pause recorded without a probe time: probe again this soon
    # a sweep of one number (``sweep --number``) takes only its number's probe and
    # every number's ('*'); None: every due probe
    number: str | None


class SenderGate(NamedTuple):
    """One pause row ('*' or a number): ``open``, or this sweep holds its ``probe``,
    or neither (paused)."""

    phone_number_id: str
    open: bool
    probe: bool
    pause_code: int | None
    next_probe_at: dt.datetime | None


class EndProbe(TypedDict):
    token: uuid.UUID
    again: bool
    phone_number_id: str


class ProbeRef(TypedDict):
    token: uuid.UUID
    document_id: int
    phone_number_id: str


class MaySend(TypedDict):
    document_id: int
    phone_number_id: str


class SendAllowed(NamedTuple):
    allowed: bool
    every: bool  # what stops it is the pause of every number


class ResumeSending(TypedDict):
    by: str
    phone_number_id: str | None  # None: every pause


class Resumed(NamedTuple):
    """A pause an operator ended."""

    phone_number_id: str
    paused_at: dt.datetime
    pause_code: int | None
    pause_reason: str | None


# ── knocks and templates (sql/migrations/020, sql/queries/templates.sql) ───────────────


class TemplateKeys(TypedDict):
    """Templates by position: (names[i], languages[i])."""

    names: list[str]
    languages: list[str]


class TemplateHealth(NamedTuple):
    """A knock template's health: its problem ('ok' when healthy or never heard of)."""

    name: str
    language: str
    position: int
    problem: str
    sendable: bool
    status: str | None
    quality: str | None
    category: str | None
    announced_category: str | None
    announced_effective_at: dt.datetime | None
    paused_until: dt.datetime | None
    pause_count: int | None
    refused_code: int | None
    refused_until: dt.datetime | None
    status_at: dt.datetime | None
    pause_lapsed: bool | None


class TemplateRef(TypedDict):
    name: str
    language: str


class TemplateRefused(TemplateRef):
    code: int
    recheck_seconds: float


class TemplateEvent(TemplateRef):
    field: str
    event: str
    occurred_at: dt.datetime
    payload: Jsonb


class TemplateStatusEvent(TemplateRef):
    template_id: str | None
    event: str
    occurred_at: dt.datetime
    reason: str | None
    pause_title: str | None
    disable_date: str | None


class TemplateQualityEvent(TemplateRef):
    template_id: str | None
    quality: str
    occurred_at: dt.datetime


class TemplateCategoryEvent(TemplateRef):
    template_id: str | None
    announced: bool
    category: str
    previous_category: str | None
    occurred_at: dt.datetime
    effective_at: dt.datetime | None


class TemplateStatesParams(TemplateKeys):
    period: dt.timedelta
    undelivered_after: dt.timedelta


class TemplateState(NamedTuple):
    """A configured knock template: what the platform said, and its recent knocks."""

    name: str
    language: str
    problem: str
    sendable: bool
    status: str | None
    status_at: dt.datetime | None
    status_reason: str | None
    pause_count: int | None
    paused_until: dt.datetime | None
    pause_lapsed: bool | None
    disable_date: str | None
    quality: str | None
    category: str | None
    announced_category: str | None
    announced_effective_at: dt.datetime | None
    refused_code: int | None
    refused_until: dt.datetime | None
    knocks: int
    delivered: int
    failed: int
    not_delivered: int


class KnockHeldLocale(NamedTuple):
    """The documents of one locale holding their knock for a healthy template."""

    locale: str
    held: int
    oldest_age_seconds: float
    oldest_ids: list[int]


class OpenKnock(ClaimRef):
    person_id: int
    template: str
    language: str
    reserved_at: dt.datetime | None
    previous_knock_at: dt.datetime | None
    reminder: bool  # the one reminder of an unanswered knock (026): this document alone
    phone_number_id: str  # the number it is sent from


class OpenedKnock(NamedTuple):
    """A knock recorded before its send, and how many documents it asks about."""

    id: int
    documents: int


class ByKnock(TypedDict):
    knock_id: int


class KnockAccepted(ByKnock):
    state: str
    wa_message_id: str | None


class KnockRefused(ByKnock):
    error_code: int | None
    error: str


class KnockLookup(ByKnock):
    wa_message_id: str


class KnockRow(NamedTuple):
    id: int
    person_id: int
    template: str
    language: str
    state: str
    wa_message_id: str | None
    phone_number_id: str | None  # the number it was sent from (sql/migrations/027)


class KnockStatus(ByKnock):
    wa_message_id: str
    status: str
    at: dt.datetime


class KnockFailed(ByKnock):
    wa_message_id: str
    at: dt.datetime
    error_code: int | None
    error: str


class KnockWaiting(NamedTuple):
    """The documents still waiting on a knock that failed."""

    document_ids: list[int]


class KnockFailureError(NamedTuple):
    """The error object of a knock's failed status (None: it carried none)."""

    error: dict[str, Any] | None


class KnockUnwait(DocumentIds):
    delay_seconds: float
    attempt: int
    error: str


class KnockUnwaited(NamedTuple):
    id: int
    delivery_attempts: int


class HoldKnock(ClaimRef):
    delay_seconds: float
    error: str


class KnocksNotDeliveredParams(Sample):
    period: dt.timedelta
    undelivered_after: dt.timedelta


class KnockNotDelivered(NamedTuple):
    id: int
    person_id: int
    template: str
    language: str
    age_seconds: float
    document_ids: list[int]
    total: int


# ── sql/queries/operator.sql: an operator's cancel and resend (025) ────────


class OperatorTarget(TypedDict):
    document_id: int
    lease: dt.timedelta


class CancelDocument(ByDocument):
    why: str


class ReopenForResend(ByDocument):
    why: str
    lease: dt.timedelta


class NewDocumentAction(ByDocument):
    action: str
    operator: str
    reason: str | None
    from_state: str
    parts_sent: int
    in_flight: bool


class OperatorDocument(NamedTuple):
    """A document as an operator acts on it (``operator_document``)."""

    id: int
    person_id: int
    kind: Kind
    state: str
    status: str
    delivered_at: dt.datetime | None
    abandoned_at: dt.datetime | None
    abandon_reason: str | None
    awaiting_review: bool
    in_flight: bool  # a sender holds a live claim
    parts_sent: int  # parts that may have reached the person (sent, sending, unknown)
    parts: int  # parts in the ledger (0 before the first claim)


class ResendWindow(ByDocument):
    window: dt.timedelta


class RecentResends(NamedTuple):
    """A document's resends within the cap's window (``recent_resends``)."""

    resends: int
    oldest: dt.datetime | None


class ActionRecorded(NamedTuple):
    id: int
    at: dt.datetime


class DocumentAction(NamedTuple):
    """One operator action on a document (``document_actions``)."""

    id: int
    action: str
    operator: str
    reason: str | None
    at: dt.datetime
    from_state: str
    parts_sent: int
    in_flight: bool


# ── identity without a phone number: sql/queries/identity.sql ───────────


class ByIdentity(TypedDict):
    phone: str | None
    user_id: str | None


class ByUserId(TypedDict):
    user_id: str


class PersonUserId(ByPerson):
    user_id: str


class LearnIdentity(ByPerson):
    phone: str | None
    user_id: str | None
    username: str | None
    wa_message_id: str | None


class ChangeNumber(ByPerson):
    new_phone: str
    cause: str
    wa_message_id: str | None


class ChangeUserId(TypedDict):
    old_user_id: str | None
    phone: str | None
    new_user_id: str
    cause: str
    wa_message_id: str | None


class IdentityChange(NamedTuple):
    """One change of a person's number or BSUID, and what announced it."""

    field: str
    old_value: str | None
    new_value: str | None
    cause: str
    wa_message_id: str | None
    changed_at: dt.datetime


# ── what it costs: sql/queries/cost.sql ─────────────────────────────────


class PricingRecord(TypedDict):
    """One message's ``pricing``, as ``record_pricing`` reads it (its recordset columns)."""

    wa_message_id: str
    document_id: int | None
    knock_id: int | None  # a knock tagged by its knock id: charged to its first document
    part: str  # chunk | knock | other
    chunk_index: int | None
    country: str | None
    billable: bool | None
    category: str | None
    pricing_model: str | None
    pricing_type: str | None
    priced_at: str  # ISO 8601


class RecordPricing(TypedDict):
    records: Jsonb


class PricedMessage(NamedTuple):
    """A priced message as the report counts it."""

    document_id: int | None
    part: str
    billable: bool | None
    category: str | None
    country: str | None


class DeliveredWay(NamedTuple):
    """A document delivered in the report's day: the way it went (``model.Way``) and
    its priced and billable messages."""

    document_id: int
    way: str
    messages: int
    billable: int


# ── sql/queries/replies.sql: a reply to a knock (026) ────────────────────


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


# ── sql/queries/replies.sql: the answer to Later and Stop (038) ─────────────


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


# ── sql/queries/report.sql: knocks answered or not (026) ─────────────────


class KnockOutcome(NamedTuple):
    """A knock that left in the day, and what came of it (one outcome)."""

    id: int
    reminder: bool
    phone_number_id: str  # '' for a knock sent before sql/migrations/027
    outcome: str  # answered, later, stop, not_wanted, not_seen, expired, never_delivered


class KnockPresses(NamedTuple):
    action: str
    via: str
    presses: int


# ── the applications' door: sql/queries/api.sql (036) ───────────────────


class ByApplication(TypedDict):
    application: str


class IdempotencyKey(ByApplication):
    idempotency_key: str


class HandedOver(NamedTuple):
    """A document an application handed over under an idempotency key."""

    document_id: int
    request_hash: bytes | None
    answer: dict[str, Any] | None


class NewApiDocument(ByApplication):
    document_id: int
    idempotency_key: str | None
    request_hash: bytes | None
    replace_key: str | None
    priority: str
    metadata: Jsonb


class KeepAnswer(ByDocument):
    answer: Jsonb


class PersonKey(ByApplication):
    user_key: str


class LinkPerson(ByApplication):
    person_id: int
    user_key: str | None


class ApplicationPerson(ByApplication):
    person_id: int


class PersonKeyRow(NamedTuple):
    user_key: str | None


class UpdatePerson(ByPerson):
    name: str | None
    locale: str | None
    time_zone: str | None
    brief_opt_in: bool | None
    brief_local_time: dt.time | None
    quiet_hours_given: bool
    quiet_hours: str | None
    phone: str | None
    user_id: str | None


class ApplicationDocument(ByApplication):
    document_id: int
    lease: dt.timedelta


class ApiDocument(NamedTuple):
    """A document as the application that handed it over reads it."""

    id: int
    person_id: int
    person_key: str | None
    kind: Kind
    for_date: dt.date | None
    state: str
    since: dt.datetime
    abandon_reason: str | None
    status: str
    created_at: dt.datetime
    generated_at: dt.datetime | None
    review_decision: str | None
    reviewed_at: dt.datetime | None
    knock_sent_at: dt.datetime | None
    awaiting_reply_since: dt.datetime | None
    quiet_until: dt.datetime | None
    delivered_at: dt.datetime | None
    abandoned_at: dt.datetime | None
    delivery_attempts: int
    last_delivery_error: str | None
    next_attempt_at: dt.datetime
    in_flight: bool | None
    idempotency_key: str | None
    replace_key: str | None
    priority: str
    metadata: dict[str, Any]
    handed_over_at: dt.datetime
    way: str | None  # sql/migrations/039: the way it goes or went


class DocumentKnock(NamedTuple):
    """A knock sent for a document."""

    id: int
    template: str
    language: str
    state: str
    reminder: bool
    sent_at: dt.datetime
    delivered_at: dt.datetime | None
    read_at: dt.datetime | None
    failed_at: dt.datetime | None
    error_code: int | None


class MessagePrice(NamedTuple):
    """How the platform priced one message of a document."""

    part: str
    chunk_index: int | None
    category: str | None
    billable: bool | None
    country: str | None


class RateTake(TypedDict):
    bucket: str
    interval: dt.timedelta
    burst: int


class Applications(TypedDict):
    applications: list[str]


class EndpointGate(ByApplication):
    lease: dt.timedelta


class ClaimEvents(ByApplication):
    token: uuid.UUID
    lease: dt.timedelta
    limit: int
    probing: bool


class ApiEvent(NamedTuple):
    """An event claimed for sending to its application's endpoint."""

    id: int
    event_id: uuid.UUID
    type: str
    data: dict[str, Any]
    created_at: dt.datetime
    attempts: int


class EventFailed(TypedDict):
    id: int
    token: uuid.UUID
    error: str
    delay_seconds: float


class EndpointFailed(ByApplication):
    error: str
    schedule: list[float]


class ExpireEvents(TypedDict):
    horizon: dt.timedelta
    limit: int


class OutboxState(NamedTuple):
    """One application's outbox and endpoint, as the fleet knows them."""

    application: str
    registered_at: dt.datetime
    removed_at: dt.datetime | None
    failing_since: dt.datetime | None
    failures: int
    next_attempt_at: dt.datetime
    last_error: str | None
    last_success_at: dt.datetime | None
    waiting: int
    oldest_age_seconds: float | None
    expired_last_day: int


class HandOvers(NamedTuple):
    """What one application handed over in the last 24 hours, and where it is now."""

    application: str
    handed_over: int
    delivered: int
    abandoned: int
    open: int


# ── sql/queries/documents.sql: documents as an operator reads them ──────


class OutlookQuery(TypedDict):
    ids: list[int] | None
    state: str | None
    person_id: int | None
    kind: str | None
    since: dt.datetime | None
    limit: int
    lease: dt.timedelta
    service_window: dt.timedelta
    quiet_default: str | None
    default_number: str


class DocumentOutlook(NamedTuple):
    """A document's state and the facts of why it waits (``watch/outlook.py``)."""

    id: int
    person_id: int
    person_name: str
    person_address: str | None
    time_zone: str
    quiet_hours: str | None
    kind: str
    for_date: dt.date | None
    created_at: dt.datetime
    state: str
    since: dt.datetime
    abandon_reason: str | None
    status: str
    generation_attempts: int
    generation_error: str | None
    next_generation_at: dt.datetime
    delivery_attempts: int
    last_delivery_error: str | None
    next_attempt_at: dt.datetime
    in_flight: bool
    quiet_until: dt.datetime | None
    quiet_now_until: dt.datetime | None
    window_open: bool
    knock_sent_at: dt.datetime | None
    remind_at: dt.datetime | None
    reminded_at: dt.datetime | None
    knock_held_since: dt.datetime | None
    # Its knock not delivered yet: when the platform drops it (its time to live).
    knock_expires_at: dt.datetime | None
    awaiting_review_since: dt.datetime | None
    delivered_at: dt.datetime | None
    abandoned_at: dt.datetime | None
    paused_number: str | None
    pause_code: int | None
    pause_reason: str | None
    next_probe_at: dt.datetime | None
    superseded_by: int | None
    parts: int
    parts_sent: int
    now: dt.datetime
    # sql/migrations/039: parts, file, file_in_window, knock_then_parts, knock_then_file (None:
    # not decided yet), and a file's document template
    way: str | None
    file_template: str | None
    file_template_language: str | None


# ── sql/queries/files.sql: a document's file (037) ──────────────────────


class FileSourceRow(NamedTuple):
    """What a document's file is drawn from."""

    kind: Kind
    locale: str
    name: str
    day: dt.date
    body: str


class FileWords(NamedTuple):
    """What a document's file is called and dated in the messages that carry it."""

    kind: Kind
    locale: str
    name: str
    day: dt.date


class WayCount(NamedTuple):
    """Delivered documents that went one way (``way_summary``)."""

    way: str
    delivered: int
    recent: int  # within the period asked about


class Period(TypedDict):
    period: dt.timedelta


class OutsideWindow(TypedDict):
    person_id: int
    outside_window: str | None


class ChooseFileWay(ClaimRef):
    way: str  # 'file' or 'file_in_window'
    template: str | None
    language: str | None


class ForgetFileLedger(ClaimRef):
    way: str | None  # what it is again: None (decided afresh) or 'parts'


class StoredFile(NamedTuple):
    """A document's file, without its bytes."""

    document_id: int
    source_sha256: str
    sha256: str
    filename: str
    mime_type: str
    size_bytes: int
    rendered_at: dt.datetime


class NewFile(TypedDict):
    document_id: int
    source_sha256: str
    sha256: str
    filename: str
    mime_type: str
    content: bytes


class FileContent(TypedDict):
    document_id: int
    sha256: str


# ── sql/queries/media.sql: a file's media id on a number (037) ──────────


class MediaKey(TypedDict):
    document_id: int
    phone_number_id: str
    sha256: str


class MediaLookup(MediaKey):
    margin: dt.timedelta
    lease: dt.timedelta


class MediaLease(MediaLookup):
    token: uuid.UUID


class MediaToken(MediaKey):
    token: uuid.UUID


class MediaRecord(MediaToken):
    media_id: str
    lifetime: dt.timedelta


class MediaRefusal(MediaToken):
    code: int | None
    refusal: str


class MediaDrop(TypedDict):
    document_id: int
    phone_number_id: str
    media_id: str
    reason: str


class MediaState(NamedTuple):
    """A file's media id on a number, and whether it may be used now."""

    media_id: str | None
    usable: bool
    uploading: bool
    upload_refusal_code: int | None
    upload_refusal: str | None
    uploads: int


class MetricRow(NamedTuple):
    """One sample of ``/metrics`` read from the database (sql/queries/metrics.sql)."""

    metric: str
    labels: dict[str, Any]
    value: float
