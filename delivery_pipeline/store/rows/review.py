"""Parameters and rows of ``sql/queries/review.sql``: review before delivery, the
reviewers' sign-ins and sessions."""

import datetime as dt
from typing import NamedTuple, TypedDict

from delivery_pipeline.model import ReviewDecision
from delivery_pipeline.store.rows.common import ByDocument


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
