"""The knock: the one template we may send outside the service window.

Its text is fixed at approval; what we fill in are short single-line
parameters (the person's name; on a template with buttons also how many
documents wait), which the platform rejects (132018) if they hold a newline
or tab or more than four consecutive spaces. A template with buttons
(``DELIVERY_KNOCK_BUTTON_TEMPLATES``) is sent with each quick reply's payload
(``reply.BUTTON_PAYLOADS``), so the press names what it asks whatever the
button's text in the person's language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from delivery_pipeline.delivery.reply import BUTTON_PAYLOADS

# The locale's choices are the settings' rule, read by the checks too; the engine's name.
from delivery_pipeline.settings.parsing import knock_choices as knock_choices

_LINE_BREAKS_AND_TABS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")
_LONG_SPACE_RUNS = re.compile(r" {5,}")

FALLBACK_NAME = {"en": "there", "es": "hola", "pt": "olá"}

# The count parameter ({{2}}) of a template with buttons: one document, or how many.
_ONE = {
    "en": "your document is ready",
    "es": "tu documento está listo",
    "pt": "seu documento está pronto",
}
_MANY = {
    "en": "you have {n} documents ready",
    "es": "tienes {n} documentos listos",
    "pt": "você tem {n} documentos prontos",
}


def waiting_phrase(locale: str, count: int) -> str:
    """How many documents wait, in the locale's words (English when it has none)."""
    if count <= 1:
        return _ONE.get(locale, _ONE["en"])
    return _MANY.get(locale, _MANY["en"]).format(n=count)


def sanitize_parameter(value: str, max_length: int = 60) -> str:
    """A template parameter the platform will accept: one line, ≤4 spaces in a row, capped."""
    text = _LINE_BREAKS_AND_TABS.sub(" ", value)
    text = "".join(ch for ch in text if ch.isprintable() or ch == " ")
    text = _LONG_SPACE_RUNS.sub("    ", text).strip()
    if len(text) > max_length:
        text = text[: max_length - 1].rstrip() + "…"
    return text


@dataclass(frozen=True)
class Knock:
    template: str
    language: str
    parameters: list[str]
    # The quick replies' payloads, in the template's button order (none: no buttons).
    buttons: tuple[str, ...] = ()


def knock_for(
    locale: str, name: str, templates: dict[str, tuple[str, str]], max_length: int = 60
) -> Knock:
    """The locale's template (English when the locale has none) addressed to ``name``."""
    template, language = templates.get(locale) or templates["en"]
    parameter = sanitize_parameter(name, max_length) or FALLBACK_NAME.get(locale, "there")
    return Knock(template, language, [parameter])


def knock_with(
    template: str,
    language: str,
    locale: str,
    name: str,
    max_length: int = 60,
    *,
    with_buttons: bool = False,
    waiting: int = 1,
) -> Knock:
    """A knock on one chosen template, addressed to ``name``; a template with buttons
    also says how many documents wait and carries the quick replies' payloads."""
    parameter = sanitize_parameter(name, max_length) or FALLBACK_NAME.get(locale, "there")
    if not with_buttons:
        return Knock(template, language, [parameter])
    return Knock(template, language, [parameter, waiting_phrase(locale, waiting)], BUTTON_PAYLOADS)


@dataclass(frozen=True)
class TemplateChoice:
    name: str
    language: str
    problem: str  # 'ok' when healthy
    sendable: bool


def pick_template(
    health: list[TemplateChoice], tried: set[tuple[str, str]]
) -> TemplateChoice | None:
    """The first healthy template not tried yet; else the first that still sends
    (flagged, RED, re-categorised: better than no knock); else None: the knock waits."""
    fresh = [t for t in health if (t.name, t.language) not in tried]
    for template in fresh:
        if template.problem == "ok":
            return template
    for template in fresh:
        if template.sendable:
            return template
    return None
