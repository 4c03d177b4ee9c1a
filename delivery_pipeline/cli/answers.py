"""What the document commands answer: what will actually happen, not what might.

``documents add`` says when the document goes (now, at the end of the person's
quiet hours, after a pause, after a knock) and which earlier plans it
supersedes; ``documents resend`` and ``approve`` say what became of the
document in the moments after (taken by a listening webhook service, or left
for the heartbeat), whether the poke reached the service or not: the ready
notification wakes a listening service without it.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from delivery_pipeline.model import DocumentState
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, resolve_database_url
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import Document
from delivery_pipeline.watch.outlook import Outlook, outlook

# How long a resend or an approval watches its document before answering: a
# listening webhook service takes a ready document within milliseconds.
WATCH_SECONDS = 3.0
_TAKEN = (DocumentState.DELIVERED, DocumentState.AWAITING_REPLY, DocumentState.ABANDONED)


def added(conn: psycopg.Connection[Any], settings: Settings, doc: Document) -> str:
    """``documents add``'s answer: the document, and when and how it will go."""
    head = f"document {doc.id}: {doc.kind} for person {doc.person_id}"
    seen = outlook(conn, settings, doc.id)
    assert seen is not None  # just added
    earlier = QUERIES.superseded_by.all(conn, {"id": doc.id})
    text = f"{head}, {_plan(seen)}"
    if earlier:
        ids = ", ".join(str(i) for i in earlier)
        text += (
            f"; it supersedes document{'s' if len(earlier) > 1 else ''} {ids} (the same kind "
            "and day, not sent yet), which will not be sent"
        )
    return text


def _plan(seen: Outlook) -> str:
    """How it will go; the first words as they always were ("ready for delivery",
    "awaiting review"), what actually happens after them."""
    row = seen.row
    if seen.state == DocumentState.AWAITING_REVIEW:
        return "awaiting review"
    if row.paused_number is not None:
        return f"ready for delivery, but {seen.why}; next probe {seen.when()}"
    if row.quiet_now_until is not None:
        return (
            f"ready for delivery; it waits for the end of their quiet hours ({row.quiet_hours} "
            f"{row.time_zone}) and goes at {seen.when(row.quiet_now_until)}"
        )
    if not row.window_open:
        return "ready for delivery: their 24 h window is closed, so they get a knock first"
    return "ready for delivery now"


def after_request(settings: Settings, document_id: int, poked: bool) -> str:
    """What became of a document put in the queue (resent, approved): watched for a few
    seconds, then said as it is. ``poked``: the webhook service accepted the poke."""
    url = resolve_database_url(settings.database)
    deadline = time.monotonic() + WATCH_SECONDS
    with connect(url) as conn:
        while True:
            seen = outlook(conn, settings, document_id)
            if seen is None or seen.state in _TAKEN or seen.row.in_flight:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
    asked = "delivery poked" if poked else "no poke (no webhook service took it)"
    if seen is None:
        return asked
    if seen.row.in_flight:
        return f"{asked}; it is being sent now"
    if seen.state in _TAKEN:
        return f"{asked}; {seen.why}"
    if seen.state == DocumentState.UNDELIVERED and seen.until and seen.until <= seen.row.now:
        return (
            f"{asked}; nothing took it within {WATCH_SECONDS:.0f} s: the delivery_heartbeat "
            f"sensor does within {settings.delivery.heartbeat_seconds} s while Dagster runs, "
            f"or `delivery-pipeline sweep --document {document_id}` now"
        )
    return f"{asked}; {seen.why}" + (f" (until {seen.when()})" if seen.until else "")
