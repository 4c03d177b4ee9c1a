"""An operator's cancel and resend: one rule under the CLI, the Dagster job and the page.

Both go through the claim (sql/migrations/025, ``sql/queries/operator.sql``). Each runs
in one transaction that locks the document's row first, so what is read, what
is recorded in ``document_actions`` and what is changed agree, and a sender's
claim, fence or finish either committed before (and is seen) or waits for us.

*Cancel* abandons an open document as ``cancelled`` and revokes any claim on
it. A sender in flight holds no lock between its statements; its next fence
(``advance_delivery``) finds the claim gone and it sends nothing more: the
part already in the air is recorded as it lands, and the result says how many
parts had gone out. A pending or generating document is never generated (the
generation claim goes too).

*Resend* puts a delivered or abandoned document back in the queue as new:
every part ``pending`` again under the tag of its next attempt, no attempts,
no knock yet, recorded with the ledger as it was. It is refused while a sender
holds a live claim, so it never races one. It is the only way a person gets a
part twice, and only on purpose; a resent document is never superseded. A
document is resent at most ``DELIVERY_RESENDS_PER_DAY`` times within 24 hours,
whoever asks: the count is read from ``document_actions`` under the row lock,
so the cap holds for every process at once (``ResendLimitReached`` says when
the next may go).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import OperatorAction
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.intake import InputError
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.operator import (
    CancelDocument,
    NewDocumentAction,
    OperatorDocument,
    RecentResends,
    ReopenForResend,
    ResendWindow,
)

OPERATOR_MAX = 200
REASON_MAX = 1000
RESEND_WINDOW = dt.timedelta(hours=24)


class UnknownDocument(InputError):
    """No document has that id."""


class NotApplicable(Exception):
    """The document is in a state the action does not apply to; the message says
    what the operator can do instead."""


class ResendLimitReached(NotApplicable):
    """The document was resent ``DELIVERY_RESENDS_PER_DAY`` times within 24 hours;
    ``retry_at`` is when the oldest of those leaves the window."""

    def __init__(self, document_id: int, resends: int, retry_at: dt.datetime) -> None:
        super().__init__(
            f"document {document_id} was resent {resends} time{'s' if resends != 1 else ''} in "
            "the last 24 hours, the most a day (DELIVERY_RESENDS_PER_DAY): it can be resent "
            f"again at {_when(retry_at)}"
        )
        self.retry_at = retry_at


@dataclass(frozen=True)
class ActionTaken:
    document_id: int
    action: OperatorAction
    operator: str
    at: dt.datetime
    from_state: str
    parts_sent: int  # parts that had (or may have) reached the person before
    parts: int
    in_flight: bool  # cancel: a sender was stopped before its next part

    def __str__(self) -> str:
        if self.action == OperatorAction.CANCEL:
            text = f"document {self.document_id} cancelled (was {self.from_state})"
            if self.in_flight:
                text += f"; its sender stops before the next part ({self._parts} had gone out)"
            elif self.parts_sent:
                text += f"; {self._parts} had gone out"
            return text
        return (
            f"document {self.document_id} queued to be sent again, every part "
            f"(was {self.from_state}, {self._parts} sent before)"
        )

    @property
    def _parts(self) -> str:
        return f"{self.parts_sent} of {self.parts} parts" if self.parts else "no parts"


def _operator(name: str) -> str:
    name = " ".join(name.split())[:OPERATOR_MAX]
    if not name:
        raise InputError("say who acts: give an operator name")
    return name


def _reason(reason: str | None) -> str | None:
    return " ".join((reason or "").split())[:REASON_MAX] or None


def act(
    conn: psycopg.Connection[Any],
    action: OperatorAction,
    document_id: int,
    operator: str,
    reason: str | None,
    delivery: DeliverySettings,
) -> ActionTaken:
    """Cancel an open document (any state before delivered, abandoned or failed), or
    send a delivered or abandoned one again, every part (at most
    ``DELIVERY_RESENDS_PER_DAY`` times within 24 hours)."""
    who, why = _operator(operator), _reason(reason)
    with conn.transaction():
        doc = _locked(conn, document_id, delivery.lease)
        _refuse(action, doc)
        if action == OperatorAction.RESEND:
            recent = QUERIES.recent_resends.one(conn, _window(doc))
            _refuse_over_cap(doc, recent, delivery.resends_per_day)
        at = _record(conn, doc, action, who, why)
        if action == OperatorAction.CANCEL:
            done = QUERIES.cancel_document.one(conn, _cancel_params(doc, who, why))
        else:
            done = QUERIES.reopen_for_resend.one(
                conn, _resend_params(doc, who, why, delivery.lease)
            )
            QUERIES.reset_ledger_for_resend.run(conn, {"document_id": document_id})
        assert done is not None  # the row is locked and its state checked above
    return _taken(doc, action, who, at)


async def act_async(
    conn: psycopg.AsyncConnection[Any],
    action: OperatorAction,
    document_id: int,
    operator: str,
    reason: str | None,
    delivery: DeliverySettings,
) -> ActionTaken:
    """``act`` on an async connection (the review page, the API)."""
    who, why, lease = _operator(operator), _reason(reason), delivery.lease
    async with conn.transaction():
        if await QUERIES.lock_document.one(conn, {"document_id": document_id}) is None:
            raise _unknown(document_id)
        doc = await QUERIES.operator_document.one(
            conn, {"document_id": document_id, "lease": lease}
        )
        assert doc is not None
        _refuse(action, doc)
        if action == OperatorAction.RESEND:
            recent = await QUERIES.recent_resends.one(conn, _window(doc))
            _refuse_over_cap(doc, recent, delivery.resends_per_day)
        row = await QUERIES.record_document_action.one(conn, _action_params(doc, action, who, why))
        assert row is not None
        if action == OperatorAction.CANCEL:
            done = await QUERIES.cancel_document.one(conn, _cancel_params(doc, who, why))
        else:
            done = await QUERIES.reopen_for_resend.one(conn, _resend_params(doc, who, why, lease))
            await QUERIES.reset_ledger_for_resend.run(conn, {"document_id": document_id})
        assert done is not None  # the row is locked and its state checked above
    return _taken(doc, action, who, row.at)


def _refuse(action: OperatorAction, doc: OperatorDocument) -> None:
    """Raise ``NotApplicable`` when ``action`` does not apply to ``doc`` as it is now."""
    n = doc.id
    if action == OperatorAction.CANCEL:
        if doc.delivered_at is not None:
            raise NotApplicable(
                f"document {n} was already delivered at {_when(doc.delivered_at)}: nothing to "
                f"cancel (to send it again: `delivery-pipeline documents resend {n}`)"
            )
        if doc.abandoned_at is not None:
            raise NotApplicable(
                f"document {n} is already abandoned ({doc.abandon_reason}, "
                f"{_when(doc.abandoned_at)}): nothing to cancel"
            )
        if doc.status == "failed":
            raise NotApplicable(
                f"document {n} failed generation and will never be sent: nothing to cancel"
            )
        return
    if doc.in_flight:
        raise NotApplicable(
            f"document {n} is being sent right now: wait for it to finish "
            f"(`delivery-pipeline documents show {n}`), then resend it"
        )
    if doc.abandon_reason == "rejected":
        raise NotApplicable(f"document {n} was rejected by a reviewer: it is never sent")
    if doc.awaiting_review:
        raise NotApplicable(f"document {n} was never approved: a reviewer decides it first")
    if doc.status != "succeeded":
        raise NotApplicable(f"document {n} has no text yet ({doc.state}): nothing to resend")
    if doc.delivered_at is None and doc.abandoned_at is None:
        raise NotApplicable(
            f"document {n} has not been delivered yet ({doc.state}): it is on its way; "
            f"to stop it: `delivery-pipeline documents cancel {n}`"
        )


def _window(doc: OperatorDocument) -> ResendWindow:
    return {"document_id": doc.id, "window": RESEND_WINDOW}


def _refuse_over_cap(doc: OperatorDocument, recent: RecentResends | None, cap: int) -> None:
    """Raise ``ResendLimitReached`` when ``doc`` was resent ``cap`` times in the window."""
    assert recent is not None  # an aggregate: always one row
    if recent.resends >= cap:
        assert recent.oldest is not None
        raise ResendLimitReached(doc.id, recent.resends, recent.oldest + RESEND_WINDOW)


def _cancel_params(doc: OperatorDocument, who: str, why: str | None) -> CancelDocument:
    return {"document_id": doc.id, "why": f"cancelled by {who}" + (f": {why}" if why else "")}


def _resend_params(
    doc: OperatorDocument, who: str, why: str | None, lease: dt.timedelta
) -> ReopenForResend:
    return {
        "document_id": doc.id,
        "why": f"resend requested by {who}" + (f": {why}" if why else ""),
        "lease": lease,
    }


def _unknown(document_id: int) -> UnknownDocument:
    return UnknownDocument(
        f"no document {document_id}: check the id (`delivery-pipeline documents list` lists "
        "them, --person and --state narrow it)"
    )


def _locked(
    conn: psycopg.Connection[Any], document_id: int, lease: dt.timedelta
) -> OperatorDocument:
    if QUERIES.lock_document.one(conn, {"document_id": document_id}) is None:
        raise _unknown(document_id)
    # A statement after the lock reads the newest committed row (READ COMMITTED).
    doc = QUERIES.operator_document.one(conn, {"document_id": document_id, "lease": lease})
    assert doc is not None
    return doc


def _action_params(
    doc: OperatorDocument, action: OperatorAction, operator: str, reason: str | None
) -> NewDocumentAction:
    return {
        "document_id": doc.id,
        "action": action,
        "operator": operator,
        "reason": reason,
        "from_state": doc.state,
        "parts_sent": doc.parts_sent,
        "in_flight": doc.in_flight,
    }


def _record(
    conn: psycopg.Connection[Any],
    doc: OperatorDocument,
    action: OperatorAction,
    operator: str,
    reason: str | None,
) -> dt.datetime:
    row = QUERIES.record_document_action.one(conn, _action_params(doc, action, operator, reason))
    assert row is not None
    return row.at


def _taken(
    doc: OperatorDocument, action: OperatorAction, operator: str, at: dt.datetime
) -> ActionTaken:
    return ActionTaken(
        doc.id, action, operator, at, doc.state, doc.parts_sent, doc.parts, doc.in_flight
    )


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
