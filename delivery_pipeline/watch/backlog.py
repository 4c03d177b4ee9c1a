"""The backlog: how many documents wait in each state, and for how long.

One query over the ``document_states`` view (``sql/queries/backlog.sql``),
shaped into a pandas DataFrame with a fixed set of rows (zeros included, so a
chart over time has no gaps) and into flat numbers for the Dagster UI to plot.
No Dagster here.

Waiting states count every document in them; ``delivered`` and ``abandoned``
count today's (UTC) only.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import psycopg

from delivery_pipeline.model import WAITING_STATE_OWNERS, AbandonReason
from delivery_pipeline.store.queries import QUERIES

COLUMNS = ["state", "reason", "owner", "count", "oldest_age_seconds"]


def backlog_frame(conn: psycopg.Connection[Any]) -> pd.DataFrame:
    """Count and oldest age per state, one row per state (abandoned: per reason)."""
    found = {(r.state, r.reason): r for r in QUERIES.backlog_by_state.all(conn, {})}
    rows: list[dict[str, Any]] = []
    for state, owner in WAITING_STATE_OWNERS.items():
        row = found.pop((state, ""), None)
        rows.append(
            {
                "state": state,
                "reason": "",
                "owner": owner,
                "count": row.count if row else 0,
                "oldest_age_seconds": round(row.oldest_age_seconds, 1) if row else 0.0,
            }
        )
    delivered = found.pop(("delivered", ""), None)
    rows.append(
        {
            "state": "delivered_today",
            "reason": "",
            "owner": "-",
            "count": delivered.count if delivered else 0,
            "oldest_age_seconds": math.nan,
        }
    )
    reasons = list(AbandonReason) + sorted(
        reason
        for state, reason in found
        if state == "abandoned" and reason not in frozenset(AbandonReason)
    )
    for reason in reasons:
        row = found.get(("abandoned", reason))
        rows.append(
            {
                "state": "abandoned_today",
                "reason": reason,
                "owner": "ops",
                "count": row.count if row else 0,
                "oldest_age_seconds": math.nan,
            }
        )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.astype({"count": "int64", "oldest_age_seconds": "float64"})


def backlog_numbers(frame: pd.DataFrame) -> dict[str, float | int]:
    """Flat numbers (``pending_count``, ``pending_oldest_age_seconds``, …) to plot over time."""
    numbers: dict[str, float | int] = {}
    for row in frame.to_dict("records"):
        if row["state"] == "abandoned_today":
            numbers[f"abandoned_today_{row['reason']}_count"] = int(row["count"])
            continue
        numbers[f"{row['state']}_count"] = int(row["count"])
        if not math.isnan(row["oldest_age_seconds"]):
            numbers[f"{row['state']}_oldest_age_seconds"] = round(
                float(row["oldest_age_seconds"]), 1
            )
    waiting = set(WAITING_STATE_OWNERS)
    numbers["waiting_total"] = int(frame.loc[frame["state"].isin(waiting), "count"].sum())
    numbers["abandoned_today_total"] = int(
        frame.loc[frame["state"] == "abandoned_today", "count"].sum()
    )
    return numbers


def sending_pause(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Whether sending is paused (for every number, or for some), its cause, since
    when and the next probe: beside the backlog, since a pause is why
    ``undelivered`` grows. The first pause is shown (every number's, if it is)."""
    pauses = [state for state in QUERIES.sender_state.all(conn, {}) if state.paused_at]
    if not pauses:
        return {"sending_paused": False, "sending_paused_count": 0}
    state = pauses[0]
    return {
        "sending_paused": True,
        "sending_paused_count": len(pauses),
        "paused_numbers": ", ".join(s.phone_number_id for s in pauses),
        "pause_cause": f"({state.pause_code}) {state.pause_reason}",
        "paused_since": state.paused_at.isoformat() if state.paused_at else "",
        "next_probe_at": state.next_probe_at.isoformat() if state.next_probe_at else "due now",
        "pause_probes_failed": state.probes,
        "pause_sends_refused": state.refused_sends,
    }


def idle_reason(conn: psycopg.Connection[Any]) -> str:
    """Why nothing is eligible for delivery, in one line: sending paused (what waits
    behind it, the next probe, what to do), knocks held for a template, quiet hours;
    or that nothing waits at all. What the heartbeat sensor's tick says, so the bad
    day reads on its page instead of "nothing eligible"."""
    idle = QUERIES.heartbeat_idle.one(conn, {})
    assert idle is not None  # an aggregate: always one row
    waiting = []
    if idle.knock_held:
        waiting.append(f"{idle.knock_held} hold their knock for a template (check knock_held)")
    if idle.quiet:
        waiting.append(f"{idle.quiet} wait for the end of the person's quiet hours")
    if idle.paused_at is not None:
        probe = f"{idle.next_probe_at:%H:%M:%S %Z}" if idle.next_probe_at else "due now"
        reason = idle.pause_reason or ""
        cause = (
            reason
            if reason.startswith(f"({idle.pause_code})")
            else f"code {idle.pause_code}: {reason}"
        )
        return (
            f"Sending is paused for every sender since {idle.paused_at:%Y-%m-%d %H:%M:%S %Z} "
            f"({cause}): {idle.queued} documents wait "
            f"behind it; the next probe at {probe}. Fix the cause, then `delivery-pipeline "
            "resume` (check sender_paused)."
            + (f" Of them, {'; '.join(waiting)}." if waiting else "")
        )
    numbers = (
        f" {idle.numbers_paused} business numbers are paused on their own "
        "(`delivery-pipeline status`)."
        if idle.numbers_paused
        else ""
    )
    if not idle.queued:
        return (
            "Nothing eligible for delivery: no document is generated, undelivered, due and "
            "unclaimed (documents waiting on a knock reply or a reviewer are not counted)."
            + numbers
        )
    due = f"{idle.next_due:%Y-%m-%d %H:%M:%S %Z}" if idle.next_due else "unknown"
    return (
        f"Nothing eligible for delivery now: {idle.queued} documents wait, none due and "
        f"unclaimed"
        + (f" ({'; '.join(waiting)})" if waiting else "")
        + f"; the next is due at {due}."
        + numbers
    )
