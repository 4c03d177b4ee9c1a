"""Shapes the queries of several ``sql/queries/*.sql`` files share (the other modules
here import them; this one imports none of them)."""

import datetime as dt
import uuid
from typing import NamedTuple, TypedDict


class NoParams(TypedDict):
    """A query without parameters: call it with ``{}``."""


class ById(TypedDict):
    id: int


class ByPerson(TypedDict):
    person_id: int


class ByDocument(TypedDict):
    document_id: int


class ClaimRef(TypedDict):
    """A write fenced by the delivery claim: the document and our claim token."""

    document_id: int
    token: uuid.UUID


class ChunkRef(TypedDict):
    """One chunk's current send attempt (its callback tag)."""

    document_id: int
    chunk_index: int
    callback_data: str


class Sample(TypedDict):
    """How many of the oldest rows a check lists."""

    sample: int


class DayBounds(TypedDict):
    """One report day, ``[start, end)``."""

    start: dt.datetime
    end: dt.datetime


class ByIds(TypedDict):
    ids: list[int]


class OutboxForget(TypedDict):
    keep: dt.timedelta
    limit: int


class DocumentIds(TypedDict):
    document_ids: list[int]


class ByKnock(TypedDict):
    knock_id: int


class Person(NamedTuple):
    """A ``people`` row."""

    id: int
    phone: str | None
    name: str
    locale: str
    time_zone: str
    brief_opt_in: bool
    brief_local_time: dt.time
    opted_out_at: dt.datetime | None
    last_inbound_at: dt.datetime | None
    last_knock_at: dt.datetime | None
    window_refused_at: dt.datetime | None
    created_at: dt.datetime
    quiet_hours: str | None
    # sql/migrations/022: a business-scoped user id (BSUID), and the username shown with it
    user_id: str | None
    username: str | None
    # sql/migrations/026: the person pressed Stop (no knocks, no briefs) until they write Start
    knocks_stopped_at: dt.datetime | None
    # sql/migrations/027: the business number they are bound to (None: the default number)
    phone_number_id: str | None
    # sql/migrations/039: their documents outside the window: 'knock', 'file' (None: by kind)
    outside_window: str | None


class StateCount(NamedTuple):
    """Documents in one state (abandoned: per reason, else ``''``) and the oldest's age."""

    state: str
    reason: str
    count: int  # type: ignore[assignment]  # shadows tuple.count, never called
    oldest_age_seconds: float
