"""``delivery-pipeline status``: where every document is, and whether sending works.

Per state: the count and the oldest age; for the states that wait on
someone (pending, generating, undelivered, awaiting a reply) also the oldest
document's id, its last error and its next attempt. Then whether sending is
paused (and what to fix), and the pacer. Exit status 1 while sending is
paused, so a script can ask ``status || page``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import psycopg
from psycopg.rows import DictRow

from delivery_pipeline.cli.failures import ExitCode
from delivery_pipeline.cli.table import print_rows
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, resolve_database_url
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.whatsapp.errors import remedy

ERROR_SHOWN = 60
_OLDEST = (
    "oldest_id",
    "oldest_last_error",
    "oldest_next_attempt_at",
    "oldest_next_attempt_in_seconds",
)


def run(args: argparse.Namespace, settings: Settings) -> int:
    with connect(resolve_database_url(settings.database)) as conn:
        rows = conn.execute(QUERIES.state_summary).fetchall()
        oldest = {r["state"]: r for r in conn.execute(QUERIES.oldest_waiting).fetchall()}
        sender = conn.execute(QUERIES.sender_state).fetchone()
        pacer = pacer_state(conn, settings)
    for row in rows:
        found = oldest.get(row["state"]) if not row["reason"] else None
        for key in _OLDEST:
            row[key] = found[key] if found else None
    paused = bool(sender and sender["paused_at"])
    if args.json:
        print(json.dumps({"states": rows, "sender": sender, "pacer": pacer}, default=str))
    else:
        _print_table(rows)
        print()
        if paused and sender:
            hint = remedy(sender["pause_code"])
            print(
                f"sending: PAUSED since {sender['paused_at']:%Y-%m-%d %H:%M:%S %Z}: "
                f"{sender['pause_reason']}" + (f"; {hint}" if hint else "")
            )
        else:
            print("sending: not paused")
        print(f"pacer: {pacer['description']}")
    return ExitCode.ATTENTION if paused else ExitCode.DONE


def pacer_state(conn: psycopg.Connection[DictRow], settings: Settings) -> dict[str, Any]:
    """The number's shared send timeline (every sender of the fleet paces on it)."""
    number = settings.whatsapp.phone_number_id
    limit = settings.whatsapp.throughput_limit
    row = conn.execute(QUERIES.pacer_state, {"phone_number_id": number}).fetchone()
    cap = settings.delivery.rate_limit
    state: dict[str, Any] = {
        "phone_number_id": number,
        "throughput_limit": limit,
        "per_process_cap": cap,
        "booked_ahead_seconds": row["booked_ahead_seconds"] if row else 0.0,
        "throttles": row["throttles"] if row else 0,
        "throttled_seconds_ago": row["throttled_seconds_ago"] if row else None,
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


def _print_table(rows: list[dict[str, Any]]) -> None:
    table = [
        {
            "state": row["state"],
            "reason": row["reason"],
            "count": row["count"],
            "oldest": format_age(row["oldest_age_seconds"]),
            "oldest id": row["oldest_id"] or "",
            "next attempt": _when(row["oldest_next_attempt_in_seconds"]),
            "last error": _short(row["oldest_last_error"]),
        }
        for row in rows
    ]
    print_rows(table, list(table[0]) if table else ["state", "count"])


def _when(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return "due now" if seconds <= 0 else f"in {format_age(seconds)}"


def _short(text: str | None) -> str:
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= ERROR_SHOWN else line[: ERROR_SHOWN - 1] + "…"
