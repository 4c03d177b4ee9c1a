"""Parameters and rows of ``sql/queries/checks.sql``: the ops checks, one per waiting
state, and the alerts they post."""

import datetime as dt
import uuid
from typing import Any, NamedTuple, TypedDict

from delivery_pipeline.model import Action
from delivery_pipeline.settings.eligibility import Eligibility
from delivery_pipeline.store.rows.common import Sample


class AgedCheck(Sample):
    """A waiting state's check: its thresholds."""

    warn: dt.timedelta
    error: dt.timedelta


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
