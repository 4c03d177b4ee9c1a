"""The knock: the one template we may send outside the service window.

Its text is fixed at approval; the only thing we fill in is a short
single-line parameter (the person's name), which the platform rejects (132018)
if it holds a newline or tab or more than four consecutive spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_BREAKS_AND_TABS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")
_LONG_SPACE_RUNS = re.compile(r" {5,}")

FALLBACK_NAME = {"en": "there", "es": "hola", "pt": "olá"}


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


def knock_for(
    locale: str, name: str, templates: dict[str, tuple[str, str]], max_length: int = 60
) -> Knock:
    """The locale's template (English when the locale has none) addressed to ``name``."""
    template, language = templates.get(locale) or templates["en"]
    parameter = sanitize_parameter(name, max_length) or FALLBACK_NAME.get(locale, "there")
    return Knock(template, language, [parameter])
