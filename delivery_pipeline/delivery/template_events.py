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
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.alerts import Alert, AlertSeverity, record_alert

STATUS = "message_template_status_update"
QUALITY = "message_template_quality_update"
CATEGORY = "template_category_update"
FIELDS = frozenset({STATUS, QUALITY, CATEGORY})

# Meta announces an automatic re-categorisation a day before it takes effect
# (reported); an announcement without its own time is taken to mean that.
ANNOUNCEMENT_LEAD = dt.timedelta(hours=24)
_TEXT_MAX = 200


@dataclass(frozen=True)
class TemplateChange:
    """What one change said; ``applied`` False: a duplicate, or not about a template."""

    applied: bool
    woken: list[int]
    problem: str | None = None  # why it could not be read, for the raw body's reason


def _text(value: Any) -> str | None:
    if isinstance(value, str | int) and not isinstance(value, bool):
        text = str(value).strip()
        return text[:_TEXT_MAX] or None
    return None


def _upper(value: Any) -> str | None:
    text = _text(value)
    return text.upper() if text else None


def _unix(value: Any) -> dt.datetime | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if not 0 < seconds < 2**33:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


async def apply_template_change(
    conn: AsyncConnection[Any], field: str, value: dict[str, Any], occurred_at: dt.datetime
) -> TemplateChange:
    """Store and apply one lifecycle change (one transaction, the caller's)."""
    name = _text(value.get("message_template_name"))
    language = _text(value.get("message_template_language"))
    if not name or not language:
        return TemplateChange(False, [], f"{field}:without-template")
    template_id = _text(value.get("message_template_id"))
    alert: Alert | None = None
    label = f"{name} ({language})"
    details = {"template": name, "language": language}
    if field == STATUS:
        event = _upper(value.get("event"))
        if event is None:
            return TemplateChange(False, [], f"{field}:without-event")
        if not await _first_time(conn, field, name, language, event, occurred_at, value):
            return TemplateChange(False, [])
        other = value.get("other_info")
        disable = value.get("disable_info")
        await QUERIES.template_status_event.run(
            conn,
            {
                "name": name,
                "language": language,
                "template_id": template_id,
                "event": event,
                "occurred_at": occurred_at,
                "reason": _text(value.get("reason")),
                "pause_title": _upper(other.get("title")) if isinstance(other, dict) else None,
                "disable_date": _text(disable.get("disable_date"))
                if isinstance(disable, dict)
                else None,
            },
        )
        if event in ("PAUSED", "DISABLED", "FLAGGED", "REJECTED"):
            alert = Alert(
                f"template:{name}:{language}:status",
                AlertSeverity.ERROR,
                f"WhatsApp says the template {label} is {event}"
                + (f" ({_text(value.get('reason'))})" if _text(value.get("reason")) else "")
                + ". Knocks on it fail over to the locale's next template; in-window "
                "deliveries go on. See its quality in WhatsApp Manager.",
                {**details, "event": event},
            )
    elif field == QUALITY:
        quality = _upper(value.get("new_quality_score"))
        if quality is None:
            return TemplateChange(False, [], f"{field}:without-quality")
        if not await _first_time(conn, field, name, language, quality, occurred_at, value):
            return TemplateChange(False, [])
        await QUERIES.template_quality_event.run(
            conn,
            {
                "name": name,
                "language": language,
                "template_id": template_id,
                "quality": quality,
                "occurred_at": occurred_at,
            },
        )
        if quality in ("YELLOW", "RED"):
            alert = Alert(
                f"template:{name}:{language}:quality",
                AlertSeverity.WARNING if quality == "YELLOW" else AlertSeverity.ERROR,
                f"The quality of template {label} fell to {quality}"
                f" (was {_upper(value.get('previous_quality_score')) or 'unknown'}): a pause "
                "may follow. Check what people answer to the knock.",
                {**details, "quality": quality},
            )
    else:
        correct = _upper(value.get("correct_category"))
        new = _upper(value.get("new_category"))
        previous = _upper(value.get("previous_category"))
        announced = correct is not None and previous is None
        category = correct if announced else new
        if category is None:
            return TemplateChange(False, [], f"{field}:without-category")
        event = ("ANNOUNCED:" if announced else "CHANGED:") + category
        if not await _first_time(conn, field, name, language, event, occurred_at, value):
            return TemplateChange(False, [])
        effective_at = None
        if announced:
            effective_at = (
                _unix(value.get("category_update_timestamp"))
                or _unix(value.get("effective_timestamp"))
                or occurred_at + ANNOUNCEMENT_LEAD
            )
        await QUERIES.template_category_event.run(
            conn,
            {
                "name": name,
                "language": language,
                "template_id": template_id,
                "announced": announced,
                "category": category,
                "previous_category": new if announced and new != correct else previous,
                "occurred_at": occurred_at,
                "effective_at": effective_at,
            },
        )
        if category != "UTILITY":
            when = f"from {effective_at:%Y-%m-%d %H:%M} UTC" if effective_at else "now"
            alert = Alert(
                f"template:{name}:{language}:category",
                AlertSeverity.WARNING if announced else AlertSeverity.ERROR,
                f"WhatsApp {'will re-categorise' if announced else 're-categorised'} the knock "
                f"template {label} as {category} {when}: marketing templates are capped per "
                "person (131049) and not delivered to +1 numbers. Submit a UTILITY template "
                "and list it first in DELIVERY_KNOCK_TEMPLATES.",
                {**details, "category": category, "announced": announced},
            )
    if alert is not None:
        await record_alert(conn, alert)
    woken = await QUERIES.wake_held_knocks.all(conn, {})
    return TemplateChange(True, woken)


async def _first_time(
    conn: AsyncConnection[Any],
    field: str,
    name: str,
    language: str,
    event: str,
    occurred_at: dt.datetime,
    value: dict[str, Any],
) -> bool:
    stored = await QUERIES.insert_template_event.one(
        conn,
        {
            "field": field,
            "name": name,
            "language": language,
            "event": event,
            "occurred_at": occurred_at,
            "payload": Jsonb(value),
        },
    )
    return stored is not None
