"""The knock templates' checks: one per template and language, and the knocks'.

* ``knock_template_<name>_<language>`` (owner: the template), one per
  template of ``DELIVERY_KNOCK_TEMPLATES``: ERROR when the platform paused,
  disabled, rejected or flagged it, when a send was refused naming it, when
  its quality is RED or it is no longer UTILITY; WARN on YELLOW quality, an
  announced re-categorisation, or knocks on it accepted and never delivered.
  A pause that ended by itself (3 h / 6 h passed without another word) is
  said so, and passes: knocks use it again.
* ``knock_held`` (owner: the template): documents whose knock waits because
  no template of their locale can be used: ERROR while any waits.
* ``knock_not_delivered`` (owner: the template): knocks accepted and never
  reported delivered, read or failed after ``CHECK_KNOCK_UNDELIVERED_SECONDS``
  (template pacing drops sends that way): WARN, listed; not to be confused
  with a delivered knock nobody answered (``awaiting_reply``).

Names, owner and runbook are ``registry``'s; no Dagster here:
``dagster_defs.asset_checks`` hangs them on ``delivered_documents``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg

from delivery_pipeline.model import Severity
from delivery_pipeline.settings import Settings, knock_template_list
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import TemplateState
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.checks.registry import (
    KNOCK_HELD,
    KNOCK_NOT_DELIVERED,
    CheckResult,
    result,
    template_check,
)

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


def template_states(conn: psycopg.Connection[Any], s: Settings) -> list[TemplateState]:
    """Every knock template of the settings, in order, with its state and recent knocks."""
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


def check_knock_template(
    conn: psycopg.Connection[Any], s: Settings, name: str, language: str
) -> CheckResult:
    state = next(t for t in template_states(conn, s) if (t.name, t.language) == (name, language))
    return template_result(state)


def template_result(t: TemplateState) -> CheckResult:
    errs = t.problem in _ERRORS
    warns = (
        t.quality == "YELLOW"
        or bool(t.announced_category and t.announced_category != "UTILITY")
        or t.not_delivered > 0
    )
    severity = Severity.ERROR if errs else Severity.WARNING if warns else None
    return result(
        template_check(t.name, t.language),
        severity,
        describe(t),
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
        },
    )


def check_knock_held(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    held = QUERIES.knock_held_count.one(conn, {})
    assert held is not None  # an aggregate: always one row
    severity = Severity.ERROR if held.count else None
    summary = (
        f"{held.count} documents hold their knock: no template of their locale can be used "
        f"(oldest {format_age(held.oldest_age_seconds, precise=True)}). They go out when a "
        "template recovers."
        if held.count
        else "No knock waits for a template."
    )
    return result(
        KNOCK_HELD,
        severity,
        summary,
        {"count": held.count, "oldest_age_seconds": round(held.oldest_age_seconds, 1)},
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
