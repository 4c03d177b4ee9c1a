"""``delivery-pipeline documents``: the group, documents added and requested, and an
operator's actions on one document (cancel, resend).

The group's other commands live with what they do: reading (``show``, ``list``:
``document_views``) and review (``approve``, ``reject``, ``awaiting-review``:
``review``). An operator's action's rule is ``store/operator.py`` (through the
claim, recorded in ``document_actions``); here only the command line. An
expected failure (no such document, already delivered, being sent right now)
is one line saying what to do, exit 2 for an id that does not exist, 1 for a
state the action does not apply to.
"""

from __future__ import annotations

import argparse
import datetime as dt

from delivery_pipeline.cli.document_views import add_reading_commands
from delivery_pipeline.cli.failures import CommandFailed, UsageError
from delivery_pipeline.cli.registration import (
    Commands,
    add_command,
    add_group,
    database_url,
    login_name,
)
from delivery_pipeline.cli.review import add_review_commands, read_body
from delivery_pipeline.model import OperatorAction
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.intake import add_ready_document, parse_kind, request_document


def _for_date(args: argparse.Namespace) -> dt.date | None:
    if not args.for_date:
        return None
    try:
        return dt.date.fromisoformat(args.for_date)
    except ValueError:
        raise UsageError(f"--for-date {args.for_date!r} is not YYYY-MM-DD") from None


def cmd_documents_add(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.answers import added

    for_date = _for_date(args)
    parse_kind(args.kind)
    body = read_body(args.file)
    with connect(database_url(settings)) as conn:
        doc = add_ready_document(
            conn, args.person, body, args.kind, for_date, settings.delivery.review_kind_set
        )
        print(added(conn, settings, doc))
    return 0


def cmd_documents_request(args: argparse.Namespace, settings: Settings) -> int:
    for_date = _for_date(args)
    with connect(database_url(settings)) as conn:
        doc = request_document(conn, args.person, args.kind, for_date)
    print(f"document {doc.id}: {doc.kind} for person {doc.person_id}, pending generation")
    return 0


def _act(args: argparse.Namespace, settings: Settings, resend: bool) -> int:
    from delivery_pipeline.store import operator

    with connect(database_url(settings)) as conn:
        try:
            action = OperatorAction.RESEND if resend else OperatorAction.CANCEL
            taken = operator.act(
                conn, action, args.id, args.operator, args.reason, settings.delivery
            )
        except operator.UnknownDocument as exc:
            raise UsageError(str(exc)) from None
        except operator.NotApplicable as exc:
            raise CommandFailed(str(exc)) from None
    text = str(taken)
    if resend:
        from delivery_pipeline.cli.answers import after_request
        from delivery_pipeline.generation.worker import SweepPoke

        poked = SweepPoke.from_settings(settings.service)(args.id)
        text += "; " + after_request(settings, args.id, poked)
    print(text)
    return 0


def cmd_documents_cancel(args: argparse.Namespace, settings: Settings) -> int:
    return _act(args, settings, resend=False)


def cmd_documents_resend(args: argparse.Namespace, settings: Settings) -> int:
    return _act(args, settings, resend=True)


def _add_intake_commands(documents: Commands) -> None:
    """``documents add`` and ``documents request``."""
    for name, func, help_ in (
        (
            "add",
            cmd_documents_add,
            "add a generated document, ready for delivery; says when it will go (quiet "
            "hours, a pause, a knock first) and which earlier plan it supersedes",
        ),
        ("request", cmd_documents_request, "request a document to be generated (pending)"),
    ):
        p = add_command(documents, name, func, help_)
        p.add_argument("--person", required=True, help="person id or E.164 number")
        p.add_argument("--kind", default="plan", help="plan or daily_brief")
        p.add_argument("--for-date", help="YYYY-MM-DD, required for a daily_brief")
        if name == "add":
            p.add_argument("--file", help="body from this file (default: stdin)")


def _add_operator_commands(documents: Commands) -> None:
    """``documents cancel`` and ``documents resend``."""
    who = "who acts (default: your login name); kept with the action"
    p = add_command(
        documents,
        "cancel",
        cmd_documents_cancel,
        "cancel a document not yet delivered: never sent (abandoned as cancelled); a sender "
        "in flight stops before its next part",
    )
    p.add_argument("id", type=int)
    p.add_argument("--reason", help="why (kept with the action)")
    p.add_argument("--operator", default=login_name(), help=who)
    p = add_command(
        documents,
        "resend",
        cmd_documents_resend,
        "send a delivered (or abandoned) document again, every part, recorded as a resend",
    )
    p.add_argument("id", type=int)
    p.add_argument("--reason", help="why (kept with the action)")
    p.add_argument("--operator", default=login_name(), help=who)


def register(commands: Commands) -> None:
    documents = add_group(commands, "documents", "documents to deliver", "Documents.")
    _add_intake_commands(documents)
    add_reading_commands(documents)
    add_review_commands(documents)
    _add_operator_commands(documents)
