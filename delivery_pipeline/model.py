"""The project's vocabulary: the values a document, a person and a sweep use.

Each enum here is the Python side of a CHECK constraint or a ``CASE`` in
``sql/``; ``delivery_pipeline_tests/test_model.py`` reads the SQL and fails
when the two lists differ.
"""

from __future__ import annotations

import enum
import re


class Kind(enum.StrEnum):
    """What a document is (``documents.kind``)."""

    PLAN = "plan"
    DAILY_BRIEF = "daily_brief"


class Locale(enum.StrEnum):
    """The languages people read (``people.locale``)."""

    EN = "en"
    ES = "es"
    PT = "pt"


class Action(enum.StrEnum):
    """What a sweep does with a claimed document (``eligible_documents().action``)."""

    DELIVER = "deliver"
    KNOCK = "knock"
    HOLD_QUIET = "hold_quiet"
    ABANDON_UNREACHABLE = "abandon_unreachable"
    ABANDON_STALE = "abandon_stale"
    ABANDON_SUPERSEDED = "abandon_superseded"  # a newer one of the same kind is ready (025)


class AbandonReason(enum.StrEnum):
    """Why a document will never be sent (``documents.abandon_reason``)."""

    STALE = "stale"
    UNDELIVERABLE = "undeliverable"
    OPTED_OUT = "opted_out"
    MAX_ATTEMPTS = "max_attempts"
    UNKNOWN_OUTCOME = "unknown_outcome"
    UNREACHABLE = "unreachable"
    OPERATOR = "operator"
    REJECTED = "rejected"  # a reviewer said no, with a reason
    SUPERSEDED = "superseded"  # a newer document of the same kind and day, before a part left
    CANCELLED = "cancelled"  # an operator's `documents cancel`


# Reasons that are the system working as intended, not a failure to look at.
EXPECTED_ABANDON_REASONS = frozenset(
    {
        AbandonReason.STALE,
        AbandonReason.OPTED_OUT,
        AbandonReason.OPERATOR,
        AbandonReason.REJECTED,
        AbandonReason.SUPERSEDED,
        AbandonReason.CANCELLED,
    }
)


class ReviewDecision(enum.StrEnum):
    """What a reviewer decided about a document (``documents.review_decision``)."""

    APPROVED = "approved"
    REJECTED = "rejected"


class DocumentState(enum.StrEnum):
    """Where a document is (the ``document_states`` view), each with the part that owns it."""

    PENDING = "pending"
    GENERATING = "generating"
    AWAITING_REVIEW = "awaiting_review"
    UNDELIVERED = "undelivered"
    AWAITING_REPLY = "awaiting_reply"
    KNOCK_HELD = "knock_held"
    QUIET_HOURS = "quiet_hours"
    DELIVERED = "delivered"
    ABANDONED = "abandoned"
    GENERATION_FAILED = "generation_failed"


# The states a document waits in, and who must act for it to leave.
WAITING_STATE_OWNERS: dict[DocumentState, str] = {
    DocumentState.PENDING: "generator",
    DocumentState.GENERATING: "generator",
    DocumentState.AWAITING_REVIEW: "reviewers",
    DocumentState.UNDELIVERED: "delivery",
    DocumentState.AWAITING_REPLY: "the person",
    DocumentState.KNOCK_HELD: "the template",
    DocumentState.QUIET_HOURS: "the clock",
    DocumentState.GENERATION_FAILED: "ops",
}


class OperatorAction(enum.StrEnum):
    """What an operator did to a document (``document_actions.action``, sql/025)."""

    CANCEL = "cancel"
    RESEND = "resend"


class ChunkState(enum.StrEnum):
    """One message of a document in the ledger (``delivery_chunks.state``)."""

    PENDING = "pending"  # cut and stored at the first claim, never fenced
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    UNKNOWN = "unknown"


_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
_PUNCTUATION = re.compile(r"[\s\-().]")


def e164(value: str) -> str | None:
    """``value`` as an E.164 number (``+5511987654321``), or None if it is not one."""
    compact = _PUNCTUATION.sub("", value)
    return compact if _E164.match(compact) else None
