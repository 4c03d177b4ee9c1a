"""Parameters and rows of ``sql/queries/pause.sql``: the pause of one number or of every
number, and why the heartbeat finds nothing eligible."""

import datetime as dt
import uuid
from typing import NamedTuple, TypedDict


class HeartbeatIdle(NamedTuple):
    """Why the heartbeat finds nothing eligible (``heartbeat_idle``)."""

    queued: int
    knock_held: int
    quiet: int
    next_due: dt.datetime | None
    paused_at: dt.datetime | None
    pause_code: int | None
    pause_reason: str | None
    next_probe_at: dt.datetime | None
    numbers_paused: int


class GateParams(TypedDict):
    token: uuid.UUID
    first_seconds: float  # a pause recorded without a probe time: probe again this soon
    # a sweep of one number (``sweep --number``) takes only its number's probe and
    # every number's ('*'); None: every due probe
    number: str | None


class SenderGate(NamedTuple):
    """One pause row ('*' or a number): ``open``, or this sweep holds its ``probe``,
    or neither (paused)."""

    phone_number_id: str
    open: bool
    probe: bool
    pause_code: int | None
    next_probe_at: dt.datetime | None


class EndProbe(TypedDict):
    token: uuid.UUID
    again: bool
    phone_number_id: str


class ProbeRef(TypedDict):
    token: uuid.UUID
    document_id: int
    phone_number_id: str


class MaySend(TypedDict):
    document_id: int
    phone_number_id: str


class SendAllowed(NamedTuple):
    allowed: bool
    every: bool  # what stops it is the pause of every number


class ResumeSending(TypedDict):
    by: str
    phone_number_id: str | None  # None: every pause


class Resumed(NamedTuple):
    """A pause an operator ended."""

    phone_number_id: str
    paused_at: dt.datetime
    pause_code: int | None
    pause_reason: str | None
