"""Every query the project runs, by name, from ``sql/queries/*.sql``, typed.

Each query lives in SQL under a ``-- name: <name>`` header with a line of
purpose; Python runs it as ``QUERIES.<name>`` and never builds SQL from
strings. ``Queries`` declares every name once with its parameter type and
its row type, each from the module of ``store.rows`` named like the query's
file (``core.Claim`` for ``sql/queries/core.sql``) or from ``rows.common``: a
``Query`` returns rows (``one``, ``all``), a ``Statement`` returns none
(``run``). Both run on a sync or an async connection alike::

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
    api,
    checks,
    common,
    core,
    cost,
    documents,
    files,
    generation,
    identity,
    media,
    metrics,
    operator,
    pause,
    record,
    replies,
    report,
    retention,
    review,
    templates,
    webhooks,
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
    # store.rows evaluates its annotations, so a row's own are its fields' types:
    # typing.get_type_hints would only resolve them again, in every process's start-up.
    hints = row.__annotations__
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
    """Every named query with its parameter type and its row type (``store.rows``), by
    the file that holds it."""

    # sql/queries/core.sql: server and migrations
    database_exists = Query(core.ByName, int)
    migrations_lock = Statement(common.NoParams)
    migrations_table = Statement(common.NoParams)
    migrations_applied = Query(common.NoParams, int)
    migrations_record = Statement(core.MigrationRecord)
    # people
    insert_person = Query(core.NewPerson, common.Person)
    set_quiet_hours = Query(core.QuietHours, common.Person)
    person_by_id = Query(common.ById, common.Person)
    person_by_phone = Query(core.ByPhone, common.Person)
    list_people = Query(common.NoParams, common.Person)
    time_zone_is_valid = Query(core.ByTimeZone, bool)
    # documents
    insert_ready_document = Query(core.ReadyDocument, core.Document)
    insert_pending_document = Query(core.PendingDocument, core.Document)
    document_by_id = Query(common.ById, core.Document)
    document_chunks = Query(common.ByDocument, core.Chunk)
    state_summary = Query(common.NoParams, common.StateCount)
    oldest_waiting = Query(common.NoParams, core.OldestWaiting)
    # eligibility and claim
    anything_due = Query(common.NoParams, bool)
    guard_exists = Query(Guard, bool)
    eligible_ids = Query(Eligibility, core.Eligible)
    claim_batch = Query(core.ClaimBatch, core.Claim)
    begin_delivery = Query(core.BeginDelivery, core.LedgerEntry)
    advance_delivery = Query(core.AdvanceDelivery, core.Advance)
    chunk_failed = Statement(core.ChunkFailed)
    release_unknown = Query(core.ReleaseUnknown, bool)
    release_for_retry = Query(core.ReleaseForRetry, int)
    hold_quiet = Query(core.HoldQuiet, bool)
    release_claim = Statement(common.ClaimRef)
    abandon_document = Query(core.AbandonClaimed, int)
    # knock
    reserve_knock = Query(common.ByPerson, core.KnockReservation)
    unreserve_knock = Statement(core.UnreserveKnock)
    await_reply = Query(core.AwaitReply, core.AwaitingReply)
    refuse_window = Statement(core.RefuseWindow)
    person_opted_out = Statement(common.ByPerson)
    raise_last_inbound = Query(core.RaiseLastInbound, dt.datetime)
    wake_awaiting_documents = Query(common.ByPerson, int)
    # sender state
    pause_sender = Query(core.PauseSender, core.Paused)
    sender_row = Statement(core.SenderRow)
    resume_sender = Query(core.ResumeSender, str)
    sender_state = Query(common.NoParams, core.SenderState)
    # the number's shared pacer
    pacer_row = Statement(core.ByPhoneNumber)
    reserve_send_slots = Query(core.ReserveSendSlots, core.SendSlots)
    pacer_state = Query(core.ByPhoneNumber, core.PacerState)
    throttle_pacer = Statement(core.ThrottlePacer)
    # alerts
    alert_lock = Statement(core.ByDedupKey)
    last_alert = Query(core.ByDedupKey, core.LastAlert)
    episode_state = Query(core.ByDedupKey, core.EpisodeState)
    insert_alert = Query(core.NewAlert, core.OpsAlert)
    alert_sent = Statement(common.ById)
    alert_send_failed = Statement(core.AlertSendFailed)
    # ready notifications
    listen_ready = Statement(common.NoParams)
    next_due = Query(common.NoParams, dt.datetime)

    # sql/queries/documents.sql: documents as an operator reads them
    document_outlooks = Query(documents.OutlookQuery, documents.DocumentOutlook)
    superseded_by = Query(common.ById, int)

    # sql/queries/backlog.sql
    backlog_by_state = Query(common.NoParams, common.StateCount)

    # sql/queries/checks.sql
    check_pending = Query(checks.AgedCheck, checks.PendingCheck)
    check_generating = Query(checks.AgedCheck, checks.GeneratingCheck)
    check_undelivered = Query(checks.UndeliveredCheckParams, checks.UndeliveredCheck)
    check_awaiting_review = Query(checks.AgedCheck, checks.AwaitingReviewCheck)
    check_awaiting_reply = Query(common.Sample, checks.AwaitingReplyCheck)
    check_knock_health = Query(checks.KnockHealthParams, checks.KnockHealth)
    check_abandoned_recent = Query(checks.PeriodSample, checks.AbandonedCheck)
    check_tier_usage = Query(common.Sample, checks.TierCheck)
    check_sender_paused = Query(common.Sample, checks.SenderPausedCheck)
    alerts_to_send = Query(checks.AlertsToSend, checks.UnsentAlert)
    alert_poster_lease = Query(checks.AlertPosterLease, bool)
    alert_poster_release = Statement(checks.PosterToken)
    check_delivery_events = Query(checks.AgedCheck, checks.DeliveryEventsCheck)

    # sql/queries/generation.sql
    generation_due = Query(common.NoParams, bool)
    fail_exhausted_generation = Query(generation.MaxAttempts, int)
    claim_generation_batch = Query(generation.ClaimGenerationBatch, generation.GenerationClaim)
    generation_succeeded = Query(generation.GenerationSucceeded, generation.Generated)
    generation_failed = Query(generation.GenerationFailed, str)
    pause_generation = Query(generation.Delay, int)
    person_local_today = Query(common.ByPerson, dt.date)
    brief_due_date = Query(generation.BriefDueDate, dt.date)
    enqueue_daily_briefs = Query(generation.At, generation.EnqueuedBrief)
    abandon_stale_briefs = Query(generation.StaleBriefs, generation.AbandonedBrief)

    # sql/queries/record.sql
    outbox_runs = Query(record.OutboxRuns, str)
    outbox_pending = Query(record.OutboxPending, record.DeliveryEvent)
    outbox_claim_source = Query(record.OutboxClaimSource, record.DeliveryEvent)
    outbox_claim_seen = Query(record.OutboxClaimSeen, record.DeliveryEvent)
    outbox_release = Statement(record.OutboxRelease)
    outbox_reported = Statement(common.ByIds)
    outbox_forget = Statement(common.OutboxForget)
    beat = Query(record.BySource, record.Beat)
    heartbeats = Query(common.NoParams, record.Heartbeat)

    # sql/queries/report.sql
    report_documents = Query(common.DayBounds, report.ReportDocument)
    report_chunks = Query(common.DayBounds, report.ReportChunk)
    report_knocks = Query(common.DayBounds, report.ReportKnock)
    report_abandoned = Query(common.DayBounds, report.ReportAbandoned)
    report_knock_outcomes = Query(common.DayBounds, report.KnockOutcome)
    report_knock_presses = Query(common.DayBounds, report.KnockPresses)

    # sql/queries/retention.sql
    prune_raw_webhooks = Query(retention.PruneBatch, retention.BatchPruned)
    prune_status_events = Query(retention.PruneBatch, retention.BatchPruned)
    prune_inbound_messages = Query(retention.PruneBatch, retention.BatchPruned)
    prune_ops_alerts = Query(retention.PruneBatch, retention.BatchPruned)
    prune_document_files = Query(retention.PruneBatch, retention.BatchPruned)
    retention_oldest = Query(common.NoParams, retention.OldestKept)

    # sql/queries/review.sql
    decide_review = Query(review.DecideReview, review.ReviewDecided)
    document_review = Query(common.ByDocument, review.DocumentReview)
    awaiting_review = Query(review.Limit, review.Waiting)
    review_sign_in_lock = Statement(common.NoParams)
    review_sign_in_state = Query(review.SignInAttempt, review.SignInState)
    record_sign_in_failure = Statement(review.SignInFailure)
    start_review_session = Query(review.StartSession, review.StoredSession)
    review_session = Query(review.ByKeyHash, review.StoredSession)
    end_review_session = Statement(review.ByKeyHash)

    # sql/queries/schema.sql
    schema_catalog = Query(common.NoParams, str)
    defer_function_checks = Statement(common.NoParams)

    # sql/queries/webhooks.sql
    insert_inbound = Query(webhooks.NewInbound, str)
    apply_statuses = Query(webhooks.ApplyStatuses, webhooks.AppliedStatus)
    resume_documents = Statement(common.DocumentIds)
    chunk_by_wamid = Query(webhooks.ByWaMessageId, webhooks.ChunkOwner)
    chunk_by_callback = Query(common.ChunkRef, webhooks.ChunkOwner)
    chunk_refused = Query(webhooks.ChunkRefused, int)
    undeliver_document = Query(webhooks.UndeliverDocument, int)
    abandon_document_async = Query(webhooks.AbandonDocument, int)
    settle_knock = Statement(webhooks.SettleKnock)
    insert_raw_webhook = Query(webhooks.RawWebhook, webhooks.KeptRaw)
    health = Query(common.NoParams, int)

    # sql/queries/pause.sql: the fleet-wide pause
    sender_gate = Query(pause.GateParams, pause.SenderGate)
    probe_document = Query(pause.ProbeRef, int)
    end_probe = Query(pause.EndProbe, dt.datetime)
    may_send = Query(pause.MaySend, pause.SendAllowed)
    resume_sending = Query(pause.ResumeSending, pause.Resumed)
    heartbeat_idle = Query(common.NoParams, pause.HeartbeatIdle)

    # sql/queries/templates.sql: knocks and templates
    template_health = Query(templates.TemplateKeys, templates.TemplateHealth)
    note_template_refused = Statement(templates.TemplateRefused)
    insert_template_event = Query(templates.TemplateEvent, str)
    template_status_event = Statement(templates.TemplateStatusEvent)
    template_quality_event = Statement(templates.TemplateQualityEvent)
    template_category_event = Statement(templates.TemplateCategoryEvent)
    wake_held_knocks = Query(common.NoParams, int)
    template_states = Query(templates.TemplateStatesParams, templates.TemplateState)
    knock_held_by_locale = Query(common.Sample, templates.KnockHeldLocale)
    open_knock = Query(templates.OpenKnock, templates.OpenedKnock)
    knock_accepted = Statement(templates.KnockAccepted)
    knock_refused = Statement(templates.KnockRefused)
    knock_by_status = Query(templates.KnockLookup, templates.KnockRow)
    knock_status = Statement(templates.KnockStatus)
    knock_failed = Query(templates.KnockFailed, int)
    knock_waiting_documents = Query(common.ByKnock, templates.KnockWaiting)
    knock_failure_error = Query(common.ByKnock, templates.KnockFailureError)
    give_back_knock = Statement(common.ByKnock)
    knock_unwait = Query(templates.KnockUnwait, templates.KnockUnwaited)
    hold_knock = Query(templates.HoldKnock, int)
    check_knocks_not_delivered = Query(
        templates.KnocksNotDeliveredParams, templates.KnockNotDelivered
    )

    # sql/queries/operator.sql: an operator's cancel and resend (025)
    lock_document = Query(common.ByDocument, int)
    operator_document = Query(operator.OperatorTarget, operator.OperatorDocument)
    recent_resends = Query(operator.ResendWindow, operator.RecentResends)
    record_document_action = Query(operator.NewDocumentAction, operator.ActionRecorded)
    cancel_document = Query(operator.CancelDocument, int)
    reopen_for_resend = Query(operator.ReopenForResend, int)
    reset_ledger_for_resend = Statement(common.ByDocument)
    document_actions = Query(common.ByDocument, operator.DocumentAction)

    # sql/queries/replies.sql: a reply to a knock (026)
    knock_answered = Query(replies.KnockAnswered, int)
    record_knock_reply = Statement(replies.KnockReply)
    snooze_documents = Query(replies.SnoozeDocuments, dt.datetime)
    stop_knocks = Statement(common.ByPerson)
    start_knocks = Statement(common.ByPerson)
    abandon_stopped_documents = Query(common.ByPerson, int)
    wake_for_reminders = Query(common.NoParams, int)
    abandon_no_reply = Query(replies.NoReplyAfter, int)
    knock_deadline = Statement(replies.KnockDeadline)
    expire_dropped_knocks = Query(replies.ExpireAfter, int)
    part_deadline = Statement(replies.PartDeadline)
    expire_dropped_parts = Query(replies.ExpireAfter, int)
    take_read_mark = Query(replies.TakeReadMark, str)
    owe_acknowledgement = Statement(replies.OweAcknowledgement)
    claim_acknowledgements = Query(replies.ClaimAcknowledgements, replies.AcknowledgementClaim)
    acknowledgement_sent = Statement(replies.AcknowledgementSent)
    acknowledgement_refused = Query(replies.AcknowledgementRefused, int)
    acknowledgement_given_up = Query(replies.AcknowledgementGivenUp, bool)

    # sql/queries/identity.sql: identity without a phone number
    person_by_identity = Query(identity.ByIdentity, common.Person)
    person_by_user_id = Query(identity.ByUserId, common.Person)
    set_person_user_id = Query(identity.PersonUserId, common.Person)
    learn_identity = Query(identity.LearnIdentity, int)
    change_number = Query(identity.ChangeNumber, int)
    change_user_id = Query(identity.ChangeUserId, int)
    identity_changes = Query(common.ByPerson, identity.IdentityChange)

    # sql/queries/cost.sql: what it costs
    record_pricing = Statement(cost.RecordPricing)
    report_priced_messages = Query(common.DayBounds, cost.PricedMessage)
    report_delivered_document_messages = Query(common.DayBounds, cost.PricedMessage)
    report_lost_messages = Query(common.DayBounds, cost.PricedMessage)
    documents_delivered_count = Query(common.DayBounds, int)
    report_delivered_ways = Query(common.DayBounds, cost.DeliveredWay)

    # sql/queries/api.sql: the applications' door (036)
    api_idempotency_lock = Statement(api.IdempotencyKey)
    api_handed_over = Query(api.IdempotencyKey, api.HandedOver)
    api_insert_document = Statement(api.NewApiDocument)
    api_keep_answer = Statement(api.KeepAnswer)
    api_person_lock = Statement(api.PersonKey)
    api_person_by_key = Query(api.PersonKey, common.Person)
    api_link_person = Query(api.LinkPerson, api.PersonKeyRow)
    api_person_key = Query(api.ApplicationPerson, api.PersonKeyRow)
    api_update_person = Query(api.UpdatePerson, common.Person)
    api_document = Query(api.ApplicationDocument, api.ApiDocument)
    api_document_knocks = Query(common.ByDocument, api.DocumentKnock)
    api_document_pricing = Query(common.ByDocument, api.MessagePrice)
    api_rate_take = Query(api.RateTake, dt.datetime)
    api_rate_wait = Query(api.RateTake, float)
    api_register_endpoint = Statement(api.ByApplication)
    api_unregister_endpoints = Statement(api.Applications)
    api_endpoint_gate = Query(api.EndpointGate, bool)
    api_endpoint_probe_unused = Statement(api.ByApplication)
    api_listen_events = Statement(common.NoParams)
    api_claim_events = Query(api.ClaimEvents, api.ApiEvent)
    api_events_delivered = Statement(common.ByIds)
    api_event_failed = Statement(api.EventFailed)
    api_endpoint_ok = Query(api.ByApplication, int)
    api_endpoint_failed = Query(api.EndpointFailed, int)
    api_expire_events = Query(api.ExpireEvents, str)
    api_forget_events = Statement(common.OutboxForget)
    api_outbox_state = Query(common.NoParams, api.OutboxState)
    api_handovers = Query(common.NoParams, api.HandOvers)

    # sql/queries/files.sql: a document's file (037)
    document_file_source = Query(common.ByDocument, files.FileSourceRow)
    document_file = Query(common.ByDocument, files.StoredFile)
    store_document_file = Query(files.NewFile, files.StoredFile)
    document_file_content = Query(files.FileContent, bytes)
    # the way a document goes (039)
    file_words = Query(common.ByDocument, files.FileWords)
    choose_file_way = Query(files.ChooseFileWay, int)
    forget_file_ledger = Query(files.ForgetFileLedger, bool)
    document_without_file = Query(common.ByDocument, int)
    way_summary = Query(files.Period, files.WayCount)
    set_outside_window = Query(files.OutsideWindow, common.Person)

    # sql/queries/media.sql: a file's media id on a number (037)
    document_media = Query(media.MediaLookup, media.MediaState)
    lease_media_upload = Query(media.MediaLease, uuid.UUID)
    record_media_upload = Query(media.MediaRecord, str)
    refuse_media_upload = Query(media.MediaRefusal, int)
    release_media_upload = Query(media.MediaToken, int)
    drop_media = Query(media.MediaDrop, str)

    # sql/queries/metrics.sql: the webhook service's /metrics
    metrics_snapshot = Query(common.NoParams, metrics.MetricRow)

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
                f"sql/queries/*.sql and Queries disagree: missing in SQL {missing}, "
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
