"""The daily delivery report: what reached people, how fast, and what did not.

One UTC day's raw rows (``sql/queries/report.sql``) into pandas: documents
generated and delivered, time from generated to delivered (p50/p95), chunks
delivered and read, knocks sent / delivered / seen / answered, and abandoned
by reason, and delivered documents by the way they went (text parts, one
file on a document template, one document message, either after a knock).
"Seen" (a ``read`` status on the knock) against "answered" (the
person wrote after it) is what tells not-seen from not-wanted.

Every knock that left in the day (``knocks``, reminders included) has one
outcome: answered (Send it or any reply), Later, Stop, or unanswered, split
into never delivered (the platform's doing), expired (not delivered within its
template's time to live, so dropped), delivered and not read (not seen) and
read and not answered (not wanted): the seed's "cannot tell not
seen from not wanted" as numbers. Every press (and its word) is counted too.

Chunks and knocks are counted by the day they were sent; their delivered,
read and answered flags are as of when the report runs (a read after midnight
still counts for the day the message went out). No Dagster here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import psycopg

from delivery_pipeline.model import Way
from delivery_pipeline.store.queries import QUERIES, Query
from delivery_pipeline.store.rows.common import DayBounds

# The ways a document reaches its person (documents.way, sql/migrations/039).
WAYS = tuple(Way)


@dataclass(frozen=True)
class DeliveryReport:
    day: dt.date
    numbers: dict[str, Any]
    abandoned_by_reason: dict[str, int]
    by_kind: pd.DataFrame
    # Per business number (sql/migrations/027): documents delivered, chunks sent, knocks that left.
    by_number: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    def markdown(self) -> str:
        n = self.numbers
        lines = [
            f"**Delivery report {self.day.isoformat()} (UTC)**",
            "",
            "| | |",
            "|---|---:|",
            f"| documents generated | {n['documents_generated']} |",
            f"| documents delivered | {n['documents_delivered']} |",
            f"| generated → delivered p50 | {_duration(n['time_to_deliver_p50_seconds'])} |",
            f"| generated → delivered p95 | {_duration(n['time_to_deliver_p95_seconds'])} |",
            f"| chunks sent / delivered / read | {n['chunks_sent']} / {n['chunks_delivered']} / "
            f"{n['chunks_read']} |",
            f"| knocks sent / delivered / seen / answered | {n['knocks_sent']} / "
            f"{n['knocks_delivered']} / {n['knocks_seen']} / {n['knocks_answered']} |",
            f"| unanswered knocks: never delivered / expired / not seen / not wanted | "
            f"{n['knocks_never_delivered']} / {n['knocks_expired']} / {n['knocks_not_seen']} / "
            f"{n['knocks_not_wanted']} |",
            f"| knocks answered Later / Stop (of {n['knocks_left']} that left, "
            f"{n['reminders_sent']} reminders) | {n['knocks_later']} / {n['knocks_stop']} |",
            f"| presses Send it / Later / Stop / Start | {n['presses_send']} / "
            f"{n['presses_later']} / {n['presses_stop']} / {n['presses_start']} |",
            f"| delivered as parts / file / file in window / knock then parts / knock then file "
            f"| {' / '.join(str(n.get(f'delivered_{way}', 0)) for way in WAYS)} |",
            f"| abandoned or failed | {n['abandoned_total']} |",
        ]
        for reason, count in self.abandoned_by_reason.items():
            lines.append(f"| — {reason} | {count} |")
        for row in self.by_number.to_dict("records"):
            lines.append(
                f"| from number {str(row['phone_number_id']) or '(none)'}: delivered / chunks "
                f"/ knocks | {row['delivered']} / {row['chunks_sent']} / {row['knocks_left']} |"
            )
        return "\n".join(lines)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _frame(
    conn: psycopg.Connection[Any], query: Query[DayBounds, Any], params: DayBounds
) -> pd.DataFrame:
    """The query's rows as a frame whose columns are its row type's fields."""
    return pd.DataFrame(query.all(conn, params), columns=list(query.row._fields))


def _quantile(values: pd.Series, q: float) -> float | None:
    if values.empty:
        return None
    value = float(values.quantile(q))
    return None if math.isnan(value) else round(value, 1)


def day_bounds(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    return start, start + dt.timedelta(days=1)


def delivery_report(conn: psycopg.Connection[Any], day: dt.date) -> DeliveryReport:
    """The report for one UTC day."""
    start, end = day_bounds(day)
    params: DayBounds = {"start": start, "end": end}
    docs = _frame(conn, QUERIES.report_documents, params)
    chunks = _frame(conn, QUERIES.report_chunks, params)
    knocks = _frame(conn, QUERIES.report_knocks, params)
    abandoned = _frame(conn, QUERIES.report_abandoned, params)
    outcomes = _frame(conn, QUERIES.report_knock_outcomes, params)
    presses = _frame(conn, QUERIES.report_knock_presses, params)

    generated = docs[docs["generated_in_day"].fillna(False).astype(bool)]
    delivered = docs[docs["delivered_in_day"].fillna(False).astype(bool)]
    waits = (
        pd.to_datetime(delivered["delivered_at"], utc=True)
        - pd.to_datetime(delivered["generated_at"], utc=True)
    ).dt.total_seconds()
    by_reason = {str(k): int(v) for k, v in abandoned["reason"].value_counts().sort_index().items()}

    kinds = sorted(set(docs["kind"]))
    by_kind = pd.DataFrame(
        {
            "kind": kinds,
            "generated": [int((generated["kind"] == k).sum()) for k in kinds],
            "delivered": [int((delivered["kind"] == k).sum()) for k in kinds],
        },
        columns=["kind", "generated", "delivered"],
    )

    senders = sorted(
        set(delivered["phone_number_id"])
        | set(chunks["phone_number_id"])
        | set(outcomes["phone_number_id"])
    )
    by_number = pd.DataFrame(
        {
            "phone_number_id": senders,
            "delivered": [int((delivered["phone_number_id"] == n).sum()) for n in senders],
            "chunks_sent": [int((chunks["phone_number_id"] == n).sum()) for n in senders],
            "knocks_left": [int((outcomes["phone_number_id"] == n).sum()) for n in senders],
        },
        columns=["phone_number_id", "delivered", "chunks_sent", "knocks_left"],
    )

    numbers: dict[str, Any] = {
        "documents_generated": len(generated),
        "documents_delivered": len(delivered),
        "time_to_deliver_p50_seconds": _quantile(waits, 0.50),
        "time_to_deliver_p95_seconds": _quantile(waits, 0.95),
        "chunks_sent": len(chunks),
        "chunks_delivered": int(chunks["delivered"].sum()),
        "chunks_read": int(chunks["read"].sum()),
        "knocks_sent": len(knocks),
        "knocks_delivered": int(knocks["delivered"].sum()),
        "knocks_seen": int(knocks["seen"].sum()),
        "knocks_answered": int(knocks["answered"].sum()),
        "abandoned_total": int(sum(by_reason.values())),
        **knock_outcome_numbers(outcomes, presses),
    }
    for reason, count in by_reason.items():
        numbers[f"abandoned_{reason}"] = count
    for way in WAYS:
        numbers[f"delivered_{way}"] = int((delivered["way"] == way).sum())
    return DeliveryReport(
        day=day,
        numbers=numbers,
        abandoned_by_reason=by_reason,
        by_kind=by_kind,
        by_number=by_number,
    )


KNOCK_OUTCOMES = (
    "answered",
    "later",
    "stop",
    "not_wanted",
    "not_seen",
    "expired",
    "never_delivered",
)
_OUTCOME_NUMBER = {
    "answered": "knocks_answered_any",
    "later": "knocks_later",
    "stop": "knocks_stop",
    "not_wanted": "knocks_not_wanted",
    "not_seen": "knocks_not_seen",
    "expired": "knocks_expired",
    "never_delivered": "knocks_never_delivered",
}


def knock_outcome_numbers(outcomes: pd.DataFrame, presses: pd.DataFrame) -> dict[str, int]:
    """Each knock that left, by its one outcome, and each press by what it asked."""
    counts = outcomes["outcome"].value_counts()
    numbers = {"knocks_left": len(outcomes), "reminders_sent": int(outcomes["reminder"].sum())}
    for outcome in KNOCK_OUTCOMES:
        numbers[_OUTCOME_NUMBER[outcome]] = int(counts.get(outcome, 0))
    numbers["knocks_unanswered"] = (
        numbers["knocks_never_delivered"]
        + numbers["knocks_expired"]
        + numbers["knocks_not_seen"]
        + numbers["knocks_not_wanted"]
    )
    for action in ("send", "later", "stop", "start"):
        numbers[f"presses_{action}"] = int(
            presses.loc[presses["action"] == action, "presses"].sum()
        )
    return numbers
