"""A document as an operator reads it: its state, who owns it, why it waits and until when.

The state is the ``document_states`` view's (the one definition); the owner is
``model.WAITING_STATE_OWNERS``'; why and until when are read from the facts
``document_outlooks`` gathers in one statement (its retry, its claim, the
person's window and quiet hours, the pause of its sender, its knock, a newer
document superseding it). ``documents show`` leads with it, ``documents list``
is a table of it, and ``documents add`` and ``resend`` answer with it what will
actually happen. No Dagster here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import psycopg

from delivery_pipeline.model import WAITING_STATE_OWNERS, DocumentState
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.documents import DocumentOutlook
from delivery_pipeline.watch.ages import format_age

NOBODY = "nobody (done)"


@dataclass(frozen=True)
class Outlook:
    """One document's state, its owner, why it waits, and until when (None: no time
    is set: someone must act, or it is done)."""

    row: DocumentOutlook
    owner: str
    why: str
    until: dt.datetime | None

    @property
    def state(self) -> str:
        return self.row.state

    def when(self, at: dt.datetime | None = None) -> str:
        """``until`` as an operator reads it: UTC, the person's local time, and how soon."""
        at = at or self.until
        if at is None:
            return "-"
        return when(at, self.row.time_zone, self.row.now)

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "owner": self.owner,
            "since": self.row.since.isoformat(),
            "why": self.why,
            "until": self.until.isoformat() if self.until else None,
            "way": self.row.way,
        }


def when(at: dt.datetime, time_zone: str, now: dt.datetime) -> str:
    """'2026-03-02 11:00 UTC (08:00 America/Sao_Paulo, in 9h 57m)'."""
    local = at.astimezone(ZoneInfo(time_zone))
    seconds = (at - now).total_seconds()
    soon = f"in {format_age(seconds, precise=True)}" if seconds > 0 else "due now"
    where = f"{local:%H:%M} {time_zone}, " if time_zone != "UTC" else ""
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC ({where}{soon})"


def outlooks(
    conn: psycopg.Connection[Any],
    settings: Settings,
    *,
    ids: list[int] | None = None,
    state: str | None = None,
    person_id: int | None = None,
    kind: str | None = None,
    since: dt.datetime | None = None,
    limit: int = 50,
) -> list[Outlook]:
    """The documents that match, newest first, each with its outlook."""
    delivery = settings.delivery
    rows = QUERIES.document_outlooks.all(
        conn,
        {
            "ids": ids,
            "state": state,
            "person_id": person_id,
            "kind": kind,
            "since": since,
            "limit": limit,
            "lease": delivery.lease,
            "service_window": delivery.window,
            "quiet_default": delivery.quiet_hours or None,
            "default_number": settings.whatsapp.phone_number_id,
        },
    )
    return [
        explain(
            row,
            no_reply_seconds=delivery.no_reply_seconds,
            ttl_grace_seconds=delivery.template_ttl_grace_seconds,
        )
        for row in rows
    ]


def outlook(conn: psycopg.Connection[Any], settings: Settings, document_id: int) -> Outlook | None:
    found = outlooks(conn, settings, ids=[document_id], limit=1)
    return found[0] if found else None


