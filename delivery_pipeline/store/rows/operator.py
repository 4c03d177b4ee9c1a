"""Parameters and rows of ``sql/queries/operator.sql``: an operator's cancel and resend (025)."""

import datetime as dt
from typing import NamedTuple, TypedDict

from delivery_pipeline.model import Kind
from delivery_pipeline.store.rows.common import ByDocument


class OperatorTarget(TypedDict):
    document_id: int
    lease: dt.timedelta


class CancelDocument(ByDocument):
    why: str


class ReopenForResend(ByDocument):
    why: str
    lease: dt.timedelta


class NewDocumentAction(ByDocument):
    action: str
    operator: str
    reason: str | None
    from_state: str
    parts_sent: int
    in_flight: bool


class OperatorDocument(NamedTuple):
    """A document as an operator acts on it (``operator_document``)."""

    id: int
    person_id: int
    kind: Kind
    state: str
    status: str
    delivered_at: dt.datetime | None
    abandoned_at: dt.datetime | None
    abandon_reason: str | None
    awaiting_review: bool
    in_flight: bool  # a sender holds a live claim
    parts_sent: int  # parts that may have reached the person (sent, sending, unknown)
    parts: int  # parts in the ledger (0 before the first claim)


class ResendWindow(ByDocument):
    window: dt.timedelta


class RecentResends(NamedTuple):
    """A document's resends within the cap's window (``recent_resends``)."""

    resends: int
    oldest: dt.datetime | None


class ActionRecorded(NamedTuple):
    id: int
    at: dt.datetime


class DocumentAction(NamedTuple):
    """One operator action on a document (``document_actions``)."""

    id: int
    action: str
    operator: str
    reason: str | None
    at: dt.datetime
    from_state: str
    parts_sent: int
    in_flight: bool
