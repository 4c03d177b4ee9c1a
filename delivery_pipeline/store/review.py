"""Review before delivery: the one rule under every way a reviewer decides.

A document of a kind listed in ``DELIVERY_REVIEW_KINDS`` waits in
``awaiting_review`` (owner: reviewers) once its body is stored. The CLI
(``documents approve|reject``), the Dagster job ``review_document`` and the
review page all build a ``Decision`` and hand it to ``decide``, which runs one
conditional UPDATE (``decide_review`` in ``sql/queries/review.sql``). Of two
reviewers acting at once exactly one gets ``Decided``; the other gets
``AlreadyDecided``, naming who decided and when. Decisions are final, so
reading the row after an UPDATE that matched nothing tells the truth.

Approved: the document enters the delivery queue, due now, and is delivered
from the edited text when there is one (``delivery_body()``, sql/migrations/010).
Rejected: abandoned as ``rejected``, with the reason. Callers poke delivery
after an approval; this module only decides.

The review page's sign-ins and sessions are rows too (sql/migrations/015), so every
replica agrees: ``attempt_sign_in`` checks a token under the sign-in limits,
``live_session`` and ``end_session`` read and end a session.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import ReviewDecision
from delivery_pipeline.store.intake import InputError, check_body
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.review import (
    DecideReview,
    DocumentReview,
    NewSession,
    ReviewDecided,
    SignInAttempt,
    SignInState,
    StoredSession,
    Waiting,
)

REVIEWER_MAX = 200
REASON_MAX = 1000


def _text(value: str | None) -> str:
    """Text as a reviewer meant it: browsers send CRLF line ends, files may too."""
    return (value or "").replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class Decision:
    """One reviewer's decision about one document, checked before it reaches the database."""

    document_id: int
    verdict: ReviewDecision
    reviewer: str
    reason: str | None = None
    body: str | None = None

    @classmethod
    def approve(
        cls, document_id: int, reviewer: str, *, body: str | None = None, note: str | None = None
    ) -> Decision:
        """Approve as generated, or with ``body`` (the edit) instead."""
        edited = None
        if body is not None:
            edited = _text(body)
            if not edited.strip():
                raise InputError("the edited text is empty: approve without an edit, or reject")
            check_body(edited, "the edited text")
        return cls(
            document_id,
            ReviewDecision.APPROVED,
            _reviewer(reviewer),
            _text(note).strip()[:REASON_MAX] or None,
            edited,
        )

    @classmethod
    def reject(cls, document_id: int, reviewer: str, reason: str) -> Decision:
        why = _text(reason).strip()
        if not why:
            raise InputError("a rejection needs a reason (it is kept with the document)")
        return cls(document_id, ReviewDecision.REJECTED, _reviewer(reviewer), why[:REASON_MAX])

    def params(self) -> DecideReview:
        return {
            "document_id": self.document_id,
            "decision": self.verdict,
            "reviewer": self.reviewer,
            "reason": self.reason,
            "body": self.body,
        }


