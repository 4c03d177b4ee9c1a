"""Parameters and rows of ``sql/queries/generation.sql``: the generator's claim and the
daily briefs."""

import datetime as dt
import uuid
from typing import NamedTuple, TypedDict

from delivery_pipeline.model import Kind


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
