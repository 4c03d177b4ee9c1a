"""Parameters and rows of ``sql/queries/documents.sql``: documents as an operator reads them."""

import datetime as dt
from typing import NamedTuple, TypedDict


class OutlookQuery(TypedDict):
    ids: list[int] | None
    state: str | None
    person_id: int | None
    kind: str | None
    since: dt.datetime | None
    limit: int
    lease: dt.timedelta
    service_window: dt.timedelta
    quiet_default: str | None
    default_number: str


class DocumentOutlook(NamedTuple):
    """A document's state and the facts of why it waits (``watch/outlook.py``)."""

    id: int
    person_id: int
    person_name: str
    person_address: str | None
    time_zone: str
    quiet_hours: str | None
    kind: str
    for_date: dt.date | None
    created_at: dt.datetime
    state: str
    since: dt.datetime
    abandon_reason: str | None
    status: str
    generation_attempts: int
    generation_error: str | None
    next_generation_at: dt.datetime
    delivery_attempts: int
    last_delivery_error: str | None
    next_attempt_at: dt.datetime
    in_flight: bool
    quiet_until: dt.datetime | None
    quiet_now_until: dt.datetime | None
    window_open: bool
    knock_sent_at: dt.datetime | None
    remind_at: dt.datetime | None
    reminded_at: dt.datetime | None
    knock_held_since: dt.datetime | None
    # Its knock not delivered yet: when the platform drops it (its time to live).
    knock_expires_at: dt.datetime | None
    awaiting_review_since: dt.datetime | None
    delivered_at: dt.datetime | None
    abandoned_at: dt.datetime | None
    paused_number: str | None
    pause_code: int | None
    pause_reason: str | None
    next_probe_at: dt.datetime | None
    superseded_by: int | None
    parts: int
    parts_sent: int
    now: dt.datetime
    # sql/migrations/039: parts, file, file_in_window, knock_then_parts, knock_then_file (None:
    # not decided yet), and a file's document template
    way: str | None
    file_template: str | None
    file_template_language: str | None
