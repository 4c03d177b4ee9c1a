"""Every query the project runs, by name, from ``sql/queries*.sql``, typed.

Each query lives in SQL under a ``-- name: <name>`` header with a line of
purpose; Python runs it as ``QUERIES.<name>`` and never builds SQL from
strings. ``Queries`` declares every name once with its parameter type and
its row type (``store.rows``): a ``Query`` returns rows (``one``, ``all``),
a ``Statement`` returns none (``run``). Both run on a sync or an async
connection alike::

    person = QUERIES.person_by_id.one(conn, {"id": 7})         # Person | None
    rows = await QUERIES.claim_batch.all(aconn, {...})          # list[Claim]
    QUERIES.alert_sent.run(conn, {"id": alert.id})

So a misspelt name, a missing or mistyped parameter and a misread column are
type errors, not runtime surprises. Loading fails at import when a file holds
a query not declared here or lacks one that is;
``delivery_pipeline_tests/store/test_queries.py`` checks every declaration against
the database (parameter names and types, result columns and types).
"""

from __future__ import annotations

import datetime as dt
import enum
import re
import sys
import types
import typing
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast, overload

import psycopg
from psycopg.rows import BaseRowFactory, class_row, kwargs_row, scalar_row

from delivery_pipeline.settings import PROJECT_ROOT
from delivery_pipeline.settings.eligibility import Eligibility, Guard
from delivery_pipeline.store.rows import (
    AbandonClaimed,
    AbandonDocument,
    AbandonedBrief,
    AbandonedCheck,
    AcknowledgementClaim,
    AcknowledgementGivenUp,
    AcknowledgementRefused,
    AcknowledgementSent,
    ActionRecorded,
    Advance,
    AdvanceDelivery,
    AgedCheck,
    AlertPosterLease,
    AlertSendFailed,
    AlertsToSend,
    ApiDocument,
    ApiEvent,
    ApplicationDocument,
    ApplicationPerson,
    Applications,
    AppliedStatus,
    ApplyStatuses,
    At,
    AwaitingReply,
    AwaitingReplyCheck,
    AwaitingReviewCheck,
    AwaitReply,
    BatchPruned,
    Beat,
    BeginDelivery,
    BriefDueDate,
    ByApplication,
    ByDedupKey,
    ByDocument,
    ById,
    ByIdentity,
    ByIds,
    ByKeyHash,
    ByKnock,
    ByName,
    ByPerson,
    ByPhone,
    ByPhoneNumber,
    BySource,
    ByTimeZone,
    ByUserId,
    ByWaMessageId,
    CancelDocument,
    ChangeNumber,
    ChangeUserId,
    ChooseFileWay,
    Chunk,
    ChunkFailed,
    ChunkOwner,
    ChunkRef,
    ChunkRefused,
    Claim,
    ClaimAcknowledgements,
    ClaimBatch,
    ClaimEvents,
    ClaimGenerationBatch,
    ClaimRef,
    DayBounds,
    DecideReview,
    Delay,
    DeliveredWay,
    DeliveryEvent,
    DeliveryEventsCheck,
    Document,
    DocumentAction,
    DocumentIds,
    DocumentKnock,
    DocumentOutlook,
    DocumentReview,
    Eligible,
    EndpointFailed,
    EndpointGate,
    EndProbe,
    EnqueuedBrief,
    EpisodeState,
    EventFailed,
    ExpireAfter,
    ExpireEvents,
    FileContent,
    FileSourceRow,
    FileWords,
    ForgetFileLedger,
    GateParams,
    Generated,
    GeneratingCheck,
    GenerationClaim,
    GenerationFailed,
    GenerationSucceeded,
    HandedOver,
    HandOvers,
    Heartbeat,
    HeartbeatIdle,
    HoldKnock,
    HoldQuiet,
    IdempotencyKey,
    IdentityChange,
    KeepAnswer,
    KeptRaw,
    KnockAccepted,
    KnockAnswered,
    KnockDeadline,
    KnockFailed,
    KnockFailureError,
    KnockHealth,
    KnockHealthParams,
    KnockHeldLocale,
    KnockLookup,
    KnockNotDelivered,
    KnockOutcome,
    KnockPresses,
    KnockRefused,
    KnockReply,
    KnockReservation,
    KnockRow,
    KnocksNotDeliveredParams,
    KnockStatus,
    KnockUnwait,
    KnockUnwaited,
    KnockWaiting,
    LastAlert,
    LearnIdentity,
    LedgerEntry,
    Limit,
    LinkPerson,
    MaxAttempts,
    MaySend,
    MediaDrop,
    MediaLease,
    MediaLookup,
    MediaRecord,
    MediaRefusal,
    MediaState,
    MediaToken,
    MessagePrice,
    MetricRow,
    MigrationRecord,
    NewAlert,
    NewApiDocument,
    NewDocumentAction,
    NewFile,
    NewInbound,
    NewPerson,
    NoParams,
    NoReplyAfter,
    OldestKept,
    OldestWaiting,
    OpenedKnock,
    OpenKnock,
    OperatorDocument,
    OperatorTarget,
    OpsAlert,
    OutboxClaimSeen,
    OutboxClaimSource,
    OutboxForget,
    OutboxPending,
    OutboxRelease,
    OutboxRuns,
    OutboxState,
    OutlookQuery,
    OutsideWindow,
    OweAcknowledgement,
    PacerState,
    PartDeadline,
    Paused,
    PauseSender,
    PendingCheck,
    PendingDocument,
    Period,
    PeriodSample,
    Person,
    PersonKey,
    PersonKeyRow,
    PersonUserId,
    PosterToken,
    PricedMessage,
    ProbeRef,
    PruneBatch,
    QuietHours,
    RaiseLastInbound,
    RateTake,
    RawWebhook,
    ReadyDocument,
    RecentResends,
    RecordPricing,
    RefuseWindow,
    ReleaseForRetry,
    ReleaseUnknown,
    ReopenForResend,
    ReportAbandoned,
    ReportChunk,
    ReportDocument,
    ReportKnock,
    ResendWindow,
    ReserveSendSlots,
    Resumed,
    ResumeSender,
    ResumeSending,
    ReviewDecided,
    Sample,
    SendAllowed,
    SenderGate,
    SenderPausedCheck,
    SenderRow,
    SenderState,
    SendSlots,
    SettleKnock,
    SignInAttempt,
    SignInFailure,
    SignInState,
    SnoozeDocuments,
    StaleBriefs,
    StartSession,
    StateCount,
    StoredFile,
    StoredSession,
    TakeReadMark,
    TemplateCategoryEvent,
    TemplateEvent,
    TemplateHealth,
    TemplateKeys,
    TemplateQualityEvent,
    TemplateRefused,
    TemplateState,
    TemplateStatesParams,
    TemplateStatusEvent,
    ThrottlePacer,
    TierCheck,
    UndeliverDocument,
    UndeliveredCheck,
    UndeliveredCheckParams,
    UnreserveKnock,
    UnsentAlert,
    UpdatePerson,
    Waiting,
    WayCount,
)

