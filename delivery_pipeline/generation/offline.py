"""The offline generator: no network, no model, the same text for the same person and date.

Its words are data, one file per language in ``texts/`` (six weekly themes,
each with why it matters, seven daily actions, what to do when it gets hard
and an evening question, plus the frame around them); this module only
arranges them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from delivery_pipeline.generation.generator import DocumentSpec
from delivery_pipeline.model import Kind, Locale

TEXTS_DIR = Path(__file__).parent / "texts"
FRIEND = {Locale.EN: "friend", Locale.ES: "amigo", Locale.PT: "amigo"}


@cache
def texts(locale: str) -> dict[str, Any]:
    """The words of one language (``texts/<locale>.json``)."""
    loaded: dict[str, Any] = json.loads((TEXTS_DIR / f"{Locale(locale)}.json").read_text("utf-8"))
    return loaded


def format_date(day: dt.date, locale: str) -> str:
    """``Monday 3 March`` / ``lunes 3 de marzo`` / ``segunda-feira, 3 de março``."""
    words = texts(locale)
    return str(words["date_format"]).format(
        weekday=words["weekdays"][day.weekday()],
        day=day.day,
        month=words["months"][day.month - 1],
    )


def _seed(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


class OfflineGenerator:
    """No network, no model: the same profile and date always give the same text."""

    name = "offline"

    def generate(self, spec: DocumentSpec) -> str:
        locale = Locale(spec.locale) if spec.locale in frozenset(Locale) else Locale.EN
        name = " ".join(spec.name.split()) or FRIEND[locale]
        if spec.kind == Kind.PLAN:
            return self._plan(spec, locale, name)
        return self._brief(spec, locale, name)

    def _plan(self, spec: DocumentSpec, locale: str, name: str) -> str:
        frame = texts(locale)["frame"]
        themes = texts(locale)["themes"]
        # Rest and reflection looks back on the others, so it stays last; the
        # first five rotate per person and document.
        rotation = _seed(spec.document_id, spec.name, spec.for_date) % (len(themes) - 1)
        order = [*themes[:-1][rotation:], *themes[:-1][:rotation], themes[-1]]
        start = spec.for_date
        paragraphs = [
            frame["plan_title"].format(name=name),
            frame["plan_intro"].format(start=format_date(start, locale)),
            frame["plan_how"],
        ]
        for number, theme in enumerate(order, start=1):
            week_start = start + dt.timedelta(days=7 * (number - 1))
            days = [week_start + dt.timedelta(days=i) for i in range(7)]
            paragraphs.append(
                frame["week_heading"].format(
                    number=number,
                    start=format_date(days[0], locale),
                    end=format_date(days[-1], locale),
                    title=_capitalize(theme["title"]),
                )
            )
            paragraphs.append(theme["why"])
            paragraphs.append(
                "\n".join(
                    f"• {_capitalize(format_date(day, locale))}: {_capitalize(action)}"
                    for day, action in zip(days, theme["actions"], strict=True)
                )
            )
            paragraphs.append(frame["hard"].format(text=_capitalize(theme["hard"])))
            paragraphs.append(frame["question"].format(text=_capitalize(theme["question"])))
            paragraphs.append(frame["check"].format(number=number))
        paragraphs.append(frame["plan_closing"].format(name=name))
        return "\n\n".join(paragraphs)

    def _brief(self, spec: DocumentSpec, locale: str, name: str) -> str:
        frame, themes = texts(locale)["frame"], texts(locale)["themes"]
        day = spec.for_date
        theme = themes[(day.toordinal() + _seed(spec.name)) % len(themes)]
        return "\n\n".join(
            [
                frame["brief_greeting"].format(name=name, date=format_date(day, locale)),
                frame["brief_focus"].format(
                    title=theme["title"], action=theme["actions"][day.weekday()]
                ),
                frame["brief_question"].format(question=theme["question"]),
                frame["brief_closing"],
            ]
        )
