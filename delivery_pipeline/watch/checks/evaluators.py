"""The waiting states' evaluators: one per check of ``registry.STATE_CHECKS``.

Each reads one query of ``sql/queries/checks.sql`` and returns a
``CheckResult``: passed or not, WARNING or ERROR, a one-line summary, and
metadata (count, oldest age, the ids of the oldest few rows, what to do). The
outbox of delivery events (``sql/migrations/008``) is a waiting state too. Names,
owners and runbooks are the registry's; thresholds are the ``checks`` section
of the settings (``CHECK_*``), the eligibility parameters and the messaging
tier come from their own sections.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import psycopg

from delivery_pipeline.model import EXPECTED_ABANDON_REASONS, Severity
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.queries import QUERIES, Query
from delivery_pipeline.store.rows.checks import AgedCheck
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.checks import registry
from delivery_pipeline.watch.checks.registry import Check, CheckResult, result

# Abandoned and failed documents are judged over the last day.
PERIOD_SECONDS = 24 * 3600


def _interval(seconds: float) -> dt.timedelta:
    return dt.timedelta(seconds=seconds)


# ── helpers ─────────────────────────────────────────────────────────────


def _severity(errs: bool, warns: bool) -> Severity | None:
    if errs:
        return Severity.ERROR
    if warns:
        return Severity.WARNING
    return None


class AgedRow(Protocol):
    """What every waiting state's check row carries (``sql/queries/checks.sql``): the
    document, its age, and the totals of the whole state on every row."""

    @property
    def id(self) -> int: ...
    @property
    def age_seconds(self) -> float: ...
    @property
    def total(self) -> int: ...
    @property
    def over_warn(self) -> int: ...
    @property
    def over_error(self) -> int: ...


Aged = TypeVar("Aged", bound=AgedRow)


# ── the checks ──────────────────────────────────────────────────────────


def _aged_state(
    query: Query[AgedCheck, Aged],
    check: Check,
    noun: str,
    warn: float,
    error: float,
    conn: psycopg.Connection[Any],
    s: Settings,
    listed: Callable[[Aged], dict[str, Any]] | None = None,
) -> CheckResult:
    rows = query.all(
        conn, {"warn": _interval(warn), "error": _interval(error), "sample": s.checks.sample_size}
    )
    first = rows[0] if rows else None
    total, over_warn, over_error = (
        (first.total, first.over_warn, first.over_error) if first else (0, 0, 0)
    )
    oldest = first.age_seconds if first else 0.0
    ids = [row.id for row in rows]
    severity = _severity(over_error > 0, over_warn > 0)
    limit = error if severity is Severity.ERROR else warn
    over = over_error if severity is Severity.ERROR else over_warn
    if severity is None:
        summary = (
            f"{total} {noun}, oldest {format_age(oldest, precise=True)}: "
            f"within {format_age(warn, precise=True)}."
        )
    else:
        summary = (
            f"{over} {noun} for over {format_age(limit, precise=True)} (of {total}); oldest "
            f"{format_age(oldest, precise=True)}: ids {', '.join(map(str, ids))}."
        )
    metadata: dict[str, Any] = {
        "count": total,
        "over_warn": over_warn,
        "over_error": over_error,
        "oldest_age_seconds": round(oldest, 1),
        "oldest_ids": ids,
        "warn_after_seconds": warn,
        "error_after_seconds": error,
    }
    if listed is not None:
        metadata["rows"] = [listed(row) for row in rows]
    return result(check, severity, summary, metadata)


def check_pending(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    return _aged_state(
        QUERIES.check_pending,
        registry.PENDING,
        "documents pending generation",
        s.checks.pending_warn_seconds,
        s.checks.pending_error_seconds,
        conn,
        s,
    )


def check_awaiting_review(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """Documents waiting for a reviewer: the reviewers are told (with a link to their
    page) at WARN, reminded while it lasts, and ops too at ERROR."""
    aged = _aged_state(
        QUERIES.check_awaiting_review,
        registry.AWAITING_REVIEW,
        "documents awaiting review",
        s.review.warn_seconds,
        s.review.error_seconds,
        conn,
        s,
    )
    page = s.service.review_page_url
    return dataclasses.replace(
        aged,
        summary=f"{aged.summary} Review them at {page}" if aged.count else aged.summary,
        metadata={**aged.metadata, "review_page": page},
    )


def check_generating(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    return _aged_state(
        QUERIES.check_generating,
        registry.GENERATING,
        "documents generating",
        s.checks.generating_warn_seconds,
        s.checks.generating_error_seconds,
        conn,
        s,
        listed=lambda r: {
            "id": r.id,
            "person_id": r.person_id,
            "kind": r.kind,
            "attempts": r.attempts,
            "claimed_for": format_age(r.age_seconds, precise=True),
        },
    )


def check_undelivered(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """Stranded: eligible now (the one eligibility function) and due for too long.

    A document in backoff or under a live claim is not eligible, so it is not
    stranded; but one undelivered for longer than ``undelivered_slow_seconds``
    since generation still WARNs (retrying for hours is worth a look), never
    ERRORs by that alone. Documents waiting on a knock reply are the person's.
    """
    rows = QUERIES.check_undelivered.all(
        conn,
        {
            **s.delivery.eligibility,
            "warn": _interval(s.checks.undelivered_warn_seconds),
            "error": _interval(s.checks.undelivered_error_seconds),
            "slow": _interval(s.checks.undelivered_slow_seconds),
            "sample": s.checks.sample_size,
        },
    )
    first = rows[0] if rows else None
    total, eligible, over_warn, over_error, slow = (
        (first.total, first.eligible_total, first.over_warn, first.over_error, first.over_slow)
        if first
        else (0, 0, 0, 0, 0)
    )
    oldest = first.oldest_age_seconds if first else 0.0
    stranded = [
        r.stranded_seconds
        for r in rows
        if r.stranded_seconds is not None
        and r.stranded_seconds >= s.checks.undelivered_warn_seconds
    ]
    severity = _severity(over_error > 0, over_warn > 0 or slow > 0)
    ids = ", ".join(str(r.id) for r in rows)
    summary = _undelivered_summary(
        s, total, eligible, over_warn, over_error, slow, oldest, stranded, ids
    )
    return result(
        registry.UNDELIVERED,
        severity,
        summary,
        {
            "count": total,
            "eligible": eligible,
            "stranded_over_warn": over_warn,
            "stranded_over_error": over_error,
            "slow": slow,
            "oldest_age_seconds": round(oldest, 1),
            "longest_stranded_seconds": round(stranded[0], 1) if stranded else 0.0,
            "oldest_ids": [r.id for r in rows],
            "rows": [
                {
                    "id": r.id,
                    "eligible": r.eligible,
                    "action": r.action,
                    "attempts": r.attempts,
                    "age": format_age(r.age_seconds, precise=True),
                    "error": r.error,
                }
                for r in rows
            ],
            "warn_after_seconds": s.checks.undelivered_warn_seconds,
            "error_after_seconds": s.checks.undelivered_error_seconds,
        },
    )


def _undelivered_summary(
    s: Settings,
    total: int,
    eligible: int,
    over_warn: int,
    over_error: int,
    slow: int,
    oldest: float,
    stranded: list[float],
    ids: str,
) -> str:
    """What ``check_undelivered`` says: the stranded first, then the slow, else the count."""
    if over_warn:
        limit = (
            s.checks.undelivered_error_seconds if over_error else s.checks.undelivered_warn_seconds
        )
        return (
            f"{over_error or over_warn} documents eligible for delivery and not taken by "
            f"any sweep for over {format_age(limit, precise=True)} (stranded; longest "
            f"{format_age(stranded[0] if stranded else None, precise=True)}): "
            f"ids {ids}."
        )
    if slow:
        return (
            f"{slow} documents undelivered for over "
            f"{format_age(s.checks.undelivered_slow_seconds, precise=True)} since generation "
            f"(retrying or claimed, not stranded); oldest {format_age(oldest, precise=True)}: "
            f"ids {ids}."
        )
    return (
        f"{total} documents undelivered ({eligible} eligible now), oldest "
        f"{format_age(oldest, precise=True)}: none stranded."
    )


def _share(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


def check_awaiting_reply(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """Counted always; alerts only when knocks look broken or go unanswered en masse."""
    waiting = QUERIES.check_awaiting_reply.all(conn, {"sample": s.checks.sample_size})
    health = QUERIES.check_knock_health.one(
        conn,
        {
            "period": _interval(PERIOD_SECONDS),
            "settle": _interval(s.checks.knock_settle_seconds),
            "answer_grace": _interval(s.checks.knock_answer_grace_seconds),
            # A knock past its deadline is ended by the next sweep or heartbeat tick;
            # one still open a settle period after its grace has no owner running.
            "overdue": _interval(
                s.delivery.template_ttl_grace_seconds + s.checks.knock_settle_seconds
            ),
            "sample": s.checks.sample_size,
        },
    )
    assert health is not None  # an aggregate without GROUP BY: always one row
    total = waiting[0].total if waiting else 0
    oldest = waiting[0].age_seconds if waiting else 0.0
    settled, not_delivered = health.settled, health.not_delivered
    answerable, unanswered = health.answerable, health.unanswered
    undelivered_share = _share(not_delivered, settled)
    unanswered_share = _share(unanswered, answerable)
    broken = (
        settled >= s.checks.knock_min_sample
        and undelivered_share > s.checks.knock_undelivered_share
    )
    ignored = (
        answerable >= s.checks.knock_min_sample
        and unanswered_share > s.checks.knock_unanswered_share
    )
    overdue = health.overdue > 0
    severity = _severity(broken or overdue, ignored)
    if overdue:
        summary = (
            f"{health.overdue} knocks are past their time to live with no delivered status "
            "and nothing has ended them: is the delivery_heartbeat sensor running?"
        )
    elif broken:
        summary = (
            f"{not_delivered} of {settled} knocks of the last day were never reported "
            f"delivered ({undelivered_share:.0%}): has the knock template stopped "
            f"working? ids {', '.join(map(str, health.not_delivered_ids))}."
        )
    elif ignored:
        summary = (
            f"{unanswered} of {answerable} knocks of the last day are unanswered "
            f"({unanswered_share:.0%}); {total} documents wait on a reply."
        )
    else:
        summary = (
            f"{total} documents wait on a knock reply, oldest {format_age(oldest, precise=True)}; "
            f"knocks of the last day: {health.knocked}, {unanswered} unanswered, "
            f"{health.expired} expired."
        )
    return result(
        registry.AWAITING_REPLY,
        severity,
        summary,
        {
            "count": total,
            "oldest_age_seconds": round(oldest, 1),
            "oldest_ids": [row.id for row in waiting],
            "knocked_last_day": health.knocked,
            "knocks_not_delivered": not_delivered,
            "knocks_failed": health.failed,
            "knocks_not_delivered_share": undelivered_share,
            "knocks_unanswered": unanswered,
            "knocks_unanswered_share": unanswered_share,
            "knocks_not_delivered_ids": health.not_delivered_ids,
            "knocks_expired": health.expired,
            "knocks_overdue": health.overdue,
            "min_sample": s.checks.knock_min_sample,
        },
    )


def check_abandoned(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """Abandoned (by reason) or generation failed in the last day.

    The reasons of ``model.EXPECTED_ABANDON_REASONS`` are expected and only
    counted (the check's description names them); every other reason (and
    ``generation_failed``) is a document someone was owed and did not get.
    """
    rows = QUERIES.check_abandoned_recent.all(
        conn, {"period": _interval(PERIOD_SECONDS), "sample": s.checks.sample_size}
    )
    by_reason = {r.reason: r.count for r in rows}
    problems = [r for r in rows if r.reason not in EXPECTED_ABANDON_REASONS]
    problem_count = sum(r.count for r in problems)
    oldest = max((r.oldest_age_seconds for r in problems), default=0.0)
    ids = sorted(i for r in problems for i in r.oldest_ids)[: s.checks.sample_size]
    severity = _severity(
        problem_count >= s.checks.abandoned_error_count,
        problem_count >= s.checks.abandoned_warn_count,
    )
    reasons = ", ".join(f"{r.reason} {r.count}" for r in problems) or "none"
    if severity is None:
        summary = (
            f"No document lost in the last day ({sum(by_reason.values())} abandoned "
            "for expected reasons)."
        )
    else:
        summary = (
            f"{problem_count} documents abandoned or failed in the last day ({reasons}): "
            f"ids {', '.join(map(str, ids))}."
        )
    return result(
        registry.ABANDONED,
        severity,
        summary,
        {
            "count": problem_count,
            "total_including_expected": sum(by_reason.values()),
            "by_reason": by_reason,
            "oldest_age_seconds": round(oldest, 1),
            "oldest_ids": ids,
            "warn_at_count": s.checks.abandoned_warn_count,
            "error_at_count": s.checks.abandoned_error_count,
        },
    )


def check_tier(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    rows = QUERIES.check_tier_usage.all(conn, {"sample": s.checks.sample_size})
    reached = rows[0].total if rows else 0
    oldest = rows[0].age_seconds if rows else 0.0
    metadata: dict[str, Any] = {
        "count": reached,
        "tier_limit": s.checks.tier_limit if s.checks.tier_limit else "unlimited",
        "oldest_age_seconds": round(oldest, 1),
        "oldest_ids": [row.person_id for row in rows],
    }
    if s.checks.tier_limit is None:
        return result(
            registry.TIER,
            None,
            f"{reached} people reached outside the window in 24 h; tier unlimited.",
            {**metadata, "share": 0.0},
        )
    share = _share(reached, s.checks.tier_limit)
    severity = _severity(share >= s.checks.tier_error_share, share >= s.checks.tier_warn_share)
    summary = (
        f"{reached} of {s.checks.tier_limit} unique people reached outside the window in the "
        f"rolling 24 h ({share:.0%} of the messaging tier)"
    )
    if severity is not None:
        summary += (
            f"; the oldest knock leaves the 24 h in "
            f"{format_age(max(24 * 3600 - oldest, 0), precise=True)}."
        )
    return result(
        registry.TIER,
        severity,
        summary + ("" if severity else "."),
        {**metadata, "share": share, "warn_at_share": s.checks.tier_warn_share},
    )


def check_sender_paused(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    row = QUERIES.check_sender_paused.one(conn, {"sample": s.checks.sample_size})
    assert row is not None  # sender_state holds the '*' row from the first migration on
    waiting = row.waiting
    ids = row.waiting_ids
    # A number paused on its own is the engine's own alert (number_paused:<id>), one
    # episode per number; the check stays about every sender, and names them.
    numbers = ", ".join(row.paused_numbers)
    if row.paused_at is None or row.age_seconds is None:
        return result(
            registry.SENDER_PAUSED,
            None,
            "Sending is not paused"
            + (f" for every sender (paused on their own: numbers {numbers})." if numbers else "."),
            {
                "count": waiting,
                "oldest_age_seconds": 0.0,
                "oldest_ids": [],
                "paused": False,
                "paused_numbers": numbers,
            },
        )
    age = row.age_seconds
    return result(
        registry.SENDER_PAUSED,
        Severity.ERROR,
        f"Sending is paused by a global error since {format_age(age, precise=True)} ago "
        f"(code {row.pause_code}: {row.pause_reason}); {waiting} documents "
        "wait behind it.",
        {
            "count": waiting,
            "oldest_age_seconds": round(age, 1),
            "oldest_ids": ids,
            "paused": True,
            "pause_code": row.pause_code,
            "pause_reason": row.pause_reason,
            "paused_numbers": numbers,
        },
    )


def check_delivery_events(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """The outbox is a queue too: deliveries Dagster's timeline does not show yet."""
    return _aged_state(
        QUERIES.check_delivery_events,
        registry.DELIVERY_EVENTS,
        "deliveries not yet on the delivered_documents timeline",
        s.checks.events_warn_seconds,
        s.checks.events_error_seconds,
        conn,
        s,
        listed=lambda r: {
            "document": r.id,
            "event": r.event,
            "source": r.source,
            "held_by": r.claimed_by,
            "age": format_age(r.age_seconds, precise=True),
        },
    )


Evaluate = Callable[[psycopg.Connection[Any], Settings], CheckResult]

EVALUATORS: dict[Check, Evaluate] = {
    registry.PENDING: check_pending,
    registry.GENERATING: check_generating,
    registry.AWAITING_REVIEW: check_awaiting_review,
    registry.UNDELIVERED: check_undelivered,
    registry.AWAITING_REPLY: check_awaiting_reply,
    registry.ABANDONED: check_abandoned,
    registry.TIER: check_tier,
    registry.SENDER_PAUSED: check_sender_paused,
    registry.DELIVERY_EVENTS: check_delivery_events,
}
if tuple(EVALUATORS) != registry.STATE_CHECKS:
    raise ImportError("every waiting state's check needs one evaluator, in the registry's order")


def evaluate(name: str, conn: psycopg.Connection[Any], settings: Settings) -> CheckResult:
    """Run one waiting state's check by name."""
    return next(run for check, run in EVALUATORS.items() if check.name == name)(conn, settings)


def evaluate_all(conn: psycopg.Connection[Any], settings: Settings) -> list[CheckResult]:
    return [run(conn, settings) for run in EVALUATORS.values()]
