"""``delivery-pipeline status``: where every document is, and whether sending works.

Per state: the count and the oldest age; for the states that wait on
someone (pending, generating, undelivered, awaiting a reply) also the oldest
document's id, its last error and its next attempt. Then whether sending is
paused (and what to fix), the pacer, and each application's events outbox.
Exit status 1 while sending is paused, so a script can ask ``status || page``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.cli.failures import ExitCode
from delivery_pipeline.cli.table import print_rows
from delivery_pipeline.delivery.pause import EVERY_NUMBER
from delivery_pipeline.settings import Settings, document_template_list
from delivery_pipeline.settings.numbers import BusinessNumber
from delivery_pipeline.store import application_events
from delivery_pipeline.store.db import connect, resolve_database_url
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import StateCount
from delivery_pipeline.store.rows.core import OldestWaiting, SenderState
from delivery_pipeline.store.rows.files import WayCount
from delivery_pipeline.store.rows.templates import TemplateState
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.applications import outbox_lines
from delivery_pipeline.watch.checks.templates import describe, template_states
from delivery_pipeline.whatsapp.errors import remedy

ERROR_SHOWN = 60


@dataclass(frozen=True)
class StateLine:
    """One state: its count and oldest age, and its oldest document when it waits on someone."""

    state: str
    reason: str
    count: int
    oldest_age_seconds: float
    oldest_id: int | None = None
    oldest_last_error: str | None = None
    oldest_next_attempt_at: dt.datetime | None = None
    oldest_next_attempt_in_seconds: float | None = None

    @classmethod
    def of(cls, row: StateCount, oldest: OldestWaiting | None) -> StateLine:
        line = cls(row.state, row.reason, row.count, row.oldest_age_seconds)
        if oldest is None:
            return line
        return dataclasses.replace(
            line,
            oldest_id=oldest.oldest_id,
            oldest_last_error=oldest.oldest_last_error,
            oldest_next_attempt_at=oldest.oldest_next_attempt_at,
            oldest_next_attempt_in_seconds=oldest.oldest_next_attempt_in_seconds,
        )


# The recent share of the ways shown.
WAY_PERIOD = dt.timedelta(hours=24)


def run(args: argparse.Namespace, settings: Settings) -> int:
    with connect(resolve_database_url(settings.database)) as conn:
        counts = QUERIES.state_summary.all(conn, {})
        oldest = {row.state: row for row in QUERIES.oldest_waiting.all(conn, {})}
        # The paused first: the first row is what "sender" always showed.
        senders = QUERIES.sender_state.all(conn, {})
        pacers = [
            pacer_state(conn, settings, number) for number in settings.whatsapp.business_numbers
        ]
        templates = template_states(conn, settings)
        document_templates = template_states(
            conn, settings, document_template_list(settings.delivery)
        )
        ways = QUERIES.way_summary.all(conn, {"period": WAY_PERIOD})
        applications = application_events.outbox(conn)
    lines = [StateLine.of(row, None if row.reason else oldest.get(row.state)) for row in counts]
    pauses = [sender for sender in senders if sender.paused_at]
    paused = bool(pauses)
    if args.json:
        shown = senders[0]._asdict() if senders else None
        states = [dataclasses.asdict(line) for line in lines]
        knock_templates = [t._asdict() for t in templates]
        print(
            json.dumps(
                {
                    "states": states,
                    "sender": shown,
                    "pauses": [sender._asdict() for sender in pauses],
                    "pacer": pacers[0],
                    "pacers": pacers,
                    "knock_templates": knock_templates,
                    "document_templates": [t._asdict() for t in document_templates],
                    "ways": [w._asdict() for w in ways],
                    "application_events": [a._asdict() for a in applications],
                },
                default=str,
            )
        )
    else:
        _print_table(lines)
        print()
        for sender in pauses:
            assert sender.paused_at is not None
            hint = remedy(sender.pause_code)
            who = (
                "every sender"
                if sender.phone_number_id == EVERY_NUMBER
                else f"business number {sender.phone_number_id} (the others send)"
            )
            print(
                f"sending: PAUSED for {who} since {sender.paused_at:%Y-%m-%d %H:%M:%S %Z}:"
                f" {sender.pause_reason}" + (f"; {hint}" if hint else "")
            )
            print(
                f"  next probe: {_next_probe(sender)}; probes failed: {sender.probes}; "
                f"sends refused: {sender.refused_sends}"
            )
        if pauses:
            print("  fixed it? `delivery-pipeline resume` resumes every sender at once")
        else:
            print("sending: not paused")
        for pacer in pacers:
            print(f"pacer: {pacer['description']}")
        _print_templates(templates)
        _print_document_templates(document_templates)
        _print_ways(ways)
        for line in outbox_lines(applications):
            print(line)
    return ExitCode.ATTENTION if paused else ExitCode.DONE


def _next_probe(sender: SenderState) -> str:
    if sender.next_probe_at is None:
        return "due now"
    seconds = sender.next_probe_in_seconds or 0.0
    when = f"{sender.next_probe_at:%H:%M:%S %Z}"
    return f"{when} (in {seconds:.0f}s)" if seconds > 0 else f"{when} (due)"


def pacer_state(
    conn: psycopg.Connection[Any], settings: Settings, business: BusinessNumber | None = None
) -> dict[str, Any]:
    """A number's shared send timeline (every sender of the fleet paces on it; the
    default number's when none is given)."""
    business = business or settings.whatsapp.business_numbers[0]
    number = business.id
    limit = business.limit
    row = QUERIES.pacer_state.one(conn, {"phone_number_id": number})
    cap = settings.delivery.rate_limit
    state: dict[str, Any] = {
        "phone_number_id": number,
        "throughput_limit": limit,
        "per_process_cap": cap,
        "booked_ahead_seconds": row.booked_ahead_seconds if row else 0.0,
        "throttles": row.throttles if row else 0,
        "throttled_seconds_ago": row.throttled_seconds_ago if row else None,
    }
    text = f"{limit:g} messages/s for number {number}, shared by every sender"
    if cap is not None:
        text += f" (each process at most {cap:g}/s)"
    if row is None:
        text += "; nothing sent yet"
    else:
        text += f"; booked {state['booked_ahead_seconds']:.2f} s ahead"
        if state["throttled_seconds_ago"] is not None:
            text += (
                f"; last throttled (130429) {format_age(state['throttled_seconds_ago'])} ago, "
                f"{state['throttles']} times in all"
            )
    state["description"] = text
    return state


