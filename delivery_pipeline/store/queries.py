"""Every query the project runs, by name, from ``sql/queries*.sql``.

Each query lives in SQL under a ``-- name: <name>`` header with a line of
purpose; Python asks for it as ``QUERIES.<name>`` and never builds SQL from
strings. ``Queries`` declares every name: loading fails at import when a file
holds a query not declared here or lacks one that is, and a misspelt name in
the code is a type error, not a runtime surprise.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from delivery_pipeline.settings import PROJECT_ROOT

_NAME_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def _sql_dir() -> Path:
    """``sql/`` beside the package (a checkout or editable install), else the copy a
    regular ``pip install .`` puts under ``<prefix>/share/delivery_pipeline/sql``."""
    beside = PROJECT_ROOT / "sql"
    if beside.is_dir():
        return beside
    return Path(sys.prefix) / "share" / "delivery_pipeline" / "sql"


SQL_DIR = _sql_dir()


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str


def read_queries(paths: list[Path]) -> dict[str, Query]:
    """Every named query in ``paths``; a name defined twice is an error."""
    found: dict[str, Query] = {}
    for path in paths:
        parts = _NAME_HEADER.split(path.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            lines = body.strip("\n").splitlines()
            description = lines[0][3:].strip() if lines and lines[0].startswith("-- ") else ""
            sql = "\n".join(line for line in lines if not line.startswith("--")).strip()
            if name in found:
                raise ValueError(f"query {name!r} defined twice (second time in {path})")
            found[name] = Query(name, description, sql)
    return found


@dataclass(frozen=True)
class Queries:
    """The SQL text of every named query."""

    # sql/queries.sql
    database_exists: str
    migrations_lock: str
    migrations_unlock: str
    migrations_table: str
    migrations_applied: str
    migrations_record: str
    insert_person: str
    set_quiet_hours: str
    person_by_id: str
    person_by_phone: str
    list_people: str
    time_zone_is_valid: str
    insert_ready_document: str
    insert_pending_document: str
    document_by_id: str
    document_chunks: str
    state_summary: str
    oldest_waiting: str
    guard_exists: str
    eligible_ids: str
    claim_batch: str
    begin_delivery: str
    advance_delivery: str
    chunk_failed: str
    chunk_unknown: str
    release_for_retry: str
    hold_quiet: str
    release_claim: str
    abandon_document: str
    reserve_knock: str
    unreserve_knock: str
    await_reply: str
    refuse_window: str
    person_opted_out: str
    raise_last_inbound: str
    wake_awaiting_documents: str
    pause_sender: str
    resume_sender: str
    sender_state: str
    pacer_row: str
    reserve_send_slots: str
    pacer_state: str
    throttle_pacer: str
    alert_lock: str
    last_alert: str
    insert_alert: str
    alert_sent: str
    alert_send_failed: str
    listen_ready: str
    next_due: str

    # sql/queries_backlog.sql
    backlog_by_state: str

    # sql/queries_checks.sql
    check_pending: str
    check_generating: str
    check_undelivered: str
    check_awaiting_review: str
    check_awaiting_reply: str
    check_knock_health: str
    check_abandoned_recent: str
    check_tier_usage: str
    check_sender_paused: str
    alerts_to_send: str
    alert_sender_try_lock: str
    alert_sender_unlock: str
    check_delivery_events: str

    # sql/queries_generation.sql
    generation_due: str
    fail_exhausted_generation: str
    claim_generation_batch: str
    generation_succeeded: str
    generation_failed: str
    pause_generation: str
    person_local_today: str
    brief_due_date: str
    enqueue_daily_briefs: str
    abandon_stale_briefs: str

    # sql/queries_record.sql
    outbox_runs: str
    outbox_pending: str
    outbox_claim_source: str
    outbox_claim_seen: str
    outbox_release: str
    outbox_reported: str
    outbox_forget: str
    beat: str
    heartbeats: str

    # sql/queries_report.sql
    report_documents: str
    report_chunks: str
    report_knocks: str
    report_abandoned: str

    # sql/queries_retention.sql
    prune_raw_webhooks: str
    prune_status_events: str
    prune_inbound_messages: str
    prune_ops_alerts: str
    retention_oldest: str

    # sql/queries_review.sql
    decide_review: str
    document_review: str
    awaiting_review: str
    review_sign_in_lock: str
    review_sign_in_state: str
    record_sign_in_failure: str
    start_review_session: str
    review_session: str
    end_review_session: str

    # sql/queries_webhooks.sql
    insert_inbound: str
    apply_statuses: str
    resume_documents: str
    chunk_by_wamid: str
    chunk_by_callback: str
    chunk_refused: str
    undeliver_document: str
    abandon_document_async: str
    settle_knock: str
    insert_raw_webhook: str
    health: str

    @classmethod
    def load(cls, sql_dir: Path = SQL_DIR) -> Queries:
        found = read_queries(sorted(sql_dir.glob("queries*.sql")))
        declared = {f.name for f in fields(cls)}
        missing, undeclared = sorted(declared - set(found)), sorted(set(found) - declared)
        if missing or undeclared:
            raise ImportError(
                f"sql/queries*.sql and Queries disagree: missing in SQL {missing}, "
                f"not declared in Queries {undeclared}"
            )
        return cls(**{name: query.sql for name, query in found.items()})


QUERIES = Queries.load()
