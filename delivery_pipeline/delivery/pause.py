"""The pause: a sender-wide error stops every sender, one probes.

A pause is a row in Postgres (``sender_state``, sql/migrations/018): ``'*'`` for every
number (the token, the app, the account: what every number shares), or one
business number's (sql/migrations/027: not registered, not the token's, its display
name), which stops that number's sends and no other's. It is read by the claim
(nothing is claimed while paused but the probe's one document), by every
fence (nothing is fenced while paused) and by the ready notification (a
claim given back is due at the next probe, not now). One sweep at a time
takes the probe (``sender_gate``); its send either succeeds, and
``resume_sender`` ends the pause for everybody at once, or is refused, and
the interval doubles up to ``DELIVERY_PAUSE_PROBE_MAX_SECONDS``.

The alert is one episode: alert when the pause starts, a reminder while
probes keep failing, resolved when it ends (by a probe or an operator). It
shares the ``sender_paused`` check's key, so the check's own alerts join the
same episode instead of opening a second one. A number's pause is its own
episode (``number_paused:<id>``): two numbers paused are two alerts, each
resolved when its number resumes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import Paused
from delivery_pipeline.text import stored_error
from delivery_pipeline.watch.alerts import Alert, AlertSeverity, note_episode
from delivery_pipeline.whatsapp.errors import CloudApiError, Scope, remedy

PAUSE_ALERT_KEY = "check:sender_paused"
EVERY_NUMBER = "*"
DEFAULT_REMINDER_SECONDS = 4 * 3600.0


def pause_scope(error: CloudApiError | None, number: str | None) -> str:
    """Which pause an error starts: its number's, for an error about one number
    sent from a known number; else every number's."""
    if error is not None and error.scope == Scope.NUMBER and number:
        return number
    return EVERY_NUMBER


def alert_key(scope: str) -> str:
    return PAUSE_ALERT_KEY if scope == EVERY_NUMBER else f"number_paused:{scope}"


def paused_alert(
    error: CloudApiError | None, reason: str, paused: Paused, scope: str = EVERY_NUMBER
) -> Alert:
    code = error.code if error is not None else None
    hint = remedy(code)
    who = (
        "for every sender"
        if scope == EVERY_NUMBER
        else f"from business number {scope} (the other numbers go on)"
    )
    return Alert(
        alert_key(scope),
        AlertSeverity.ERROR,
        f"Sending is paused {who} since {paused.paused_at:%H:%M:%S %Z}: WhatsApp "
        f"refused a send with a sender-wide error ({reason})."
        + (f" {hint[0].upper()}{hint[1:]}." if hint else "")
        + f" One sender probes (next at {paused.next_probe_at:%H:%M:%S %Z}); the first "
        "success resumes everybody, `delivery-pipeline resume` at once once it is fixed.",
        {
            "phone_number_id": scope,
            "code": code,
            "paused_at": paused.paused_at.isoformat(),
            "next_probe_at": paused.next_probe_at.isoformat(),
            "probes": paused.probes,
            "refused_sends": paused.refused_sends,
        },
    )


def resumed_alert(by: str, scope: str = EVERY_NUMBER) -> Alert:
    who = "for every sender" if scope == EVERY_NUMBER else f"from business number {scope}"
    return Alert(
        alert_key(scope),
        AlertSeverity.INFO,
        f"Sending resumed {who} ({by}).",
        {"resumed_by": by, "phone_number_id": scope},
    )


async def pause_sender(
    conn: AsyncConnection[Any],
    error: CloudApiError | None,
    reason: str,
    *,
    document_id: int | None,
    settings: DeliverySettings,
    number: str | None = None,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> Paused:
    """Record a sender-wide refusal of a send from ``number``: start the pause (of
    that number, or of every number: ``pause_scope``), or (the probe's) grow its
    interval; alert once, remind while it lasts."""
    scope = pause_scope(error, number)
    await QUERIES.sender_row.run(conn, {"phone_number_id": scope})
    paused = await QUERIES.pause_sender.one(
        conn,
        {
            "phone_number_id": scope,
            "code": error.code if error is not None else None,
            "reason": stored_error(reason),
            "document_id": document_id,
            "first_seconds": settings.pause_probe_seconds,
            "max_seconds": max(settings.pause_probe_max_seconds, settings.pause_probe_seconds),
        },
    )
    assert paused is not None  # sender_row made it
    await note_episode(
        conn,
        paused_alert(error, reason, paused, scope),
        failing=True,
        reminder_seconds=reminder_seconds,
    )
    return paused


async def resume_sender(
    conn: AsyncConnection[Any], send_started_at: dt.datetime, number: str, *, by: str
) -> bool:
    """A send from ``number`` that started after the pause was accepted: the pause of
    that number and of every number is over, for everybody."""
    resumed = await QUERIES.resume_sender.all(
        conn, {"send_started_at": send_started_at, "phone_number_id": number, "by": by}
    )
    for scope in resumed:
        await note_episode(conn, resumed_alert(by, scope), failing=False)
    return bool(resumed)
