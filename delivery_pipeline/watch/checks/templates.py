"""The knock templates' checks: one per template and language, and the knocks'.

* ``knock_template_<name>_<language>`` (owner: the template), one per
  template of ``DELIVERY_KNOCK_TEMPLATES``: ERROR when the platform paused,
  disabled, rejected or flagged it, when a send was refused naming it, when
  its quality is RED or it is no longer UTILITY; WARN on YELLOW quality, an
  announced re-categorisation, or knocks on it accepted and never delivered.
  A pause that ended by itself (3 h / 6 h passed without another word) is
  said so, and passes: knocks use it again.
  Its trouble is the episode ``template:<name>:<language>`` (``watch/episodes.py``),
  the one its lifecycle webhooks and the sends refused naming it report to:
  one alert for the template, resolved when this check passes again.
* ``knock_held`` (owner: the template): documents whose knock waits because
  no template of their locale can be used: ERROR while any waits. They wait
  on the locale's first template, whose episode they join (never a second
  alert); held documents whose locale has a usable template again go out at
  the next sweep and fail nothing.
* ``knock_not_delivered`` (owner: the template): knocks accepted and never
  reported delivered, read or failed after ``CHECK_KNOCK_UNDELIVERED_SECONDS``
  (template pacing drops sends that way): WARN, listed; not to be confused
  with a delivered knock nobody answered (``awaiting_reply``).

Names, owner and runbook are ``registry``'s; no Dagster here:
``dagster_defs.asset_checks`` hangs them on ``delivered_documents``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import Severity
from delivery_pipeline.settings import Settings
from delivery_pipeline.settings.parsing import knock_choices, knock_template_list
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.templates import KnockHeldLocale, TemplateState
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.checks.registry import (
    DOCUMENT_TEMPLATE_PREFIX,
    KNOCK_HELD,
    KNOCK_NOT_DELIVERED,
    Check,
    CheckResult,
    document_template_check,
    result,
    template_check,
)
from delivery_pipeline.watch.episodes import Said, check_episode, template_episode

PERIOD = dt.timedelta(hours=24)
_ERRORS = {
    "paused",
    "disabled",
    "rejected",
    "pending_deletion",
    "deleted",
    "refused",
    "not_utility",
    "flagged",
    "quality_red",
}


def template_states(
    conn: psycopg.Connection[Any],
    s: Settings,
    templates: list[tuple[str, str]] | None = None,
) -> list[TemplateState]:
    """Every knock template of the settings (or ``templates``), in order, with its state
    and recent knocks."""
    if templates is None:
        templates = knock_template_list(s.delivery.knock_templates)
    return QUERIES.template_states.all(
        conn,
        {
            "names": [n for n, _ in templates],
            "languages": [lg for _, lg in templates],
            "period": PERIOD,
            "undelivered_after": dt.timedelta(seconds=s.checks.knock_undelivered_seconds),
        },
    )


def describe(t: TemplateState, now: dt.datetime | None = None) -> str:
    """One line: what is wrong with the template, or that it is fine."""
    now = now or dt.datetime.now(dt.UTC)
    label = f"{t.name} ({t.language})"
    parts: list[str] = []
    if t.problem == "paused" and t.paused_until is not None:
        parts.append(f"PAUSED until {t.paused_until:%H:%M} UTC (pause {t.pause_count})")
    elif t.problem == "refused":
        until = f" until {t.refused_until:%H:%M} UTC" if t.refused_until else ""
        parts.append(f"a send was refused with {t.refused_code}: avoided{until}")
    elif t.problem == "not_utility":
        parts.append(f"re-categorised {t.category}")
    elif t.problem != "ok":
        parts.append(t.problem.replace("_", " ").upper())
    if t.pause_lapsed and t.paused_until is not None:
        parts.append(
            f"its pause ended by itself at {t.paused_until:%H:%M} UTC "
            f"({format_age((now - t.paused_until).total_seconds())} ago): used again"
        )
    if t.quality and t.quality not in ("GREEN", "UNKNOWN") and t.problem != "quality_red":
        parts.append(f"quality {t.quality}")
    if t.announced_category and t.announced_category != "UTILITY":
        when = (
            f" from {t.announced_effective_at:%Y-%m-%d %H:%M} UTC"
            if t.announced_effective_at
            else ""
        )
        parts.append(f"re-categorisation to {t.announced_category} announced{when}")
    if t.not_delivered:
        parts.append(f"{t.not_delivered} knocks accepted and never delivered")
    state = "; ".join(parts) if parts else "healthy"
    return (
        f"{label}: {state}. Knocks of the last day: {t.knocks} sent, {t.delivered} "
        f"delivered, {t.failed} failed."
    )


@dataclass(frozen=True)
class HeldLocale:
    """A locale's documents holding their knock, and the template they wait on: the
    first of the locale's choices, when none of them can be used; None when one can
    again (they go out at the next sweep)."""

    row: KnockHeldLocale
    blamed: TemplateState | None


def held_locales(
    conn: psycopg.Connection[Any], s: Settings, states: list[TemplateState]
) -> list[HeldLocale]:
    """Each locale with documents holding their knock, with the template to blame."""
    by_key = {(t.name, t.language): t for t in states}
    choices = s.delivery.knock_template_choices
    held = []
    for row in QUERIES.knock_held_by_locale.all(conn, {"sample": s.checks.sample_size}):
        mine = [by_key[c] for c in knock_choices(row.locale, choices) if c in by_key]
        usable = any(t.sendable for t in mine)
        held.append(HeldLocale(row, None if usable or not mine else mine[0]))
    return held


def check_knock_template(
    conn: psycopg.Connection[Any], s: Settings, name: str, language: str
) -> CheckResult:
    states = template_states(conn, s)
    state = next(t for t in states if (t.name, t.language) == (name, language))
    held = [h for h in held_locales(conn, s, states) if h.blamed == state]
    return template_result(state, held)


def check_document_template(
    conn: psycopg.Connection[Any], s: Settings, name: str, language: str
) -> CheckResult:
    """A document template's check: its health as a knock template's (its lifecycle,
    its refused sends, the same episode), without knocks: documents pass an unhealthy
    one over for the next, then knock."""
    [state] = template_states(conn, s, [(name, language)])
    return template_result(state, check=document_template_check(name, language))


def template_result(
    t: TemplateState, held: list[HeldLocale] | None = None, *, check: Check | None = None
) -> CheckResult:
    """The template's check: its own trouble is its episode (``template:<name>:<lang>``),
    the one its lifecycle webhooks and refused sends report to as well."""
    errs = t.problem in _ERRORS
    warns = (
        t.quality == "YELLOW"
        or bool(t.announced_category and t.announced_category != "UTILITY")
        or t.not_delivered > 0
    )
    severity = Severity.ERROR if errs else Severity.WARNING if warns else None
    waiting = sum(h.row.held for h in held or [])
    summary = describe(t)
    if waiting:
        locales = ", ".join(h.row.locale for h in held or [])
        summary += (
            f" {waiting} documents of locale {locales} hold their knock for it (no other "
            "template of theirs can be used); they go out when it recovers."
        )
    check = check or template_check(t.name, t.language)
    if check.name.startswith(DOCUMENT_TEMPLATE_PREFIX):
        summary = summary.split(" Knocks of the last day")[0]
    return result(
        check,
        severity,
        summary,
        {
            "count": 1 if severity else 0,
            "template": t.name,
            "language": t.language,
            "problem": t.problem,
            "status": t.status,
            "quality": t.quality,
            "category": t.category,
            "announced_category": t.announced_category,
            "announced_effective_at": t.announced_effective_at,
            "paused_until": t.paused_until,
            "pause_ended_by_itself": bool(t.pause_lapsed),
            "refused_code": t.refused_code,
            "knocks_last_day": t.knocks,
            "knocks_delivered": t.delivered,
            "knocks_failed": t.failed,
            "knocks_not_delivered": t.not_delivered,
            "knocks_held_for_it": waiting,
        },
        said=(
            Said(template_episode(t.name, t.language), severity is not None, severity),
            Said(check_episode(check.name), False),
        ),
    )


def check_knock_held(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """ERROR while a locale's knocks wait because none of its templates can be used. That
    is its first template's trouble: said on that template's episode, which it joins
    (one alert for the template and the knocks it holds) and never closes."""
    held = held_locales(conn, s, template_states(conn, s))
    waiting = [h for h in held if h.blamed is not None]
    released = [h for h in held if h.blamed is None]
    count = sum(h.row.held for h in waiting)
    oldest = max((h.row.oldest_age_seconds for h in waiting), default=0.0)
    parts = [
        f"{h.row.held} of locale {h.row.locale} (oldest {format_age(h.row.oldest_age_seconds)}; "
        f"{h.blamed.name} ({h.blamed.language}) is {h.blamed.problem}: "
        f"episode {template_episode(h.blamed.name, h.blamed.language)})"
        for h in waiting
        if h.blamed is not None
    ]
    if waiting:
        summary = (
            f"{count} documents hold their knock: no template of their locale can be used: "
            f"{'; '.join(parts)}. They go out when a template recovers."
        )
    else:
        summary = "No knock waits for a template."
    if released:
        again = sum(h.row.held for h in released)
        summary += f" {again} held documents have a usable template again: the next sweep knocks."
    said = [Said(check_episode(KNOCK_HELD.name), False)]
    said += [
        Said(template_episode(h.blamed.name, h.blamed.language), True, Severity.ERROR, False)
        for h in waiting
        if h.blamed is not None
    ]
    return result(
        KNOCK_HELD,
        Severity.ERROR if waiting else None,
        summary,
        {
            "count": count,
            "oldest_age_seconds": round(oldest, 1),
            "oldest_ids": sorted(i for h in waiting for i in h.row.oldest_ids),
            "by_locale": {h.row.locale: h.row.held for h in held},
            "released": sum(h.row.held for h in released),
        },
        said=tuple(said),
    )


def check_knocks_not_delivered(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    after = s.checks.knock_undelivered_seconds
    rows = QUERIES.check_knocks_not_delivered.all(
        conn,
        {
            "period": PERIOD,
            "undelivered_after": dt.timedelta(seconds=after),
            "sample": s.checks.sample_size,
        },
    )
    total = rows[0].total if rows else 0
    severity = Severity.WARNING if total else None
    if total:
        oldest = rows[0]
        summary = (
            f"{total} knocks of the last day were accepted and never reported delivered "
            f"after {format_age(after)} (oldest {format_age(oldest.age_seconds)}, template "
            f"{oldest.template} ({oldest.language})): dropped by the platform (template "
            "pacing), not unanswered. Their documents still wait on the person."
        )
    else:
        summary = f"Every knock accepted more than {format_age(after)} ago was delivered or failed."
    return result(
        KNOCK_NOT_DELIVERED,
        severity,
        summary,
        {
            "count": total,
            "oldest_age_seconds": round(rows[0].age_seconds, 1) if rows else 0.0,
            "oldest_ids": [r.id for r in rows],
            "oldest": [
                {
                    "knock": r.id,
                    "person": r.person_id,
                    "template": f"{r.template}:{r.language}",
                    "documents": r.document_ids,
                    "age": format_age(r.age_seconds),
                }
                for r in rows
            ],
            "undelivered_after_seconds": after,
        },
    )
