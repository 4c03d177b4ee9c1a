"""What the API takes and answers, as pydantic models: one definition for parsing a
request, building an answer and the OpenAPI description (``openapi.py``), so the
three cannot disagree.

Requests forbid fields they do not know (a misspelt ``replace_kye`` is an
error that names it, not a key silently ignored). Answers are built through
these models, so an answer outside the description cannot leave the service.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from delivery_pipeline.model import EventType, Kind, Locale, Priority
from delivery_pipeline.store.intake import BODY_MAX_CHARACTERS

MAX_ID = 2**63 - 1
KEY_MAX = 200
REASON_MAX = 1000
E164_PATTERN = r"^\+[1-9][0-9]{6,14}$"
BSUID_PATTERN = r"^[A-Z]{2}\.[A-Za-z0-9]{1,128}$"
QUIET_HOURS_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9]$"
LOCAL_TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Answer(BaseModel):
    model_config = ConfigDict(frozen=True)


# ── requests ────────────────────────────────────────────────────────────


class PersonRef(Request):
    """Who the document is for: any of these, all naming the same person. A number or a
    BSUID nobody has yet adds the person, with the defaults (PUT /v1/people/{key} to set
    their locale, time zone, quiet hours)."""

    id: int | None = Field(None, ge=1, le=MAX_ID, description="our id for the person")
    phone: str | None = Field(
        None,
        pattern=E164_PATTERN,
        description="E.164, like +5511987654321",
        examples=["+5511987654321"],
    )
    user_id: str | None = Field(
        None,
        pattern=BSUID_PATTERN,
        description="WhatsApp's business-scoped user id (BSUID), like US.13491208655302741918",
    )
    key: str | None = Field(
        None,
        min_length=1,
        max_length=KEY_MAX,
        description="your own key for the person (your user id)",
    )

    @model_validator(mode="after")
    def _named(self) -> PersonRef:
        if self.id is None and self.phone is None and self.user_id is None and self.key is None:
            raise ValueError("name the person: id, phone, user_id or key")
        return self


class NewDocument(Request):
    """A document to deliver: its text (``body``), or a request to generate it
    (``generate: true``)."""

    person: PersonRef
    kind: Kind = Field(description="plan (asked for) or daily_brief (one per person and day)")
    body: str | None = Field(
        None,
        min_length=1,
        max_length=BODY_MAX_CHARACTERS,
        description="the text, delivered as one or more messages",
    )
    generate: bool = Field(False, description="true: no body; our generator writes it")
    day: dt.date | None = Field(
        None,
        description="the day it is for (a daily_brief without one: the person's today); "
        "replacing goes by replace_key alone, whatever the day",
    )
    priority: Priority = Field(
        Priority.NORMAL,
        description="high: goes with what the person asked for; normal: its kind's place "
        "(a plan before a brief); low: after the person's briefs. A document already "
        "begun is always finished first",
    )
    replace_key: str | None = Field(
        None,
        min_length=1,
        max_length=KEY_MAX,
        description="a newer document for the same person under the same replace_key "
        "replaces this one (whatever its kind or day) if no part of it was sent yet; "
        "without one, a document is never replaced and replaces nothing",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="yours, up to 16 KiB of JSON: returned with the document and its events",
    )


class Brief(Request):
    opt_in: bool | None = Field(None, description="a daily brief every morning")
    local_time: str | None = Field(
        None, pattern=LOCAL_TIME_PATTERN, description="when, HH:MM in their time zone"
    )


class PersonValues(Request):
    """A person as your application says: each value given replaces the stored one; those
    left out stay (a new person starts from the defaults). A number, a user id and a
    business number are set once."""

    phone: str | None = Field(None, pattern=E164_PATTERN, description="E.164")
    user_id: str | None = Field(None, pattern=BSUID_PATTERN, description="BSUID")
    name: str | None = Field(None, max_length=200)
    locale: Locale | None = None
    time_zone: str | None = Field(
        None, max_length=64, description="IANA name, like America/Sao_Paulo"
    )
    brief: Brief | None = None
    quiet_hours: str | None = Field(
        None,
        pattern=QUIET_HOURS_PATTERN,
        description="local HH:MM-HH:MM when nothing is sent (00:00-00:00: none); "
        "null: the deployment's default",
    )
    number: str | None = Field(
        None,
        max_length=64,
        description="the business number (phone number id) they hear from; chosen once",
    )


class ActionRequest(Request):
    reason: str | None = Field(None, max_length=REASON_MAX, description="kept with the action")


# ── answers ─────────────────────────────────────────────────────────────


class PersonOfDocument(Answer):
    id: int
    key: str | None = Field(description="your key for the person, if you gave one")


class Message(Answer):
    """One message sent for the document: a part of its text, or a knock (the template
    that asks the person to write when their 24-hour window is closed)."""

    kind: Literal["part", "knock"]
    part: int | None = Field(description="the part's index (0 first); null for a knock")
    state: str
    sent_at: dt.datetime | None
    delivered_at: dt.datetime | None
    read_at: dt.datetime | None
    failed_at: dt.datetime | None
    error_code: int | None


class Step(Answer):
    """One step of the way the document went."""

    at: dt.datetime
    step: str
    detail: str | None = None


class Cost(Answer):
    messages: int = Field(description="messages the platform priced for this document")
    billable: int
    by_category: dict[str, int] = Field(description="billable messages by pricing category")
    amount: float | None = Field(
        description="their price from the deployment's rate table (DELIVERY_RATE_TABLE); "
        "null without one, or with a message it does not price"
    )


class Times(Answer):
    handed_over_at: dt.datetime
    generated_at: dt.datetime | None
    reviewed_at: dt.datetime | None
    knocked_at: dt.datetime | None
    awaiting_reply_since: dt.datetime | None
    quiet_until: dt.datetime | None
    delivered_at: dt.datetime | None
    read_at: dt.datetime | None
    abandoned_at: dt.datetime | None
    next_attempt_at: dt.datetime | None = Field(
        description="when delivery tries again (undelivered only)"
    )


class Document(Answer):
    """A document you handed over: where it is, who moves it on, the way it went."""

    id: int
    kind: Kind
    day: dt.date | None
    state: str = Field(
        description="pending, generating, generation_failed, awaiting_review, undelivered, "
        "quiet_hours, knock_held, awaiting_reply, delivered or abandoned"
    )
    since: dt.datetime = Field(description="when it entered its state")
    owner: str = Field(description="who moves it on from here")
    abandon_reason: str | None
    last_error: str | None
    attempts: int
    person: PersonOfDocument
    idempotency_key: str | None
    replace_key: str | None
    priority: Priority
    metadata: dict[str, Any]
    times: Times
    way: str | None = Field(
        description="how it reaches the person: parts (text in their window), file (one PDF "
        "on a document template, outside it), file_in_window (one document message), "
        "knock_then_parts or knock_then_file (after a knock they answered); null while "
        "not decided"
    )
    history: list[Step]
    messages: list[Message]
    cost: Cost


class ActionTaken(Answer):
    action: Literal["cancel", "resend"]
    from_state: str
    parts_sent: int = Field(description="parts that had (or may have) reached the person")
    parts: int
    in_flight: bool = Field(description="cancel: a sender was stopped before its next part")
    detail: str
    document: Document


class PersonBrief(Answer):
    opt_in: bool
    local_time: str


class Person(Answer):
    id: int
    key: str
    phone: str | None
    user_id: str | None
    name: str
    locale: Locale
    time_zone: str
    brief: PersonBrief
    quiet_hours: str | None
    number: str = Field(description="the business number they hear from")
    opted_out_at: dt.datetime | None = Field(description="the platform says they stopped us")
    stopped_at: dt.datetime | None = Field(description="they pressed Stop (until Start)")
    created_at: dt.datetime


class FieldProblem(Answer):
    field: str = Field(description="where: a dotted path in the body, or a header's name")
    detail: str


class Problem(Answer):
    """An error, as RFC 9457 problem details (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = Field(None, description="the field at fault, when there is one")
    errors: list[FieldProblem] | None = None
    document_id: int | None = Field(None, description="an idempotency conflict's document")


class Event(Answer):
    """What your endpoint receives (Standard Webhooks: the ``webhook-id`` header is the
    event's id, for deduplication; ``webhook-timestamp``; ``webhook-signature``)."""

    type: EventType
    timestamp: dt.datetime = Field(description="when the event happened")
    data: dict[str, Any] = Field(
        description="document events: document {id, kind, day, idempotency_key, "
        "replace_key, metadata}, person {id, key}, state and its times (delivered_at, "
        "read_at, abandoned_at and reason, since); person.opted_out: person, via "
        "(platform or stop), opted_out_at"
    )
