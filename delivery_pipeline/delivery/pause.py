"""The fleet-wide pause: a sender-wide error stops every sender, one probes.

The pause is a row in Postgres (``sender_state``, sql/018), read by the claim
(nothing is claimed while paused but the probe's one document), by every
fence (nothing is fenced while paused) and by the ready notification (a
claim given back is due at the next probe, not now). One sweep at a time
takes the probe (``sender_gate``); its send either succeeds, and
``resume_sender`` ends the pause for everybody at once, or is refused, and
the interval doubles up to ``DELIVERY_PAUSE_PROBE_MAX_SECONDS``.

The alert is one episode: alert when the pause starts, a reminder while
probes keep failing, resolved when it ends (by a probe or an operator). It
shares the ``sender_paused`` check's key, so the check's own alerts join the
same episode instead of opening a second one.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg import AsyncConnection

from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import Paused
from delivery_pipeline.watch.alerts import Alert, AlertSeverity, note_episode
from delivery_pipeline.whatsapp.errors import CloudApiError, remedy

PAUSE_ALERT_KEY = "check:sender_paused"
DEFAULT_REMINDER_SECONDS = 4 * 3600.0


def paused_alert(error: CloudApiError | None, reason: str, paused: Paused) -> Alert:
    code = error.code if error is not None else None
    hint = remedy(code)
    return Alert(
        PAUSE_ALERT_KEY,
        AlertSeverity.ERROR,
        f"Sending is paused for every sender since {paused.paused_at:%H:%M:%S %Z}: WhatsApp "
        f"refused a send with a sender-wide error ({reason})."
        + (f" {hint[0].upper()}{hint[1:]}." if hint else "")
        + f" One sender probes (next at {paused.next_probe_at:%H:%M:%S %Z}); the first "
        "success resumes everybody, `delivery-pipeline resume` at once once it is fixed.",
        {
            "code": code,
            "paused_at": paused.paused_at.isoformat(),
            "next_probe_at": paused.next_probe_at.isoformat(),
            "probes": paused.probes,
            "refused_sends": paused.refused_sends,
        },
    )


def resumed_alert(by: str) -> Alert:
    return Alert(
        PAUSE_ALERT_KEY,
        AlertSeverity.INFO,
        f"Sending resumed for every sender ({by}).",
        {"resumed_by": by},
    )


async def pause_sender(
    conn: AsyncConnection[Any],
    error: CloudApiError | None,
    reason: str,
    *,
    document_id: int | None,
    settings: DeliverySettings,
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
) -> Paused:
    """Record a sender-wide refusal: start the pause, or (the probe's) grow its
    interval; alert once, remind while it lasts."""
    paused = await QUERIES.pause_sender.one(
        conn,
        {
            "code": error.code if error is not None else None,
            "reason": reason[:1000],
            "document_id": document_id,
            "first_seconds": settings.pause_probe_seconds,
            "max_seconds": max(settings.pause_probe_max_seconds, settings.pause_probe_seconds),
        },
    )
    assert paused is not None  # sender_state always has its one row
    await note_episode(
        conn,
        paused_alert(error, reason, paused),
        failing=True,
        reminder_seconds=reminder_seconds,
    )
    return paused


async def resume_sender(
    conn: AsyncConnection[Any], send_started_at: dt.datetime, *, by: str
) -> bool:
    """A send that started after the pause was accepted: resume everybody."""
    resumed = await QUERIES.resume_sender.one(conn, {"send_started_at": send_started_at, "by": by})
    if resumed is None:
        return False
    await note_episode(conn, resumed_alert(by), failing=False)
    return True
