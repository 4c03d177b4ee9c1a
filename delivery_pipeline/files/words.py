"""The words a file adds to its body, in the person's language: its title, the
date under it, its file name. (The body's own words are the generator's.)"""

from __future__ import annotations

import datetime as dt
import re

from delivery_pipeline.model import Kind, Locale

TITLES: dict[Locale, dict[Kind, str]] = {
    Locale.EN: {Kind.PLAN: "Your plan", Kind.DAILY_BRIEF: "Your daily brief"},
    Locale.ES: {Kind.PLAN: "Tu plan", Kind.DAILY_BRIEF: "Tu resumen del día"},
    Locale.PT: {Kind.PLAN: "Seu plano", Kind.DAILY_BRIEF: "Seu resumo do dia"},
}
# What a file is called on the person's phone: "<kind> - <name> - <date>.pdf".
FILE_KINDS: dict[Locale, dict[Kind, str]] = {
    Locale.EN: {Kind.PLAN: "Plan", Kind.DAILY_BRIEF: "Brief"},
    Locale.ES: {Kind.PLAN: "Plan", Kind.DAILY_BRIEF: "Resumen"},
    Locale.PT: {Kind.PLAN: "Plano", Kind.DAILY_BRIEF: "Resumo"},
}
MONTHS: dict[Locale, tuple[str, ...]] = {
    Locale.EN: (
        "January", "February", "March", "April", "May", "June",
        "July", "August", "September", "October", "November", "December",
    ),
    Locale.ES: (
        "enero", "febrero", "marzo", "abril", "mayo", "junio",
        "julio", "agosto", "septiembre", "octubre", "noviembre", "diciembre",
    ),
    Locale.PT: (
        "janeiro", "fevereiro", "março", "abril", "maio", "junho",
        "julho", "agosto", "setembro", "outubro", "novembro", "dezembro",
    ),
}  # fmt: skip
DATE_FORMATS = {
    Locale.EN: "{day} {month} {year}",
    Locale.ES: "{day} de {month} de {year}",
    Locale.PT: "{day} de {month} de {year}",
}
# Characters a file name may not hold on some phone or computer, and its length.
_NOT_IN_FILE_NAMES = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')
FILE_NAME_MAX = 80


def locale_of(locale: str) -> Locale:
    """The person's locale, English when it is not one of ours."""
    return Locale(locale) if locale in frozenset(Locale) else Locale.EN


def title(kind: Kind, locale: str) -> str:
    return TITLES[locale_of(locale)][kind]


def long_date(day: dt.date, locale: str) -> str:
    """``2 March 2026`` / ``2 de marzo de 2026`` / ``2 de março de 2026``."""
    language = locale_of(locale)
    month = MONTHS[language][day.month - 1]
    return DATE_FORMATS[language].format(day=day.day, month=month, year=day.year)


def file_name(kind: Kind, locale: str, name: str, day: dt.date) -> str:
    """``Plan - Ana - 2026-03-02.pdf``: what the file is called on the phone."""
    parts = [FILE_KINDS[locale_of(locale)][kind], " ".join(name.split()), day.isoformat()]
    cleaned = (" ".join(_NOT_IN_FILE_NAMES.sub(" ", part).split()) for part in parts)
    stem = " - ".join(part for part in cleaned if part)
    return stem[:FILE_NAME_MAX].rstrip() + ".pdf"
