"""``documents show`` and ``documents list``: where a person looks for a document.

Both lead with the state of the ``document_states`` view, its owner, why it
waits and until when (``watch/outlook.py``); ``show`` then gives the detail (the
row, the parts' ledger, the operators' actions), ``list`` finds documents by
state, person, kind and age. ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from typing import Any

from delivery_pipeline.cli.failures import UsageError
from delivery_pipeline.cli.registration import Commands, add_command
from delivery_pipeline.cli.table import print_rows
from delivery_pipeline.model import DocumentState
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, resolve_database_url
from delivery_pipeline.store.intake import find_person, parse_kind
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.documents import DocumentOutlook
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.outlook import Outlook, outlook, outlooks

WHY_SHOWN = 90
_AGO = re.compile(r"^(\d+)\s*([mhd])$")
_UNITS = {"m": 60, "h": 3600, "d": 86400}


def not_found(document_id: int) -> str:
    return (
        f"no document {document_id}: `delivery-pipeline documents list` lists them "
        "(--person, --state, --kind, --since)"
    )


# ── show ────────────────────────────────────────────────────────────────


def cmd_documents_show(args: argparse.Namespace, settings: Settings) -> int:
    with connect(resolve_database_url(settings.database)) as conn:
        seen = outlook(conn, settings, args.id)
        doc = QUERIES.document_by_id.one(conn, {"id": args.id})
        if seen is None or doc is None:
            raise UsageError(not_found(args.id))
        chunks = [
            chunk._asdict() for chunk in QUERIES.document_chunks.all(conn, {"document_id": args.id})
        ]
        actions = [
            a._asdict() for a in QUERIES.document_actions.all(conn, {"document_id": args.id})
        ]
    detail = doc._asdict()
    del detail["body"]
    detail["review_edited"] = detail.pop("approved_body") is not None
    if args.json:
        shown = {"state": seen.as_json(), "document": detail, "chunks": chunks, "actions": actions}
        print(json.dumps(shown, default=str, indent=2))
        return 0
    _print_lead(seen)
    print()
    print("detail:")
    for key, value in detail.items():
        if value is not None and value != "":
            print(f"  {key}: {_plain(value)}")
    print()
    print(f"parts ({len(chunks)}):" if chunks else "parts: none cut yet")
    if chunks:
        print_rows(
            chunks,
            [
                "chunk_index",
                "state",
                "wa_message_id",
                "send_attempts",
                "sent_at",
                "delivered_at",
                "read_at",
                "failed_at",
                "error_code",
            ],
        )
    if actions:
        print()
        print("operators' actions (newest first):")
        print_rows(actions, list(actions[0]))
    return 0


def _print_lead(seen: Outlook) -> None:
    row = seen.row
    person = " ".join(
        filter(None, [row.person_name, f"({row.person_address})" if row.person_address else ""])
    )
    day = f" for {row.for_date}" if row.for_date else ""
    print(f"document {row.id}: {row.kind}{day} for person {row.person_id} {person}".rstrip())
    age = format_age((row.now - row.since).total_seconds(), precise=True)
    print(f"state:  {row.state} since {row.since:%Y-%m-%d %H:%M:%S %Z} ({age} ago)")
    print(f"owner:  {seen.owner}")
    print(f"why:    {seen.why}")
    print(f"until:  {seen.when() if seen.until else '-'}")
    print(f"way:    {way_of(row)}")


def way_of(row: DocumentOutlook) -> str:
    """The way it goes or went, and a file's document template (``-``: not decided)."""
    if row.way is None:
        return "-"
    if row.way == "file" and row.file_template:
        return f"file ({row.file_template}:{row.file_template_language})"
    return row.way


def _plain(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return f"{value:%Y-%m-%d %H:%M:%S %Z}"
    return str(value)


# ── list ────────────────────────────────────────────────────────────────


def cmd_documents_list(args: argparse.Namespace, settings: Settings) -> int:
    state = _state(args.state)
    kind = parse_kind(args.kind) if args.kind else None
    since = _since(args.since)
    with connect(resolve_database_url(settings.database)) as conn:
        person = find_person(conn, args.person).id if args.person else None
        found = outlooks(
            conn, settings, state=state, person_id=person, kind=kind, since=since, limit=args.limit
        )
    if args.json:
        print(json.dumps([_listed(seen) for seen in found], default=str))
        return 0
    rows = [
        {
            "id": seen.row.id,
            "kind": seen.row.kind,
            "person": f"{seen.row.person_id} {seen.row.person_name}".strip(),
            "state": seen.state,
            "owner": seen.owner,
            "since": format_age((seen.row.now - seen.row.since).total_seconds()),
            "until": _until(seen),
            "way": seen.row.way or "",
            "why": _short(seen.why),
        }
        for seen in found
    ]
    print_rows(rows, ["id", "kind", "person", "state", "owner", "since", "until", "way", "why"])
    if len(found) == args.limit:
        print(
            f"... the newest {args.limit}: narrow with --state, --person, --kind, --since, "
            "or raise --limit"
        )
    return 0


def _listed(seen: Outlook) -> dict[str, Any]:
    row = seen.row
    return {
        "id": row.id,
        "person_id": row.person_id,
        "person": row.person_name,
        "kind": row.kind,
        "for_date": row.for_date,
        "created_at": row.created_at,
        **seen.as_json(),
    }


def _until(seen: Outlook) -> str:
    if seen.until is None:
        return ""
    seconds = (seen.until - seen.row.now).total_seconds()
    return f"in {format_age(seconds)}" if seconds > 0 else "due now"


def _short(text: str) -> str:
    return text if len(text) <= WHY_SHOWN else text[: WHY_SHOWN - 1] + "…"


def _state(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return DocumentState(value)
    except ValueError:
        states = ", ".join(DocumentState)
        raise UsageError(f"--state {value!r}: one of {states}") from None


def _since(value: str | None) -> dt.datetime | None:
    """``--since``: a date or time (ISO 8601, UTC unless it says), or an age: 30m, 12h, 7d."""
    if value is None:
        return None
    if match := _AGO.match(value.strip()):
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
        return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)
    try:
        at = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(
            f"--since {value!r}: a date or time (2026-03-02, 2026-03-02T08:00) or an age "
            "(30m, 12h, 7d)"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=dt.UTC)


def add_reading_commands(documents: Commands) -> None:
    """``documents show`` and ``documents list``."""
    p = add_command(
        documents,
        "show",
        cmd_documents_show,
        "a document: its state, who owns it, why it waits and until when; then its row, "
        "its parts' ledger and the operators' actions",
    )
    p.add_argument("id", type=int)
    p.add_argument("--json", action="store_true", help="one JSON object (state first)")
    p = add_command(
        documents,
        "list",
        cmd_documents_list,
        "documents, newest first: state, owner, since, until when, why",
    )
    states = ", ".join(DocumentState)
    p.add_argument("--state", help=f"only this state: {states}")
    p.add_argument("--person", help="only this person's (id or E.164 number)")
    p.add_argument("--kind", help="only plan or daily_brief")
    p.add_argument("--since", help="created since: a date or time (UTC), or an age: 30m, 12h, 7d")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    p.add_argument("--json", action="store_true", help="a JSON list")