def explain(
    d: DocumentOutlook, *, no_reply_seconds: float, ttl_grace_seconds: float = 600.0
) -> Outlook:
    """Why ``d`` waits and until when, from its state and the facts read with it."""
    state = DocumentState(d.state)
    owner = WAITING_STATE_OWNERS.get(state, NOBODY)
    if state is DocumentState.UNDELIVERED:
        return _undelivered(d, owner)
    if state is DocumentState.PENDING:
        tried = f" (attempt {d.generation_attempts + 1}; last error: {d.generation_error})"
        why = "waiting to be generated" + (tried if d.generation_attempts else "")
        return Outlook(d, owner, why, d.next_generation_at)
    if state is DocumentState.GENERATING:
        return Outlook(d, owner, f"being generated (attempt {d.generation_attempts})", None)
    if state is DocumentState.GENERATION_FAILED:
        why = f"generation failed for good ({d.generation_error}): it is never sent"
        return Outlook(d, owner, why, None)
    if state is DocumentState.AWAITING_REVIEW:
        why = "waiting for a reviewer to approve or reject it (the review page, or "
        why += "`delivery-pipeline documents approve|reject ID`)"
        return Outlook(d, owner, why, None)
    if state is DocumentState.QUIET_HOURS:
        why = f"the person's quiet hours ({d.quiet_hours} {d.time_zone}): it goes out when "
        return Outlook(d, owner, why + "they end", d.quiet_until)
    if state is DocumentState.KNOCK_HELD:
        why = f"its knock waits: {d.last_delivery_error or 'no knock template can be used'}"
        return Outlook(d, owner, why + "; looked at again", d.next_attempt_at)
    if state is DocumentState.AWAITING_REPLY:
        return _awaiting_reply(d, owner, no_reply_seconds, ttl_grace_seconds)
    if state is DocumentState.DELIVERED:
        parts = f"{d.parts_sent} of {d.parts} parts" if d.parts else "every part"
        assert d.delivered_at is not None
        return Outlook(
            d, owner, f"delivered at {d.delivered_at:%Y-%m-%d %H:%M:%S %Z} ({parts})", None
        )
    error = f"; last error: {d.last_delivery_error}" if d.last_delivery_error else ""
    return Outlook(d, owner, f"abandoned ({d.abandon_reason}): it is never sent{error}", None)


def _undelivered(d: DocumentOutlook, owner: str) -> Outlook:
    if d.in_flight:
        return Outlook(d, owner, "being sent right now", None)
    if d.superseded_by is not None:
        why = (
            f"superseded by document {d.superseded_by} (newer, of the same kind and day): "
            "abandoned at its next claim, never sent"
        )
        return Outlook(d, owner, why, None)
    if d.paused_number is not None:
        who = "every sender" if d.paused_number == "*" else f"business number {d.paused_number}"
        why = (
            f"sending is paused for {who} (code {d.pause_code}: {d.pause_reason}): it goes "
            "out when a probe succeeds or after `delivery-pipeline resume`"
        )
        return Outlook(d, owner, why, d.next_probe_at)
    if d.next_attempt_at > d.now:
        error = f": {d.last_delivery_error}" if d.last_delivery_error else ""
        attempt = f"attempt {d.delivery_attempts + 1}"
        return Outlook(d, owner, f"waiting to retry ({attempt}){error}", d.next_attempt_at)
    if d.quiet_now_until is not None:
        why = f"the person's quiet hours ({d.quiet_hours} {d.time_zone}): it goes out when they end"
        return Outlook(d, owner, why, d.quiet_now_until)
    how = "delivers it" if d.window_open else "knocks first (their 24 h window is closed)"
    return Outlook(d, owner, f"due now: the next sweep {how}", d.next_attempt_at)


def _awaiting_reply(
    d: DocumentOutlook, owner: str, no_reply_seconds: float, ttl_grace_seconds: float
) -> Outlook:
    knocked = f"{d.knock_sent_at:%Y-%m-%d %H:%M %Z}" if d.knock_sent_at else "earlier"
    why = f"knocked at {knocked}; waits for the person's reply"
    if d.knock_expires_at is not None and d.kind == "daily_brief":
        # Not delivered yet: past its time to live the platform drops the knock.
        expires = d.knock_expires_at + dt.timedelta(seconds=ttl_grace_seconds)
        return Outlook(
            d, owner, why + "; its knock is not delivered yet: expired if not by then", expires
        )
    if d.reminded_at is None and d.remind_at is not None:
        return Outlook(d, owner, why + "; one reminder", d.remind_at)
    if d.reminded_at is not None:
        expires = d.reminded_at + dt.timedelta(seconds=no_reply_seconds)
        return Outlook(d, owner, why + "; reminded, then abandoned no_reply", expires)
    return Outlook(d, owner, why, None)