def _print_table(lines: list[StateLine]) -> None:
    table = [
        {
            "state": line.state,
            "reason": line.reason,
            "count": line.count,
            "oldest": format_age(line.oldest_age_seconds),
            "oldest id": line.oldest_id or "",
            "next attempt": _when(line.oldest_next_attempt_in_seconds),
            "last error": _short(line.oldest_last_error),
        }
        for line in lines
    ]
    print_rows(table, list(table[0]) if table else ["state", "count"])


def _print_templates(templates: list[TemplateState]) -> None:
    """Each knock template and language: what the platform said, and its knocks."""
    print()
    print("knock templates (DELIVERY_KNOCK_TEMPLATES, in order of preference):")
    table = [
        {
            **_platform_says(t),
            "knocks 24h": t.knocks,
            "delivered": t.delivered,
            "failed": t.failed,
            "never delivered": t.not_delivered,
        }
        for t in templates
    ]
    print_rows(table, list(table[0]) if table else ["template"])
    for t in templates:
        if t.problem != "ok" or t.announced_category or t.pause_lapsed or t.not_delivered:
            print(f"  {describe(t)}")


def _print_document_templates(templates: list[TemplateState]) -> None:
    """Each document template and language: what the platform said of it."""
    if not templates:
        return
    print()
    print("document templates (DELIVERY_DOCUMENT_TEMPLATES, in order of preference):")
    table = [_platform_says(t) for t in templates]
    print_rows(table, list(table[0]))


def _platform_says(template: TemplateState) -> dict[str, Any]:
    """A template's columns: which it is, and what the platform said of it."""
    return {
        "template": template.name,
        "language": template.language,
        "health": template.problem,
        "status": template.status or "",
        "quality": template.quality or "",
        "category": template.category or "",
    }


def _print_ways(ways: list[WayCount]) -> None:
    """Delivered documents by the way they went: parts, a file, after a knock."""
    if not ways:
        return
    print()
    shown = ", ".join(f"{w.way} {w.delivered} ({w.recent} in 24h)" for w in ways)
    print(f"delivered by way: {shown}")


def _when(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return "due now" if seconds <= 0 else f"in {format_age(seconds)}"


def _short(text: str | None) -> str:
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= ERROR_SHOWN else line[: ERROR_SHOWN - 1] + "…"
