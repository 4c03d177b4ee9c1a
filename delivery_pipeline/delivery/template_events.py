"""The templates' lifecycle webhooks: stored once, applied to the template's state.

Three fields of the WhatsApp Business Account announce a template's life:
``message_template_status_update`` (APPROVED, PAUSED, DISABLED, FLAGGED, …),
``message_template_quality_update`` (GREEN, YELLOW, RED) and
``template_category_update`` (a re-categorisation announced ahead, with
``correct_category``, then the completed one, ``previous_category`` →
``new_category``). Each change is kept once in ``template_events`` (a
redelivery or duplicate is a no-op) and moves ``message_templates`` only
forwards in time. Any change wakes the documents holding their knock for a
healthy template: the next claim chooses again. A status, quality or category
that troubles a knock template is told to ops at once, on the template's
episode (``template:<name>:<language>``, ``watch/episodes.py``): one alert
whatever else reports the same trouble, resolved when the Dagster check of
the template passes again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, TypedDict

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.alerts import Alert, AlertSeverity, record_alert
from delivery_pipeline.whatsapp.webhook_values import (
    TemplateCategoryUpdate,
    TemplateChange,
    TemplateQualityUpdate,
    TemplateStatusUpdate,
)

# Meta announces an automatic re-categorisation a day before it takes effect
# (reported); an announcement without its own time is taken to mean that.
ANNOUNCEMENT_LEAD = dt.timedelta(hours=24)


@dataclass(frozen=True)
class Applied:
    """What one change did; ``applied`` False: a duplicate."""

    applied: bool
    woken: frozenset[SweepTarget]  # documents whose knock waited on a template: due now


async def apply_template_change(
    conn: AsyncConnection[Any], change: TemplateChange, occurred_at: dt.datetime
) -> Applied:
    """Store and apply one lifecycle change (one transaction, the caller's)."""
    match change:
        case TemplateStatusUpdate():
            event = change.event
        case TemplateQualityUpdate():
            event = change.quality
        case TemplateCategoryUpdate():
            assert change.category is not None  # read so (webhook_values.template_change)
            event = ("ANNOUNCED:" if change.announced else "CHANGED:") + change.category
    if not await _first_time(conn, change, event, occurred_at):
        return Applied(False, frozenset())
    match change:
        case TemplateStatusUpdate():
            alert = await _status(conn, change, occurred_at)
        case TemplateQualityUpdate():
            alert = await _quality(conn, change, occurred_at)
        case TemplateCategoryUpdate():
            alert = await _category(conn, change, occurred_at)
    if alert is not None:
        await record_alert(conn, alert)
    woken = await QUERIES.wake_held_knocks.all(conn, {})
    return Applied(True, SweepTarget.documents(woken))


async def _status(
    conn: AsyncConnection[Any], change: TemplateStatusUpdate, occurred_at: dt.datetime
) -> Alert | None:
    event = change.event
    await QUERIES.template_status_event.run(
        conn,
        {
            **_template(change),
            "event": event,
            "occurred_at": occurred_at,
            "reason": change.reason,
            "pause_title": change.pause_title,
            "disable_date": change.disable_date,
        },
    )
    if event not in ("PAUSED", "DISABLED", "FLAGGED", "REJECTED"):
        return None
    return Alert(
        _key(change, "status"),
        AlertSeverity.ERROR,
        f"WhatsApp says the template {_label(change)} is {event}"
        + (f" ({change.reason})" if change.reason else "")
        + ". Knocks on it fail over to the locale's next template; in-window "
        "deliveries go on. See its quality in WhatsApp Manager.",
        {**_details(change), "event": event},
    )


async def _quality(
    conn: AsyncConnection[Any], change: TemplateQualityUpdate, occurred_at: dt.datetime
) -> Alert | None:
    quality = change.quality
    await QUERIES.template_quality_event.run(
        conn,
        {
            **_template(change),
            "quality": quality,
            "occurred_at": occurred_at,
        },
    )
    if quality not in ("YELLOW", "RED"):
        return None
    return Alert(
        _key(change, "quality"),
        AlertSeverity.WARNING if quality == "YELLOW" else AlertSeverity.ERROR,
        f"The quality of template {_label(change)} fell to {quality}"
        f" (was {change.previous_quality or 'unknown'}): a pause "
        "may follow. Check what people answer to the knock.",
        {**_details(change), "quality": quality},
    )


async def _category(
    conn: AsyncConnection[Any], change: TemplateCategoryUpdate, occurred_at: dt.datetime
) -> Alert | None:
    category, announced = change.category, change.announced
    assert category is not None  # read so (webhook_values.template_change)
    effective_at = (change.effective_at or occurred_at + ANNOUNCEMENT_LEAD) if announced else None
    new, correct = change.new_category, change.correct_category
    await QUERIES.template_category_event.run(
        conn,
        {
            **_template(change),
            "announced": announced,
            "category": category,
            "previous_category": new if announced and new != correct else change.previous_category,
            "occurred_at": occurred_at,
            "effective_at": effective_at,
        },
    )
    if category == "UTILITY":
        return None
    when = f"from {effective_at:%Y-%m-%d %H:%M} UTC" if effective_at else "now"
    return Alert(
        _key(change, "category"),
        AlertSeverity.WARNING if announced else AlertSeverity.ERROR,
        f"WhatsApp {'will re-categorise' if announced else 're-categorised'} the knock "
        f"template {_label(change)} as {category} {when}: marketing templates are capped per "
        "person (131049) and not delivered to +1 numbers. Submit a UTILITY template "
        "and list it first in DELIVERY_KNOCK_TEMPLATES.",
        {**_details(change), "category": category, "announced": announced},
    )


class _Template(TypedDict):
    """The template a lifecycle change is about, as its event's row names it."""

    name: str
    language: str
    template_id: str | None


def _template(change: TemplateChange) -> _Template:
    template = change.template
    return {
        "name": template.name,
        "language": template.language,
        "template_id": template.template_id,
    }


def _key(change: TemplateChange, field: str) -> str:
    """The alert's key: the template, then what the webhook was about (its episode is the
    template's, ``watch/episodes.py``, read from the alert's details)."""
    return f"template:{change.template.name}:{change.template.language}:{field}"


def _label(change: TemplateChange) -> str:
    return f"{change.template.name} ({change.template.language})"


def _details(change: TemplateChange) -> dict[str, Any]:
    return {"template": change.template.name, "language": change.template.language}


async def _first_time(
    conn: AsyncConnection[Any], change: TemplateChange, event: str, occurred_at: dt.datetime
) -> bool:
    stored = await QUERIES.insert_template_event.one(
        conn,
        {
            "field": change.field,
            "name": change.template.name,
            "language": change.template.language,
            "event": event,
            "occurred_at": occurred_at,
            "payload": Jsonb(change.raw),
        },
    )
    return stored is not None
