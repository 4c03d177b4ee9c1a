"""The ops checks: one per waiting state, each with an owner, thresholds and a runbook line.

Each check reads one query of ``sql/queries_checks.sql`` and returns a
``CheckResult``: passed or not, WARN or ERROR, a one-line summary, and
metadata (count, oldest age, the ids of the oldest few rows, what to do). The
outbox of delivery events (``sql/008``) is a waiting state too. One more
check is not a state but the reverse watch: whether the webhook service
answers (``check_service_reachable``). No Dagster here:
``delivery_pipeline.dagster_defs.asset_checks`` hangs each on the asset it
judges, and the alert sensor turns results into ops alerts.

Thresholds are the ``checks`` section of the settings (``CHECK_*``); the
eligibility parameters and the messaging tier come from their own sections.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx
import psycopg

from delivery_pipeline.model import EXPECTED_ABANDON_REASONS
from delivery_pipeline.settings import Settings, without_password
from delivery_pipeline.store.queries import QUERIES, Query
from delivery_pipeline.store.rows import AgedCheck
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.alerts import AlertChannel


class Severity(enum.StrEnum):
    WARN = "warn"
    ERROR = "error"


RUNBOOK = "README.md, 'What an alert means'"


@dataclass(frozen=True)
class CheckResult:
    name: str
    owner: str
    passed: bool
    severity: Severity | None
    summary: str
    metadata: dict[str, Any]

    @property
    def count(self) -> int:
        return int(self.metadata.get("count", 0))


# Abandoned and failed documents are judged over the last day.
PERIOD_SECONDS = 24 * 3600


def _interval(seconds: float) -> dt.timedelta:
    return dt.timedelta(seconds=seconds)


# ── helpers ─────────────────────────────────────────────────────────────


def _severity(errs: bool, warns: bool) -> Severity | None:
    if errs:
        return Severity.ERROR
    if warns:
        return Severity.WARN
    return None


class AgedRow(Protocol):
    """What every waiting state's check row carries (``sql/queries_checks.sql``): the
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


@dataclass(frozen=True)
class CheckSpec:
    name: str
    owner: str
    description: str
    runbook: str
    evaluate: Callable[[psycopg.Connection[Any], Settings], CheckResult]
    # whose channel hears of it; a check owned by the reviewers is escalated to
    # ops as well when it reaches ERROR (dagster_defs/alert_sensors.py)
    channel: AlertChannel = AlertChannel.OPS


def _result(
    spec_name: str, severity: Severity | None, summary: str, metadata: dict[str, Any]
) -> CheckResult:
    spec = SPECS[spec_name]
    return CheckResult(
        name=spec.name,
        owner=spec.owner,
        passed=severity is None,
        severity=severity,
        summary=summary,
        metadata={"owner": spec.owner, **metadata, "runbook": spec.runbook},
    )


