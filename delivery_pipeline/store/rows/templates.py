"""Parameters and rows of ``sql/queries/templates.sql``: knocks and the knock templates'
lifecycle (020)."""

import datetime as dt
from typing import Any, NamedTuple, TypedDict

from psycopg.types.json import Jsonb

from delivery_pipeline.store.rows.common import ByKnock, ClaimRef, DocumentIds, Sample


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
