"""Meta's webhook dictionaries read into the typed values the core reads.

The webhook service (``service.ingest``) walks a body's changes
(``webhook_bodies.iter_changes``); what the delivery engine acts on is parsed here,
at the edge, into frozen values: an inbound message as far as a reply to a
knock is concerned (``InboundMessage``), and a template's lifecycle change
(``template_change``). Anything of an unexpected type reads as absent, never
raises: one odd update must not cost the others in its body. A change that
lacks what makes it usable is an ``Unreadable`` saying what it lacked, for the
raw body's reason.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, ClassVar

from delivery_pipeline.whatsapp.webhook_bodies import text_or_none

# The fields of the WhatsApp Business Account that announce a template's life.
TEMPLATE_STATUS = "message_template_status_update"
TEMPLATE_QUALITY = "message_template_quality_update"
TEMPLATE_CATEGORY = "template_category_update"
TEMPLATE_FIELDS = frozenset({TEMPLATE_STATUS, TEMPLATE_QUALITY, TEMPLATE_CATEGORY})

# Names, reasons and categories are quoted in alerts and stored, never at length.
_TEXT_MAX = 200


def _text(value: Any) -> str | None:
    """A non-empty string, else None."""
    return text_or_none(value) or None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# ── an inbound message ─────────────────────────────────────────────────


@dataclass(frozen=True)
class Button:
    """A pressed button: a template's quick reply (``button.payload`` / ``.text``) or
    an interactive message's (``interactive.button_reply.id`` / ``.title``)."""

    payload: str | None
    text: str | None


@dataclass(frozen=True)
class InboundMessage:
    """One ``messages[]`` item, as far as what it asks of us goes."""

    type: str | None  # text, button, interactive, image, system, …
    context_id: str | None  # the message it answers (a knock's id, for a press)
    text: str | None  # a text message's body
    button: Button | None  # a button press (quick reply, or interactive button reply)

    @classmethod
    def of(cls, message: Any) -> InboundMessage:
        message = _dict(message)
        kind = _text(message.get("type"))
        button = None
        if kind == "button" and isinstance(message.get("button"), dict):
            part = message["button"]
            button = Button(_text(part.get("payload")), _text(part.get("text")))
        elif kind == "interactive":
            reply = _dict(message.get("interactive")).get("button_reply")
            if isinstance(reply, dict):
                button = Button(_text(reply.get("id")), _text(reply.get("title")))
        text = _text(_dict(message.get("text")).get("body")) if kind == "text" else None
        return cls(kind, _text(_dict(message.get("context")).get("id")), text, button)


# ── a template's lifecycle ─────────────────────────────────────────────


def _quoted(value: Any) -> str | None:
    """A name or reason as stored: a string or a number (template ids come as either),
    stripped and bounded; None if empty or anything else."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        text = str(value).strip()
        return text[:_TEXT_MAX] or None
    return None


def _upper(value: Any) -> str | None:
    text = _quoted(value)
    return text.upper() if text else None


def _unix(value: Any) -> dt.datetime | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if not 0 < seconds < 2**33:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


@dataclass(frozen=True)
class Template:
    """Which template a change is about."""

    name: str
    language: str
    template_id: str | None


@dataclass(frozen=True)
class TemplateStatusUpdate:
    """``message_template_status_update``: APPROVED, PAUSED, DISABLED, FLAGGED, …"""

    template: Template
    event: str  # upper case
    reason: str | None
    pause_title: str | None  # ``other_info.title`` of a pause, upper case
    disable_date: str | None  # ``disable_info.disable_date``, as Meta words it
    raw: Any  # the change's value as it came, kept with the event

    field: ClassVar[str] = TEMPLATE_STATUS


@dataclass(frozen=True)
class TemplateQualityUpdate:
    """``message_template_quality_update``: GREEN, YELLOW, RED."""

    template: Template
    quality: str  # upper case
    previous_quality: str | None
    raw: Any

    field: ClassVar[str] = TEMPLATE_QUALITY


@dataclass(frozen=True)
class TemplateCategoryUpdate:
    """``template_category_update``: a re-categorisation announced ahead (only
    ``correct_category``), or completed (``previous_category`` → ``new_category``)."""

    template: Template
    correct_category: str | None
    new_category: str | None
    previous_category: str | None
    # When an announced change takes effect, if the change says.
    effective_at: dt.datetime | None
    raw: Any

    field: ClassVar[str] = TEMPLATE_CATEGORY

    @property
    def announced(self) -> bool:
        return self.correct_category is not None and self.previous_category is None

    @property
    def category(self) -> str | None:
        """The category it is (announced: will be) in."""
        return self.correct_category if self.announced else self.new_category


TemplateChange = TemplateStatusUpdate | TemplateQualityUpdate | TemplateCategoryUpdate


@dataclass(frozen=True)
class Unreadable:
    """A change without what makes it usable: ``problem`` says what, for the raw
    body's reason (``<field>:without-<part>``)."""

    problem: str


def template_change(field: str, value: Any) -> TemplateChange | Unreadable:
    """One change of a ``TEMPLATE_FIELDS`` field, read."""
    value = _dict(value)
    name = _quoted(value.get("message_template_name"))
    language = _quoted(value.get("message_template_language"))
    if not name or not language:
        return Unreadable(f"{field}:without-template")
    template = Template(name, language, _quoted(value.get("message_template_id")))
    if field == TEMPLATE_STATUS:
        event = _upper(value.get("event"))
        if event is None:
            return Unreadable(f"{field}:without-event")
        return TemplateStatusUpdate(
            template,
            event,
            reason=_quoted(value.get("reason")),
            pause_title=_upper(_dict(value.get("other_info")).get("title")),
            disable_date=_quoted(_dict(value.get("disable_info")).get("disable_date")),
            raw=value,
        )
    if field == TEMPLATE_QUALITY:
        quality = _upper(value.get("new_quality_score"))
        if quality is None:
            return Unreadable(f"{field}:without-quality")
        return TemplateQualityUpdate(
            template, quality, _upper(value.get("previous_quality_score")), raw=value
        )
    if field != TEMPLATE_CATEGORY:
        return Unreadable(f"{field[:40]}:not-a-template-field")
    change = TemplateCategoryUpdate(
        template,
        correct_category=_upper(value.get("correct_category")),
        new_category=_upper(value.get("new_category")),
        previous_category=_upper(value.get("previous_category")),
        effective_at=_unix(value.get("category_update_timestamp"))
        or _unix(value.get("effective_timestamp")),
        raw=value,
    )
    if change.category is None:
        return Unreadable(f"{field}:without-category")
    return change