_NAME_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def _sql_dir() -> Path:
    """``sql/`` beside the package (a checkout or editable install), else the copy a
    regular ``pip install .`` puts under ``<prefix>/share/delivery_pipeline/sql``."""
    beside = PROJECT_ROOT / "sql"
    if beside.is_dir():
        return beside
    return Path(sys.prefix) / "share" / "delivery_pipeline" / "sql"


SQL_DIR = _sql_dir()
# Each named query file (``sql/queries/<topic>.sql``) and each numbered migration
# (``sql/migrations/NNN_name.sql``) in a folder of its own; the generated
# ``sql/schema.sql`` beside them.
QUERIES_DIR = SQL_DIR / "queries"
MIGRATIONS_DIR = SQL_DIR / "migrations"


@dataclass(frozen=True)
class NamedSql:
    name: str
    description: str
    sql: str


def read_queries(paths: list[Path]) -> dict[str, NamedSql]:
    """Every named query in ``paths``; a name defined twice is an error."""
    found: dict[str, NamedSql] = {}
    for path in paths:
        parts = _NAME_HEADER.split(path.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            lines = body.strip("\n").splitlines()
            description = lines[0][3:].strip() if lines and lines[0].startswith("-- ") else ""
            # Comment lines inside a statement too: psycopg caches the conversion
            # of a statement of at most 4,096 characters only, and the ledger's
            # run several times a message.
            sql = "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()
            if name in found:
                raise ValueError(f"query {name!r} defined twice (second time in {path})")
            found[name] = NamedSql(name, description, sql)
    return found


# ── running a named query ───────────────────────────────────────────────

P = TypeVar("P", bound=Mapping[str, object])
R = TypeVar("R")
Conn = psycopg.Connection[Any]
AsyncConn = psycopg.AsyncConnection[Any]


def _enum_of(hint: object) -> type[enum.Enum] | None:
    """The enum a field holds (``Action`` or ``Action | None``), if any."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    found = [o for o in options if isinstance(o, type) and issubclass(o, enum.Enum)]
    return found[0] if found else None


def row_fields(row: type) -> tuple[str, ...] | None:
    """The fields of one of ``store.rows``' named tuples; None for one column's type."""
    if not (isinstance(row, type) and issubclass(row, tuple)):  # list[int]: not a class
        return None
    fields: tuple[str, ...] | None = getattr(row, "_fields", None)
    return fields


def row_factory(row: type[R]) -> BaseRowFactory[R]:
    """Rows as ``row``: a named tuple by column name (psycopg's ``class_row``, with enum
    fields loaded as their enum), or any other type as the one column's value."""
    fields = row_fields(row)
    if fields is None:
        return cast(BaseRowFactory[R], scalar_row)
    hints = typing.get_type_hints(row)
    enums = {name: e for name in fields if (e := _enum_of(hints[name]))}
    if not enums:
        return class_row(row)

    def build(**values: Any) -> R:
        for name, kind in enums.items():
            if values.get(name) is not None:
                values[name] = kind(values[name])
        return row(**values)

    return kwargs_row(build)


class _Named(Generic[P]):
    """What ``Query`` and ``Statement`` share: the name, its SQL, its parameter type."""

    def __init__(self, params: type[P]) -> None:
        self.params = params
        self.name = ""
        self.description = ""
        self._sql: str | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @property
    def sql(self) -> str:
        if self._sql is None:
            raise RuntimeError(f"{self.name} is a declaration: run QUERIES.{self.name}")
        return self._sql

    def _bound(self, found: NamedSql) -> typing.Self:
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound.description, bound._sql = found.description, found.sql
        return bound


class Query(_Named[P], Generic[P, R]):
    """A named query whose rows are read: ``one`` (at most one row) or ``all``."""

    def __init__(self, params: type[P], row: type[R]) -> None:
        super().__init__(params)
        self.row = row
        self._rows = row_factory(row)

    @overload
    def one(self, conn: Conn, params: P, *, prepare: bool | None = None) -> R | None: ...
    @overload
    def one(
        self, conn: AsyncConn, params: P, *, prepare: bool | None = None
    ) -> Coroutine[Any, Any, R | None]: ...
    def one(
        self, conn: Conn | AsyncConn, params: P, *, prepare: bool | None = None
    ) -> R | None | Coroutine[Any, Any, R | None]:
        """The first row (the query's only one), or None when there is none."""
        if isinstance(conn, psycopg.AsyncConnection):
            return self._one_async(conn, params, prepare)
        cur = conn.cursor(row_factory=self._rows)
        return cur.execute(self.sql, params, prepare=prepare).fetchone()

    async def _one_async(self, conn: AsyncConn, params: P, prepare: bool | None) -> R | None:
        cur = conn.cursor(row_factory=self._rows)
        await cur.execute(self.sql, params, prepare=prepare)
        return await cur.fetchone()

    @overload
    def all(self, conn: Conn, params: P, *, prepare: bool | None = None) -> list[R]: ...
    @overload
    def all(
        self, conn: AsyncConn, params: P, *, prepare: bool | None = None
    ) -> Coroutine[Any, Any, list[R]]: ...
    def all(
        self, conn: Conn | AsyncConn, params: P, *, prepare: bool | None = None
    ) -> list[R] | Coroutine[Any, Any, list[R]]:
        """Every row."""
        if isinstance(conn, psycopg.AsyncConnection):
            return self._all_async(conn, params, prepare)
        cur = conn.cursor(row_factory=self._rows)
        return cur.execute(self.sql, params, prepare=prepare).fetchall()

    async def _all_async(self, conn: AsyncConn, params: P, prepare: bool | None) -> list[R]:
        cur = conn.cursor(row_factory=self._rows)
        await cur.execute(self.sql, params, prepare=prepare)
        return await cur.fetchall()

    async def send(self, conn: AsyncConn, params: P) -> Sent[R]:
        """Run it without reading its rows, so that in a pipeline several statements
        go in one round trip: ``rows()`` once the pipeline is synced."""
        cur = conn.cursor(row_factory=self._rows)
        await cur.execute(self.sql, params)
        return Sent(cur)


@dataclass(frozen=True)
class Sent(Generic[R]):
    """A query sent in a pipeline, its rows not read yet."""

    _cursor: psycopg.AsyncCursor[R]

    async def rows(self) -> list[R]:
        return await self._cursor.fetchall()


class Statement(_Named[P]):
    """A named statement that returns no rows: ``run`` says how many it touched."""

    @overload
    def run(self, conn: Conn, params: P, *, prepare: bool | None = None) -> int: ...
    @overload
    def run(
        self, conn: AsyncConn, params: P, *, prepare: bool | None = None
    ) -> Coroutine[Any, Any, int]: ...
    def run(
        self, conn: Conn | AsyncConn, params: P, *, prepare: bool | None = None
    ) -> int | Coroutine[Any, Any, int]:
        if isinstance(conn, psycopg.AsyncConnection):
            return self._run_async(conn, params, prepare)
        return conn.execute(self.sql, params, prepare=prepare).rowcount

    async def _run_async(self, conn: AsyncConn, params: P, prepare: bool | None) -> int:
        cur = await conn.execute(self.sql, params, prepare=prepare)
        return cur.rowcount


Named = Query[Any, Any] | Statement[Any]


# ── every query, declared once ──────────────────────────────────────────


class Queries:
    """Every named query with its parameter type and its row type (``store.rows``)."""

    # sql/queries/core.sql: server and migrations
    database_exists = Query(ByName, int)
    migrations_lock = Statement(NoParams)
    migrations_table = Statement(NoParams)
    migrations_applied = Query(NoParams, int)
    migrations_record = Statement(MigrationRecord)
    # people
    insert_person = Query(NewPerson, Person)
    set_quiet_hours = Query(QuietHours, Person)
    person_by_id = Query(ById, Person)
    person_by_phone = Query(ByPhone, Person)
    list_people = Query(NoParams, Person)
    time_zone_is_valid = Query(ByTimeZone, bool)
    # documents
    insert_ready_document = Query(ReadyDocument, Document)
    insert_pending_document = Query(PendingDocument, Document)
    document_by_id = Query(ById, Document)
    document_outlooks = Query(OutlookQuery, DocumentOutlook)
    superseded_by = Query(ById, int)
    document_chunks = Query(ByDocument, Chunk)
    state_summary = Query(NoParams, StateCount)
    oldest_waiting = Query(NoParams, OldestWaiting)
    # eligibility and claim
    anything_due = Query(NoParams, bool)
    guard_exists = Query(Guard, bool)
    eligible_ids = Query(Eligibility, Eligible)
    claim_batch = Query(ClaimBatch, Claim)
    begin_delivery = Query(BeginDelivery, LedgerEntry)
    advance_delivery = Query(AdvanceDelivery, Advance)
    chunk_failed = Statement(ChunkFailed)
    release_unknown = Query(ReleaseUnknown, bool)
    release_for_retry = Query(ReleaseForRetry, int)
    hold_quiet = Query(HoldQuiet, bool)
    release_claim = Statement(ClaimRef)
    abandon_document = Query(AbandonClaimed, int)
    # knock
    reserve_knock = Query(ByPerson, KnockReservation)
    unreserve_knock = Statement(UnreserveKnock)
    await_reply = Query(AwaitReply, AwaitingReply)
    refuse_window = Statement(RefuseWindow)
    person_opted_out = Statement(ByPerson)
    raise_last_inbound = Query(RaiseLastInbound, dt.datetime)
    wake_awaiting_documents = Query(ByPerson, int)
    # sender state
    pause_sender = Query(PauseSender, Paused)
    sender_row = Statement(SenderRow)
    resume_sender = Query(ResumeSender, str)
    sender_state = Query(NoParams, SenderState)
    # the number's shared pacer
    pacer_row = Statement(ByPhoneNumber)
    reserve_send_slots = Query(ReserveSendSlots, SendSlots)
    pacer_state = Query(ByPhoneNumber, PacerState)
    throttle_pacer = Statement(ThrottlePacer)
    # alerts
    alert_lock = Statement(ByDedupKey)
    last_alert = Query(ByDedupKey, LastAlert)
    episode_state = Query(ByDedupKey, EpisodeState)
    insert_alert = Query(NewAlert, OpsAlert)
    alert_sent = Statement(ById)
    alert_send_failed = Statement(AlertSendFailed)
    # ready notifications
    listen_ready = Statement(NoParams)
    next_due = Query(NoParams, dt.datetime)

    # sql/queries/backlog.sql
    backlog_by_state = Query(NoParams, StateCount)
    heartbeat_idle = Query(NoParams, HeartbeatIdle)

    # sql/queries/checks.sql
    check_pending = Query(AgedCheck, PendingCheck)
    check_generating = Query(AgedCheck, GeneratingCheck)
    check_undelivered = Query(UndeliveredCheckParams, UndeliveredCheck)
    check_awaiting_review = Query(AgedCheck, AwaitingReviewCheck)
    check_awaiting_reply = Query(Sample, AwaitingReplyCheck)
    check_knock_health = Query(KnockHealthParams, KnockHealth)
    check_abandoned_recent = Query(PeriodSample, AbandonedCheck)
    check_tier_usage = Query(Sample, TierCheck)
    check_sender_paused = Query(Sample, SenderPausedCheck)
    alerts_to_send = Query(AlertsToSend, UnsentAlert)
    alert_poster_lease = Query(AlertPosterLease, bool)
    alert_poster_release = Statement(PosterToken)
    check_delivery_events = Query(AgedCheck, DeliveryEventsCheck)

    # sql/queries/generation.sql
    generation_due = Query(NoParams, bool)
    fail_exhausted_generation = Query(MaxAttempts, int)
    claim_generation_batch = Query(ClaimGenerationBatch, GenerationClaim)
    generation_succeeded = Query(GenerationSucceeded, Generated)
    generation_failed = Query(GenerationFailed, str)
    pause_generation = Query(Delay, int)
    person_local_today = Query(ByPerson, dt.date)
    brief_due_date = Query(BriefDueDate, dt.date)
    enqueue_daily_briefs = Query(At, EnqueuedBrief)
    abandon_stale_briefs = Query(StaleBriefs, AbandonedBrief)

    # sql/queries/record.sql
    outbox_runs = Query(OutboxRuns, str)
    outbox_pending = Query(OutboxPending, DeliveryEvent)
    outbox_claim_source = Query(OutboxClaimSource, DeliveryEvent)
    outbox_claim_seen = Query(OutboxClaimSeen, DeliveryEvent)
    outbox_release = Statement(OutboxRelease)
    outbox_reported = Statement(ByIds)
    outbox_forget = Statement(OutboxForget)
    beat = Query(BySource, Beat)
    heartbeats = Query(NoParams, Heartbeat)

    # sql/queries/report.sql
    report_documents = Query(DayBounds, ReportDocument)
    report_chunks = Query(DayBounds, ReportChunk)
    report_knocks = Query(DayBounds, ReportKnock)
    report_abandoned = Query(DayBounds, ReportAbandoned)
    report_knock_outcomes = Query(DayBounds, KnockOutcome)
    report_knock_presses = Query(DayBounds, KnockPresses)

    # sql/queries/retention.sql
    prune_raw_webhooks = Query(PruneBatch, BatchPruned)
    prune_status_events = Query(PruneBatch, BatchPruned)
    prune_inbound_messages = Query(PruneBatch, BatchPruned)
    prune_ops_alerts = Query(PruneBatch, BatchPruned)
    prune_document_files = Query(PruneBatch, BatchPruned)
    retention_oldest = Query(NoParams, OldestKept)

    # sql/queries/review.sql
    decide_review = Query(DecideReview, ReviewDecided)
    document_review = Query(ByDocument, DocumentReview)
    awaiting_review = Query(Limit, Waiting)
    review_sign_in_lock = Statement(NoParams)
    review_sign_in_state = Query(SignInAttempt, SignInState)
    record_sign_in_failure = Statement(SignInFailure)
    start_review_session = Query(StartSession, StoredSession)
    review_session = Query(ByKeyHash, StoredSession)
    end_review_session = Statement(ByKeyHash)

    # sql/queries/schema.sql
    schema_catalog = Query(NoParams, str)
    defer_function_checks = Statement(NoParams)

    # sql/queries/webhooks.sql
    insert_inbound = Query(NewInbound, str)
    apply_statuses = Query(ApplyStatuses, AppliedStatus)
    resume_documents = Statement(DocumentIds)
    chunk_by_wamid = Query(ByWaMessageId, ChunkOwner)
    chunk_by_callback = Query(ChunkRef, ChunkOwner)
    chunk_refused = Query(ChunkRefused, int)
    undeliver_document = Query(UndeliverDocument, int)
    abandon_document_async = Query(AbandonDocument, int)
    settle_knock = Statement(SettleKnock)
    insert_raw_webhook = Query(RawWebhook, KeptRaw)
    health = Query(NoParams, int)

    # sql/queries/pause.sql: the fleet-wide pause
    sender_gate = Query(GateParams, SenderGate)
    probe_document = Query(ProbeRef, int)
    end_probe = Query(EndProbe, dt.datetime)
    may_send = Query(MaySend, SendAllowed)
    resume_sending = Query(ResumeSending, Resumed)
    # knocks and templates: sql/queries/templates.sql
    template_health = Query(TemplateKeys, TemplateHealth)
    note_template_refused = Statement(TemplateRefused)
    insert_template_event = Query(TemplateEvent, str)
    template_status_event = Statement(TemplateStatusEvent)
    template_quality_event = Statement(TemplateQualityEvent)
    template_category_event = Statement(TemplateCategoryEvent)
    wake_held_knocks = Query(NoParams, int)
    template_states = Query(TemplateStatesParams, TemplateState)
    knock_held_by_locale = Query(Sample, KnockHeldLocale)
    open_knock = Query(OpenKnock, OpenedKnock)
    knock_accepted = Statement(KnockAccepted)
    knock_refused = Statement(KnockRefused)
    knock_by_status = Query(KnockLookup, KnockRow)
    knock_status = Statement(KnockStatus)
    knock_failed = Query(KnockFailed, int)
    knock_waiting_documents = Query(ByKnock, KnockWaiting)
    knock_failure_error = Query(ByKnock, KnockFailureError)
    give_back_knock = Statement(ByKnock)
    knock_unwait = Query(KnockUnwait, KnockUnwaited)
    hold_knock = Query(HoldKnock, int)
    check_knocks_not_delivered = Query(KnocksNotDeliveredParams, KnockNotDelivered)
    # sql/queries/operator.sql: an operator's cancel and resend (025)
    lock_document = Query(ByDocument, int)
    operator_document = Query(OperatorTarget, OperatorDocument)
    recent_resends = Query(ResendWindow, RecentResends)
    record_document_action = Query(NewDocumentAction, ActionRecorded)
    cancel_document = Query(CancelDocument, int)
    reopen_for_resend = Query(ReopenForResend, int)
    reset_ledger_for_resend = Statement(ByDocument)
    document_actions = Query(ByDocument, DocumentAction)
    # sql/queries/replies.sql: a reply to a knock (026)
    knock_answered = Query(KnockAnswered, int)
    record_knock_reply = Statement(KnockReply)
    snooze_documents = Query(SnoozeDocuments, dt.datetime)
    stop_knocks = Statement(ByPerson)
    start_knocks = Statement(ByPerson)
    abandon_stopped_documents = Query(ByPerson, int)
    wake_for_reminders = Query(NoParams, int)
    abandon_no_reply = Query(NoReplyAfter, int)
    knock_deadline = Statement(KnockDeadline)
    expire_dropped_knocks = Query(ExpireAfter, int)
    part_deadline = Statement(PartDeadline)
    expire_dropped_parts = Query(ExpireAfter, int)
    take_read_mark = Query(TakeReadMark, str)
    owe_acknowledgement = Statement(OweAcknowledgement)
    claim_acknowledgements = Query(ClaimAcknowledgements, AcknowledgementClaim)
    acknowledgement_sent = Statement(AcknowledgementSent)
    acknowledgement_refused = Query(AcknowledgementRefused, int)
    acknowledgement_given_up = Query(AcknowledgementGivenUp, bool)
    # sql/queries/identity.sql: identity without a phone number
    person_by_identity = Query(ByIdentity, Person)
    person_by_user_id = Query(ByUserId, Person)
    set_person_user_id = Query(PersonUserId, Person)
    learn_identity = Query(LearnIdentity, int)
    change_number = Query(ChangeNumber, int)
    change_user_id = Query(ChangeUserId, int)
    identity_changes = Query(ByPerson, IdentityChange)

    # sql/queries/cost.sql: what it costs
    record_pricing = Statement(RecordPricing)
    report_priced_messages = Query(DayBounds, PricedMessage)
    report_delivered_document_messages = Query(DayBounds, PricedMessage)
    report_lost_messages = Query(DayBounds, PricedMessage)
    documents_delivered_count = Query(DayBounds, int)
    report_delivered_ways = Query(DayBounds, DeliveredWay)

    # sql/queries/api.sql: the applications' door (036)
    api_idempotency_lock = Statement(IdempotencyKey)
    api_handed_over = Query(IdempotencyKey, HandedOver)
    api_insert_document = Statement(NewApiDocument)
    api_keep_answer = Statement(KeepAnswer)
    api_person_lock = Statement(PersonKey)
    api_person_by_key = Query(PersonKey, Person)
    api_link_person = Query(LinkPerson, PersonKeyRow)
    api_person_key = Query(ApplicationPerson, PersonKeyRow)
    api_update_person = Query(UpdatePerson, Person)
    api_document = Query(ApplicationDocument, ApiDocument)
    api_document_knocks = Query(ByDocument, DocumentKnock)
    api_document_pricing = Query(ByDocument, MessagePrice)
    api_rate_take = Query(RateTake, dt.datetime)
    api_rate_wait = Query(RateTake, float)
    api_register_endpoint = Statement(ByApplication)
    api_unregister_endpoints = Statement(Applications)
    api_endpoint_gate = Query(EndpointGate, bool)
    api_endpoint_probe_unused = Statement(ByApplication)
    api_listen_events = Statement(NoParams)
    api_claim_events = Query(ClaimEvents, ApiEvent)
    api_events_delivered = Statement(ByIds)
    api_event_failed = Statement(EventFailed)
    api_endpoint_ok = Query(ByApplication, int)
    api_endpoint_failed = Query(EndpointFailed, int)
    api_expire_events = Query(ExpireEvents, str)
    api_forget_events = Statement(OutboxForget)
    api_outbox_state = Query(NoParams, OutboxState)
    api_handovers = Query(NoParams, HandOvers)
    # sql/queries/files.sql: a document's file (037)
    document_file_source = Query(ByDocument, FileSourceRow)
    document_file = Query(ByDocument, StoredFile)
    store_document_file = Query(NewFile, StoredFile)
    document_file_content = Query(FileContent, bytes)
    # the way a document goes (039)
    file_words = Query(ByDocument, FileWords)
    choose_file_way = Query(ChooseFileWay, int)
    forget_file_ledger = Query(ForgetFileLedger, bool)
    document_without_file = Query(ByDocument, int)
    way_summary = Query(Period, WayCount)
    set_outside_window = Query(OutsideWindow, Person)
    # sql/queries/media.sql: a file's media id on a number (037)
    document_media = Query(MediaLookup, MediaState)
    lease_media_upload = Query(MediaLease, uuid.UUID)
    record_media_upload = Query(MediaRecord, str)
    refuse_media_upload = Query(MediaRefusal, int)
    release_media_upload = Query(MediaToken, int)
    drop_media = Query(MediaDrop, str)
    # sql/queries/metrics.sql: the webhook service's /metrics
    metrics_snapshot = Query(NoParams, MetricRow)

    @classmethod
    def declared(cls) -> dict[str, Named]:
        return {name: q for name, q in vars(cls).items() if isinstance(q, Query | Statement)}

    @classmethod
    def load(cls, queries_dir: Path = QUERIES_DIR) -> Queries:
        found = read_queries(sorted(queries_dir.glob("*.sql")))
        declared = cls.declared()
        missing, undeclared = sorted(set(declared) - set(found)), sorted(set(found) - set(declared))
        if missing or undeclared:
            raise ImportError(
                f"sql/queries*.sql and Queries disagree: missing in SQL {missing}, "
                f"not declared in Queries {undeclared}"
            )
        queries = cls()
        for name, query in declared.items():
            setattr(queries, name, query._bound(found[name]))
        return queries

    def __iter__(self) -> Iterator[Named]:
        """Every query, as loaded."""
        return (getattr(self, name) for name in self.declared())


QUERIES = Queries.load()
