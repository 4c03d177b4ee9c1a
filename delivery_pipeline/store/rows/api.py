"""Parameters and rows of ``sql/queries/api.sql``: the applications' door (036)."""

import datetime as dt
import uuid
from typing import Any, NamedTuple, TypedDict

from psycopg.types.json import Jsonb

from delivery_pipeline.model import Kind
from delivery_pipeline.store.rows.common import ByDocument, ByPerson


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
