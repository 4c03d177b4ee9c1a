"""What the store says of a document or a person, as the API answers it (``schemas``).

The way a document went is read from what the tables keep for good (its own
times, its knocks, its parts, the operators' actions), not from the outboxes,
which forget what they have delivered.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Literal, Protocol

from delivery_pipeline.model import WAITING_STATE_OWNERS, DocumentState, Kind, Locale, Priority
from delivery_pipeline.reports.rates import RateTable
from delivery_pipeline.service.api import schemas
from delivery_pipeline.store.application_documents import DocumentRecord
from delivery_pipeline.store.rows.common import Person

# Who moves a document on from each state (docs/reference/lifecycle.md).
OWNERS: dict[str, str] = {
    **{state.value: owner for state, owner in WAITING_STATE_OWNERS.items()},
    DocumentState.DELIVERED.value: "nobody (done)",
    DocumentState.ABANDONED.value: "ops",
}


def document(record: DocumentRecord, rates: RateTable | None) -> schemas.Document:
    d = record.document
    read_at = _read_at(record)
    return schemas.Document(
        id=d.id,
        kind=Kind(d.kind),
        day=d.for_date,
        state=d.state,
        since=d.since,
        owner=OWNERS.get(d.state, "delivery"),
        abandon_reason=d.abandon_reason,
        last_error=d.last_delivery_error,
        attempts=d.delivery_attempts,
        person=schemas.PersonOfDocument(id=d.person_id, key=d.person_key),
        idempotency_key=d.idempotency_key,
        replace_key=d.replace_key,
        priority=Priority(d.priority),
        metadata=d.metadata,
        times=schemas.Times(
            handed_over_at=d.handed_over_at,
            generated_at=d.generated_at,
            reviewed_at=d.reviewed_at,
            knocked_at=d.knock_sent_at,
            awaiting_reply_since=d.awaiting_reply_since,
            quiet_until=d.quiet_until,
            delivered_at=d.delivered_at,
            read_at=read_at,
            abandoned_at=d.abandoned_at,
            next_attempt_at=d.next_attempt_at if d.state == "undelivered" else None,
        ),
        way=d.way,
        history=_history(record, read_at),
        messages=_messages(record),
        cost=_cost(record, rates),
    )


def _read_at(record: DocumentRecord) -> dt.datetime | None:
    """Read once its last part is (reading the chat shows every part before it)."""
    if record.document.delivered_at is None or not record.parts:
        return None
    return record.parts[-1].read_at


def _history(record: DocumentRecord, read_at: dt.datetime | None) -> list[schemas.Step]:
    d = record.document
    steps: list[tuple[dt.datetime | None, str, str | None]] = [
        (d.handed_over_at, "handed_over", None),
        (d.generated_at, "generated", None),
        (d.reviewed_at, f"review_{d.review_decision}", None),
        (min((p.sent_at for p in record.parts if p.sent_at), default=None), "sending", None),
        (d.awaiting_reply_since, "awaiting_reply", None),
        (d.delivered_at, "delivered", None),
        (read_at, "read", None),
        (d.abandoned_at, "abandoned", d.abandon_reason),
    ]
    for knock in record.knocks:
        what = "reminder" if knock.reminder else "knock"
        steps.append((knock.sent_at, f"{what}_sent", f"{knock.template} ({knock.language})"))
        steps.append((knock.failed_at, f"{what}_failed", _code(knock.error_code)))
    for action in record.actions:
        said = f"by {action.operator}" + (f": {action.reason}" if action.reason else "")
        steps.append((action.at, action.action, said))
    shown = [schemas.Step(at=at, step=step, detail=detail) for at, step, detail in steps if at]
    return sorted(shown, key=lambda step: step.at)


def _code(code: int | None) -> str | None:
    return None if code is None else f"error {code}"


class _Sent(Protocol):
    """A message's course as the platform reported it: a knock's, or a part's."""

    @property
    def state(self) -> str: ...
    @property
    def sent_at(self) -> dt.datetime | None: ...
    @property
    def delivered_at(self) -> dt.datetime | None: ...
    @property
    def read_at(self) -> dt.datetime | None: ...
    @property
    def failed_at(self) -> dt.datetime | None: ...
    @property
    def error_code(self) -> int | None: ...


def _messages(record: DocumentRecord) -> list[schemas.Message]:
    knocks = [_message("knock", None, k) for k in record.knocks]
    return knocks + [_message("part", p.chunk_index, p) for p in record.parts]


def _message(kind: Literal["part", "knock"], part: int | None, sent: _Sent) -> schemas.Message:
    return schemas.Message(
        kind=kind,
        part=part,
        state=sent.state,
        sent_at=sent.sent_at,
        delivered_at=sent.delivered_at,
        read_at=sent.read_at,
        failed_at=sent.failed_at,
        error_code=sent.error_code,
    )


def _cost(record: DocumentRecord, rates: RateTable | None) -> schemas.Cost:
    billable = [m for m in record.pricing if m.billable]
    prices = [rates.price(m.category, m.country) for m in billable] if rates else []
    amount = (
        round(sum(p for p in prices if p is not None), 6)
        if rates is not None and all(p is not None for p in prices)
        else None
    )
    return schemas.Cost(
        messages=len(record.pricing),
        billable=len(billable),
        by_category=dict(Counter(m.category or "unknown" for m in billable)),
        amount=amount,
    )


def person(row: Person, key: str, default_number: str) -> schemas.Person:
    return schemas.Person(
        id=row.id,
        key=key,
        phone=row.phone,
        user_id=row.user_id,
        name=row.name,
        locale=Locale(row.locale),
        time_zone=row.time_zone,
        brief=schemas.PersonBrief(
            opt_in=row.brief_opt_in, local_time=row.brief_local_time.strftime("%H:%M")
        ),
        quiet_hours=row.quiet_hours,
        number=row.phone_number_id or default_number,
        opted_out_at=row.opted_out_at,
        stopped_at=row.knocks_stopped_at,
        created_at=row.created_at,
    )
