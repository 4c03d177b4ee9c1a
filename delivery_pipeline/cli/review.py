"""``documents approve``, ``reject`` and ``awaiting-review``: a reviewer's decisions
from the command line (the review page takes the same ones: ``store.review``)."""

from __future__ import annotations

import argparse
import sys

from delivery_pipeline.cli.failures import UsageError
from delivery_pipeline.cli.registration import Commands, add_command, database_url, login_name
from delivery_pipeline.cli.table import print_rows
from delivery_pipeline.model import ReviewDecision
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.review import (
    Decided,
    Decision,
    NotAwaitingReview,
    awaiting_review,
    decide,
)


def read_body(path: str | None) -> str:
    """A document's text from a file, or from stdin (``-`` or none)."""
    if not path or path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _decide(settings: Settings, decision: Decision) -> int:
    """Take the decision; 0 if it was ours, 1 if another reviewer's came first or the
    document no longer awaits review, 2 (bad input) if it never did."""
    from delivery_pipeline.generation.worker import SweepPoke

    with connect(database_url(settings)) as conn:
        outcome = decide(conn, decision)
    if isinstance(outcome, NotAwaitingReview) and not outcome.exists:
        raise UsageError(str(outcome))
    if not isinstance(outcome, Decided):
        print(f"not applied: {outcome}", file=sys.stderr)
        return 1
    text = str(outcome)
    if outcome.decision == ReviewDecision.APPROVED:
        from delivery_pipeline.cli.answers import after_request

        poked = SweepPoke.from_settings(settings.service)(outcome.document_id)
        text += "; " + after_request(settings, outcome.document_id, poked)
    print(text)
    return 0


def cmd_documents_approve(args: argparse.Namespace, settings: Settings) -> int:
    body = read_body(args.body_file) if args.body_file else None
    return _decide(settings, Decision.approve(args.id, args.reviewer, body=body, note=args.note))


def cmd_documents_reject(args: argparse.Namespace, settings: Settings) -> int:
    return _decide(settings, Decision.reject(args.id, args.reviewer, args.reason))


def cmd_documents_awaiting_review(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.watch.ages import format_age

    with connect(database_url(settings)) as conn:
        waiting = awaiting_review(conn, limit=args.limit)
    rows = [
        {
            "id": w.id,
            "kind": w.kind,
            "person": f"{w.person_id} {w.name}".strip(),
            "waiting": format_age(w.age_seconds),
            "characters": len(w.body),
        }
        for w in waiting
    ]
    print_rows(rows, ["id", "kind", "person", "waiting", "characters"])
    if waiting and waiting[0].total > len(waiting):
        print(f"... and {waiting[0].total - len(waiting)} more")
    return 0


def add_review_commands(documents: Commands) -> None:
    """``documents approve``, ``reject`` and ``awaiting-review``."""
    login, who = login_name(), "who decides (default: your login name)"
    p = add_command(
        documents,
        "approve",
        cmd_documents_approve,
        "approve a document awaiting review (optionally with an edited text); delivery follows",
    )
    p.add_argument("id", type=int)
    p.add_argument("--body-file", help="approve this edited text instead ('-': stdin)")
    p.add_argument("--note", help="a note kept with the decision")
    p.add_argument("--reviewer", default=login, help=who)
    p = add_command(
        documents,
        "reject",
        cmd_documents_reject,
        "reject a document awaiting review: it is never delivered (abandoned as rejected)",
    )
    p.add_argument("id", type=int)
    p.add_argument("--reason", required=True, help="why (kept with the document)")
    p.add_argument("--reviewer", default=login, help=who)
    p = add_command(
        documents,
        "awaiting-review",
        cmd_documents_awaiting_review,
        "list the documents awaiting review, oldest first",
    )
    p.add_argument("--limit", type=int, default=50)