def _aged_state(
    query: Query[AgedCheck, Aged],
    name: str,
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
    return _result(name, severity, summary, metadata)


def check_pending(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    return _aged_state(
        QUERIES.check_pending,
        "pending_too_long",
        "documents pending generation",
        s.checks.pending_warn_seconds,
        s.checks.pending_error_seconds,
        conn,
        s,
    )


def check_awaiting_review(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """Documents waiting for a reviewer: the reviewers are told (with a link to their
    page) at WARN, reminded while it lasts, and ops too at ERROR."""
    result = _aged_state(
        QUERIES.check_awaiting_review,
        "awaiting_review_too_long",
        "documents awaiting review",
        s.review.warn_seconds,
        s.review.error_seconds,
        conn,
        s,
    )
    page = s.service.review_page_url
    return dataclasses.replace(
        result,
        summary=f"{result.summary} Review them at {page}" if result.count else result.summary,
        metadata={**result.metadata, "review_page": page},
    )


def check_generating(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    return _aged_state(
        QUERIES.check_generating,
        "generating_too_long",
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
    if over_warn:
        limit = (
            s.checks.undelivered_error_seconds if over_error else s.checks.undelivered_warn_seconds
        )
        summary = (
            f"{over_error or over_warn} documents eligible for delivery and not taken by "
            f"any sweep for over {format_age(limit, precise=True)} (stranded; longest "
            f"{format_age(stranded[0] if stranded else None, precise=True)}): "
            f"ids {ids}."
        )
    elif slow:
        summary = (
            f"{slow} documents undelivered for over "
            f"{format_age(s.checks.undelivered_slow_seconds, precise=True)} since generation "
            f"(retrying or claimed, not stranded); oldest {format_age(oldest, precise=True)}: "
            f"ids {ids}."
        )
    else:
        summary = (
            f"{total} documents undelivered ({eligible} eligible now), oldest "
            f"{format_age(oldest, precise=True)}: none stranded."
        )
    return _result(
        "undelivered_stranded",
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
    severity = _severity(broken, ignored)
    if broken:
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
            f"knocks of the last day: {health.knocked}, {unanswered} unanswered."
        )
    return _result(
        "awaiting_reply",
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
            "min_sample": s.checks.knock_min_sample,
        },
    )


def check_abandoned(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """Abandoned (by reason) or generation failed in the last day.

    ``stale``, ``opted_out`` and ``operator`` are expected and only counted;
    every other reason (and ``generation_failed``) is a document someone was
    owed and did not get.
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
    return _result(
        "abandoned_or_failed",
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
        return _result(
            "messaging_tier_headroom",
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
    return _result(
        "messaging_tier_headroom",
        severity,
        summary + ("" if severity else "."),
        {**metadata, "share": share, "warn_at_share": s.checks.tier_warn_share},
    )


def check_sender_paused(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    row = QUERIES.check_sender_paused.one(conn, {"sample": s.checks.sample_size})
    assert row is not None  # sender_state holds its one row from the first migration on
    waiting = row.waiting
    ids = row.waiting_ids
    if row.paused_at is None or row.age_seconds is None:
        return _result(
            "sender_paused",
            None,
            "Sending is not paused.",
            {"count": waiting, "oldest_age_seconds": 0.0, "oldest_ids": [], "paused": False},
        )
    age = row.age_seconds
    return _result(
        "sender_paused",
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
        },
    )


def check_delivery_events(conn: psycopg.Connection[Any], s: Settings) -> CheckResult:
    """The outbox is a queue too: deliveries Dagster's timeline does not show yet."""
    return _aged_state(
        QUERIES.check_delivery_events,
        "delivery_events_unrecorded",
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


SERVICE_CHECK = "webhook_service_reachable"
SERVICE_RUNBOOK = (
    "Is the webhook service running (`delivery-pipeline service`, its log)? `curl "
    "DELIVERY_SERVICE_URL/healthz` says whether it answers and reaches the database. Meanwhile "
    "Meta retries webhooks for days and the heartbeat still delivers; replies wake nothing "
    "until it is back; " + RUNBOOK
)


def check_service_reachable(service_url: str, *, timeout: float = 5.0) -> CheckResult:
    """The reverse watch: Dagster asks the webhook service's ``/healthz``."""
    url = f"{service_url}/healthz"
    shown = without_password(url)  # the check's metadata and summary are on the UI
    started = time.monotonic()
    try:
        response = httpx.get(url, timeout=timeout)
        answer = response.json() if response.is_success else {}
        problem = None if answer.get("status") == "ok" else f"HTTP {response.status_code}"
        if problem and response.content:
            problem += f": {response.text[:200]}"
    except (httpx.HTTPError, ValueError) as exc:
        answer, problem = {}, f"{type(exc).__name__}: {exc}"
    elapsed = round(time.monotonic() - started, 3)
    metadata: dict[str, Any] = {
        "owner": "ops",
        "url": shown,
        "answered_in_seconds": elapsed,
        "count": 0 if problem is None else 1,
        "schema_version": answer.get("schema_version"),
        "version": answer.get("version"),
        "runbook": SERVICE_RUNBOOK,
    }
    if problem is None:
        summary = f"The webhook service answers at {shown} and reaches its database."
    else:
        summary = f"The webhook service at {shown} is unreachable or unhealthy ({problem})."
        metadata["error"] = problem
    return CheckResult(
        name=SERVICE_CHECK,
        owner="ops",
        passed=problem is None,
        severity=None if problem is None else Severity.ERROR,
        summary=summary,
        metadata=metadata,
    )


SPECS: dict[str, CheckSpec] = {
    spec.name: spec
    for spec in (
        CheckSpec(
            "pending_too_long",
            "generator",
            "Documents waiting for generation longer than the threshold.",
            "Is the pending_generation sensor running, and the generator reachable? "
            "See the generate_documents runs; " + RUNBOOK,
            check_pending,
        ),
        CheckSpec(
            "generating_too_long",
            "generator",
            "Documents whose generation claim is older than the threshold: a dead or "
            "stuck worker (the rows are listed).",
            "A generator died or hangs: its claim expires after GENERATION_LEASE_SECONDS "
            "and another takes over; if not, check generate_documents runs; " + RUNBOOK,
            check_generating,
        ),
        CheckSpec(
            "awaiting_review_too_long",
            "reviewers",
            "Documents of a reviewed kind (DELIVERY_REVIEW_KINDS) waiting for a reviewer's "
            "decision longer than REVIEW_WARN_SECONDS / REVIEW_ERROR_SECONDS; the reviewers' "
            "channel is told, and ops at ERROR.",
            "Reviewers: approve or reject them on the review page (linked), or "
            "`delivery-pipeline documents approve|reject ID`; " + RUNBOOK,
            check_awaiting_review,
            channel=AlertChannel.REVIEWERS,
        ),
        CheckSpec(
            "undelivered_stranded",
            "delivery",
            "Generated documents a sweep would deliver now (eligible_documents) that "
            "nothing has taken for longer than the threshold; also WARNs on documents "
            "undelivered for hours while retrying.",
            "Is the delivery_heartbeat sensor running and deliver_documents succeeding? "
            "`delivery-pipeline sweep` delivers by hand; " + RUNBOOK,
            check_undelivered,
        ),
        CheckSpec(
            "awaiting_reply",
            "the person",
            "Documents knocked for and waiting on the person's reply: counted; alerts "
            "only when most knocks go undelivered (template broken) or unanswered.",
            "Check the knock template's status in WhatsApp Manager and the knocks' "
            "status events; " + RUNBOOK,
            check_awaiting_reply,
        ),
        CheckSpec(
            "abandoned_or_failed",
            "ops",
            "Documents abandoned (by reason) or whose generation failed in the last day; "
            "stale, opted_out and operator are expected and only counted.",
            "`delivery-pipeline documents show ID` for the reason and the last error; " + RUNBOOK,
            check_abandoned,
        ),
        CheckSpec(
            "messaging_tier_headroom",
            "ops",
            "Unique people reached outside the window (knocked) in the rolling 24 h "
            "versus the messaging tier limit (WHATSAPP_MESSAGING_TIER).",
            "Near the limit further knocks are refused: raise the tier in WhatsApp "
            "Manager or set WHATSAPP_MESSAGING_TIER; " + RUNBOOK,
            check_tier,
        ),
        CheckSpec(
            "sender_paused",
            "ops",
            "Sending is paused by a global error (expired token, unknown phone number "
            "id, missing template, restricted account): ERROR at once.",
            "Fix the credential/template/account named in the reason; the next "
            "successful send resumes by itself; " + RUNBOOK,
            check_sender_paused,
        ),
        CheckSpec(
            "delivery_events_unrecorded",
            "ops",
            "Deliveries, knocks and abandonments not yet on Dagster's delivered_documents "
            "timeline (the delivery_events outbox): recording is late, not delivery.",
            "Is the record_delivery_events sensor running, and can the webhook service reach "
            "DAGSTER_WEBSERVER_URL? The rows wait in delivery_events and are recorded once "
            "either works again; " + RUNBOOK,
            check_delivery_events,
        ),
    )
}

CHECK_NAMES = tuple(SPECS)


def evaluate(name: str, conn: psycopg.Connection[Any], settings: Settings) -> CheckResult:
    """Run one check by name."""
    return SPECS[name].evaluate(conn, settings)


def evaluate_all(conn: psycopg.Connection[Any], settings: Settings) -> list[CheckResult]:
    return [spec.evaluate(conn, settings) for spec in SPECS.values()]