def _reviewer(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise InputError("say who is reviewing (a name)")
    return cleaned[:REVIEWER_MAX]


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Decided:
    """This decision was taken."""

    document_id: int
    person_id: int
    decision: ReviewDecision
    reviewer: str
    at: dt.datetime

    def __str__(self) -> str:
        return f"document {self.document_id} {self.decision} by {self.reviewer}"


@dataclass(frozen=True)
class AlreadyDecided:
    """Another reviewer decided first; this decision was not taken."""

    document_id: int
    decision: ReviewDecision
    reviewer: str
    at: dt.datetime

    def __str__(self) -> str:
        return (
            f"document {self.document_id} was already {self.decision} by {self.reviewer} "
            f"at {_when(self.at)}"
        )


@dataclass(frozen=True)
class NotAwaitingReview:
    """The document does not wait for a reviewer (``exists``: there is such a document)."""

    document_id: int
    why: str
    exists: bool = True

    def __str__(self) -> str:
        return self.why


ReviewOutcome = Decided | AlreadyDecided | NotAwaitingReview


def _decided(row: ReviewDecided) -> Decided:
    return Decided(row.id, row.person_id, row.review_decision, row.reviewed_by, row.reviewed_at)


def explain(document_id: int, row: DocumentReview | None) -> AlreadyDecided | NotAwaitingReview:
    """Why a decision about ``document_id`` matched nothing, from its ``document_review`` row."""
    if row is None:
        return NotAwaitingReview(document_id, f"no document {document_id}", exists=False)
    if row.review_decision is not None:
        assert row.reviewed_by is not None and row.reviewed_at is not None  # recorded whole
        return AlreadyDecided(document_id, row.review_decision, row.reviewed_by, row.reviewed_at)
    if row.abandoned_at is not None:
        return NotAwaitingReview(
            document_id,
            f"document {document_id} was abandoned ({row.abandon_reason}) at "
            f"{_when(row.abandoned_at)}: it will not be delivered",
        )
    if row.status != "succeeded":
        return NotAwaitingReview(
            document_id, f"document {document_id} is not generated yet ({row.status})"
        )
    if row.delivered_at is not None:
        return NotAwaitingReview(
            document_id,
            f"document {document_id} was delivered at {_when(row.delivered_at)} "
            "without review (its kind was not in DELIVERY_REVIEW_KINDS when it became ready)",
        )
    return NotAwaitingReview(
        document_id,
        f"document {document_id} does not await review: its kind ({row.kind}) was not in "
        "DELIVERY_REVIEW_KINDS when it became ready, and it is with delivery",
    )


def decide(conn: psycopg.Connection[Any], decision: Decision) -> ReviewOutcome:
    """Take ``decision`` if the document still awaits review (an autocommit connection)."""
    row = QUERIES.decide_review.one(conn, decision.params())
    if row is not None:
        return _decided(row)
    state = QUERIES.document_review.one(conn, {"document_id": decision.document_id})
    return explain(decision.document_id, state)


async def decide_async(conn: psycopg.AsyncConnection[Any], decision: Decision) -> ReviewOutcome:
    """``decide`` on an async connection (the review page)."""
    row = await QUERIES.decide_review.one(conn, decision.params())
    if row is not None:
        return _decided(row)
    state = await QUERIES.document_review.one(conn, {"document_id": decision.document_id})
    return explain(decision.document_id, state)


def awaiting_review(conn: psycopg.Connection[Any], limit: int = 50) -> list[Waiting]:
    """The oldest documents awaiting review, oldest first."""
    return QUERIES.awaiting_review.all(conn, {"limit": limit})


async def awaiting_review_async(
    conn: psycopg.AsyncConnection[Any], limit: int = 50
) -> list[Waiting]:
    return await QUERIES.awaiting_review.all(conn, {"limit": limit})


# ── the review page's sign-ins and sessions (sql/migrations/015) ───────────────────


@dataclass(frozen=True)
class SignInLimits:
    """How many wrong tokens are checked before a client, or every new client, waits.

    Counted over a sliding window, in Postgres (every replica counts the same
    failures). A client that signed in within ``known_days`` is held only by
    its own limit: an attacker cannot lock the reviewers out from elsewhere,
    and cannot become known without the token.
    """

    client_failures: int = 10
    failures: int = 100
    window_seconds: int = 15 * 60
    known_days: int = 30

    def params(self, client: str) -> SignInAttempt:
        return {
            "client": client,
            "client_limit": self.client_failures,
            "overall_limit": self.failures,
            "window": dt.timedelta(seconds=self.window_seconds),
            "known_for": dt.timedelta(days=self.known_days),
        }


class HoldScope(enum.StrEnum):
    CLIENT = "client"  # this client sent too many wrong tokens
    EVERYONE = "everyone"  # too many from all clients: those not known wait


@dataclass(frozen=True)
class Held:
    """No token is checked until ``until``: answered 429, ``Retry-After``."""

    until: dt.datetime
    scope: HoldScope
    now: dt.datetime

    @property
    def retry_after_seconds(self) -> int:
        return max(1, math.ceil((self.until - self.now).total_seconds()))


@dataclass(frozen=True)
class WrongToken:
    """The token was checked and is not the reviewers'; counted."""


@dataclass(frozen=True)
class NameRequired:
    """The token was right but says nobody's name (the shared one), and none was given:
    no session, nothing counted."""


def held(state: SignInState) -> Held | None:
    """Whether an attempt in ``state`` (``review_sign_in_state``) waits, until when, why."""
    now = state.now
    holds = []
    if state.client_held_until is not None and state.client_held_until > now:
        holds.append((state.client_held_until, HoldScope.CLIENT))
    strangers = state.strangers_held_until
    if not state.known and strangers is not None and strangers > now:
        holds.append((strangers, HoldScope.EVERYONE))
    if not holds:
        return None
    until, scope = max(holds)
    return Held(until, scope, now)


async def attempt_sign_in(
    conn: psycopg.AsyncConnection[Any],
    client: str,
    limits: SignInLimits,
    check: Callable[[], NewSession | WrongToken | NameRequired],
) -> Held | WrongToken | NameRequired | StoredSession:
    """One sign-in attempt from ``client``: held (the token is not even checked), a wrong
    token (counted), a right one without a name, or the session ``check`` returns
    (``key_hash``, ``reviewer``, ``operator``, ``csrf``, ``lifetime``) started. One
    transaction under one lock for every replica, so the limits are exact however a
    burst is spread."""
    params = limits.params(client)
    async with conn.transaction():
        await QUERIES.review_sign_in_lock.run(conn, {})
        state = await QUERIES.review_sign_in_state.one(conn, params)
        assert state is not None
        waiting = held(state)
        if waiting is not None:
            return waiting
        checked = check()
        if isinstance(checked, WrongToken):
            await QUERIES.record_sign_in_failure.run(conn, params)
            return checked
        if isinstance(checked, NameRequired):
            return checked
        stored = await QUERIES.start_review_session.one(
            conn, {**checked, "client": client, "known_for": params["known_for"]}
        )
        assert stored is not None
        return stored


async def live_session(conn: psycopg.AsyncConnection[Any], key_hash: bytes) -> StoredSession | None:
    return await QUERIES.review_session.one(conn, {"key_hash": key_hash})


async def end_session(conn: psycopg.AsyncConnection[Any], key_hash: bytes) -> None:
    await QUERIES.end_review_session.run(conn, {"key_hash": key_hash})
