"""``delivery-pipeline``: the operator's command line.

Every expected failure is one line on stderr that says what to do next, with
exit status 1 (needs attention) or 2 (bad input: nothing written); see
``failures``. ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from delivery_pipeline import logs
from delivery_pipeline.cli.failures import CommandFailed, UsageError, explain, require_free_port
from delivery_pipeline.cli.table import print_rows
from delivery_pipeline.model import ReviewDecision, bsuid
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import (
    connect,
    public_url,
    resolve_database_url,
    resolve_migration_url,
)
from delivery_pipeline.store.intake import (
    add_person,
    add_ready_document,
    parse_kind,
    parse_phone,
    parse_user_id,
    request_document,
)
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.review import (
    Decided,
    Decision,
    NotAwaitingReview,
    awaiting_review,
    decide,
)


def _database_url(settings: Settings) -> str:
    return resolve_database_url(settings.database)


# ── db ──────────────────────────────────────────────────────────────────


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    import psycopg

    from delivery_pipeline.store.migrations import upgrade

    # The schema's owner when DELIVERY_MIGRATION_DATABASE_URL names one; every other
    # command runs as DATABASE_URL's role.
    try:
        applied = upgrade(resolve_migration_url(settings.database))
    except psycopg.errors.InsufficientPrivilege as exc:
        which = (
            "DELIVERY_MIGRATION_DATABASE_URL"
            if settings.database.migration_database_url
            else "DATABASE_URL"
        )
        raise CommandFailed(
            f"the role of {which} may not change the schema ({str(exc).splitlines()[0]}): "
            "set DELIVERY_MIGRATION_DATABASE_URL to the URL of the role that owns it"
        ) from exc
    print("applied: " + ", ".join(applied) if applied else "database is up to date")
    return 0


def cmd_db_url(args: argparse.Namespace, settings: Settings) -> int:
    print(public_url(_database_url(settings)))  # never the password
    return 0


# ── people ──────────────────────────────────────────────────────────────


def cmd_people_add(args: argparse.Namespace, settings: Settings) -> int:
    with connect(_database_url(settings)) as conn:
        person = add_person(
            conn,
            phone=args.phone,
            user_id=args.user_id,
            name=args.name,
            locale=args.locale,
            time_zone=args.time_zone,
            brief_opt_in=args.brief_opt_in,
            brief_local_time=args.brief_time,
            quiet_hours=args.quiet_hours,
            whatsapp=settings.whatsapp,
            phone_number_id=args.number,
        )
    number = person.phone_number_id or settings.whatsapp.phone_number_id
    print(
        f"person {person.id}: {person.name or '(no name)'} {person.phone or person.user_id}, "
        f"from business number {number}"
    )
    return 0


def cmd_people_list(args: argparse.Namespace, settings: Settings) -> int:
    with connect(_database_url(settings)) as conn:
        people = QUERIES.list_people.all(conn, {})
    print_rows(
        [person._asdict() for person in people],
        [
            "id",
            "phone",
            "user_id",
            "name",
            "locale",
            "time_zone",
            "brief_opt_in",
            "phone_number_id",
            "last_inbound_at",
        ],
    )
    return 0


# ── documents ───────────────────────────────────────────────────────────


def _for_date(args: argparse.Namespace) -> dt.date | None:
    if not args.for_date:
        return None
    try:
        return dt.date.fromisoformat(args.for_date)
    except ValueError:
        raise UsageError(f"--for-date {args.for_date!r} is not YYYY-MM-DD") from None


def _read_body(path: str | None) -> str:
    if not path or path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def cmd_documents_add(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.answers import added

    for_date = _for_date(args)
    parse_kind(args.kind)
    body = _read_body(args.file)
    with connect(_database_url(settings)) as conn:
        doc = add_ready_document(
            conn, args.person, body, args.kind, for_date, settings.delivery.review_kind_set
        )
        print(added(conn, settings, doc))
    return 0


def cmd_documents_request(args: argparse.Namespace, settings: Settings) -> int:
    for_date = _for_date(args)
    with connect(_database_url(settings)) as conn:
        doc = request_document(conn, args.person, args.kind, for_date)
    print(f"document {doc.id}: {doc.kind} for person {doc.person_id}, pending generation")
    return 0


# ── review ──────────────────────────────────────────────────────────────


def _decide(settings: Settings, decision: Decision) -> int:
    """Take the decision; 0 if it was ours, 1 if another reviewer's came first or the
    document no longer awaits review, 2 (bad input) if it never did."""
    from delivery_pipeline.generation.worker import SweepPoke

    with connect(_database_url(settings)) as conn:
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


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment (some containers)
        return "operator"


def cmd_documents_approve(args: argparse.Namespace, settings: Settings) -> int:
    body = _read_body(args.body_file) if args.body_file else None
    return _decide(settings, Decision.approve(args.id, args.reviewer, body=body, note=args.note))


def cmd_documents_reject(args: argparse.Namespace, settings: Settings) -> int:
    return _decide(settings, Decision.reject(args.id, args.reviewer, args.reason))


def cmd_documents_awaiting_review(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.watch.ages import format_age

    with connect(_database_url(settings)) as conn:
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


# ── delivery ────────────────────────────────────────────────────────────


def cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.sweep_command import run

    return run(args, settings)


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.resume import run

    return run(args, settings)


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.status import run

    return run(args, settings)


# ── sandbox ─────────────────────────────────────────────────────────────


def cmd_sandbox(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.sandbox.cli import main as sandbox_main

    require_free_port(args.host, args.port, "a sandbox")
    sandbox_main(["--host", args.host, "--port", str(args.port)])
    return 0


def cmd_service(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.service.app import serve

    require_free_port(args.host, args.port, "a webhook service")
    serve(settings, host=args.host, port=args.port)
    return 0


def cmd_sandbox_say(args: argparse.Namespace, settings: Settings) -> int:
    # A username user is addressed by their BSUID.
    phone = parse_user_id(args.number) if bsuid(args.number) else parse_phone(args.number)
    body = {"text": args.text, **({"to": args.to} if args.to else {})}
    answer = _sandbox_call(args.sandbox_url, "POST", f"people/{phone}/messages", body)
    to = f" to {args.to}" if args.to else ""
    print(f"{phone} wrote {args.text!r}{to} ({answer.get('id')})")
    return 0


def _sandbox_call(sandbox_url: str, method: str, path: str, body: Any = None) -> Any:
    """One of the sandbox's controls; its JSON answer, or a one-line failure."""
    import httpx

    sandbox = sandbox_url.rstrip("/")
    try:
        response = httpx.request(method, f"{sandbox}/_sandbox/{path}", json=body, timeout=10)
    except httpx.TransportError as exc:
        raise CommandFailed(
            f"no sandbox answers at {sandbox} ({type(exc).__name__}): start it with "
            "`delivery-pipeline sandbox` or `./dev up`, or give its address with --sandbox-url"
        ) from exc
    if response.status_code != 200:
        raise UsageError(f"sandbox answered {response.status_code}: {response.text[:200]}")
    return response.json()


def cmd_sandbox_press(args: argparse.Namespace, settings: Settings) -> int:
    phone = parse_user_id(args.number) if bsuid(args.number) else parse_phone(args.number)
    button: str | int = int(args.button) if args.button.isdigit() else args.button
    answer = _sandbox_call(args.sandbox_url, "POST", f"people/{phone}/press", {"button": button})
    print(f"{phone} pressed {args.button!r} ({answer.get('id')})")
    return 0


def cmd_sandbox_inbox(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.conversation import conversation

    phone = parse_user_id(args.number) if bsuid(args.number) else parse_phone(args.number)
    path = f"people/{phone}"
    received = _sandbox_call(args.sandbox_url, "GET", f"{path}/inbox")
    written = _sandbox_call(args.sandbox_url, "GET", path)["written"]
    print(conversation(phone, received, written))
    return 0


# ── parser ──────────────────────────────────────────────────────────────


def build_parser() -> argparse.ArgumentParser:
    from delivery_pipeline.settings import SANDBOX_DEFAULT_PORT, SERVICE_DEFAULT_PORT

    parser = argparse.ArgumentParser(
        prog="delivery-pipeline",
        description="Deliver generated documents over WhatsApp. Settings come from the "
        "environment (docs/reference/settings.md); with no DATABASE_URL an embedded Postgres is "
        "used.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log at INFO; show the traceback of an error"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        parent: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        func: Callable[..., int],
        help_: str,
    ) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        return p

    db = sub.add_parser("db", help="database schema", description="Database schema.")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    add(
        db_sub,
        "upgrade",
        cmd_db_upgrade,
        "apply pending migrations from sql/migrations/ (idempotent), as "
        "DELIVERY_MIGRATION_DATABASE_URL's role when set",
    )
    add(
        db_sub,
        "url",
        cmd_db_url,
        "print the database URL in use, without its password (starts the embedded one if needed)",
    )

    people = sub.add_parser("people", help="people who receive documents", description="People.")
    people_sub = people.add_subparsers(dest="people_command", required=True, metavar="COMMAND")
    p = add(people_sub, "add", cmd_people_add, "add a person")
    p.add_argument("--phone", help="E.164 number, e.g. +5511987654321 (this or --user-id)")
    p.add_argument(
        "--user-id",
        help="business-scoped user id (BSUID), e.g. US.13491208655302741918, for a person "
        "who uses a WhatsApp username (sent to with `recipient`)",
    )
    p.add_argument("--name", default="", help="name used in the knock template")
    p.add_argument("--locale", default="en", help="en, es or pt")
    p.add_argument("--time-zone", default="UTC", help="IANA time zone, e.g. America/Sao_Paulo")
    p.add_argument("--brief-opt-in", action="store_true", help="send a daily brief")
    p.add_argument("--brief-time", default="07:00", help="local time of the daily brief (HH:MM)")
    p.add_argument(
        "--quiet-hours",
        help="their own quiet hours, local HH:MM-HH:MM (default: DELIVERY_QUIET_HOURS; "
        "00:00-00:00 for none)",
    )
    p.add_argument(
        "--number",
        help="the business phone number id they are sent from (WHATSAPP_PHONE_NUMBER_ID or "
        "one of WHATSAPP_NUMBERS; default: by their calling code, else the default number)",
    )
    add(people_sub, "list", cmd_people_list, "list people")

    docs = sub.add_parser("documents", help="documents to deliver", description="Documents.")
    docs_sub = docs.add_subparsers(dest="documents_command", required=True, metavar="COMMAND")
    for name, func, help_ in (
        (
            "add",
            cmd_documents_add,
            "add a generated document, ready for delivery; says when it will go (quiet "
            "hours, a pause, a knock first) and which earlier plan it supersedes",
        ),
        ("request", cmd_documents_request, "request a document to be generated (pending)"),
    ):
        p = add(docs_sub, name, func, help_)
        p.add_argument("--person", required=True, help="person id or E.164 number")
        p.add_argument("--kind", default="plan", help="plan or daily_brief")
        p.add_argument("--for-date", help="YYYY-MM-DD, required for a daily_brief")
        if name == "add":
            p.add_argument("--file", help="body from this file (default: stdin)")
    from delivery_pipeline.cli.document_views import add_reading_commands

    add_reading_commands(docs_sub, add)
    login, who = _login_name(), "who decides (default: your login name)"
    p = add(
        docs_sub,
        "approve",
        cmd_documents_approve,
        "approve a document awaiting review (optionally with an edited text); delivery follows",
    )
    p.add_argument("id", type=int)
    p.add_argument("--body-file", help="approve this edited text instead ('-': stdin)")
    p.add_argument("--note", help="a note kept with the decision")
    p.add_argument("--reviewer", default=login, help=who)
    p = add(
        docs_sub,
        "reject",
        cmd_documents_reject,
        "reject a document awaiting review: it is never delivered (abandoned as rejected)",
    )
    p.add_argument("id", type=int)
    p.add_argument("--reason", required=True, help="why (kept with the document)")
    p.add_argument("--reviewer", default=login, help=who)
    p = add(
        docs_sub,
        "awaiting-review",
        cmd_documents_awaiting_review,
        "list the documents awaiting review, oldest first",
    )
    p.add_argument("--limit", type=int, default=50)
    from delivery_pipeline.cli.documents import add_operator_commands

    add_operator_commands(docs_sub, add)

    p = add(
        sub,
        "sweep",
        cmd_sweep,
        "one delivery pass over eligible documents: progress on stderr while it runs, then "
        "what it did and every document scheduled for retry and why",
    )
    p.add_argument("--document", type=int, help="only this document")
    p.add_argument("--person", type=int, help="only this person's documents")
    p.add_argument(
        "--number",
        help="only the documents sent from this business number (the people bound to it; "
        "the default number's also takes those bound to none): one sender per number",
    )
    p.add_argument("--limit", type=int, help="claim at most N documents")
    p.add_argument("--concurrency", type=int, help="documents in flight at once")
    p.add_argument(
        "--json",
        action="store_true",
        help="the result as one JSON object on stdout; progress as JSON lines on stderr",
    )

    p = add(
        sub,
        "status",
        cmd_status,
        "per document state: count, oldest age, and the oldest waiting document's id, last "
        "error and next attempt; whether sending is paused (exit 1 if so); the pacer",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add(
        sub,
        "resume",
        cmd_resume,
        "end a sender-wide pause now, for every sender (after fixing its cause); without it "
        "the next successful probe resumes by itself",
    )
    p.add_argument("--by", help="who resumes (kept with the pause's resolved alert)")
    p.add_argument(
        "--number",
        help="end only this business number's own pause (default: every pause, of every "
        "number and of each)",
    )

    p = add(
        sub, "service", cmd_service, "run the webhook service (Meta webhooks, the generator's poke)"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=SERVICE_DEFAULT_PORT)

    from delivery_pipeline.cli.up import add_up_parser

    add_up_parser(sub)

    sb = add(sub, "sandbox", cmd_sandbox, "run the local WhatsApp Cloud API sandbox")
    sb.add_argument("--host", default="127.0.0.1")
    sb.add_argument("--port", type=int, default=SANDBOX_DEFAULT_PORT)
    sb_sub = sb.add_subparsers(dest="sandbox_command", metavar="COMMAND")
    p = add(
        sb_sub, "say", cmd_sandbox_say, "a person writes to us in the sandbox (opens their window)"
    )
    p.add_argument("number", help="the person's E.164 number, or a username user's BSUID")
    p.add_argument("text", help="what they write")
    p.add_argument(
        "--to",
        metavar="PHONE_NUMBER_ID",
        help="the business number they write to (default: WHATSAPP_PHONE_NUMBER_ID's); "
        "the window opens with that number only",
    )
    p.add_argument("--sandbox-url", default=f"http://127.0.0.1:{SANDBOX_DEFAULT_PORT}")
    p = add(
        sb_sub,
        "press",
        cmd_sandbox_press,
        "a person taps a quick reply on the latest knock with buttons they received",
    )
    p.add_argument("number", help="the person's E.164 number, or a username user's BSUID")
    p.add_argument("button", help="the button's text (Later, Más tarde, …) or its index (0, 1, 2)")
    p.add_argument("--sandbox-url", default=f"http://127.0.0.1:{SANDBOX_DEFAULT_PORT}")
    p = add(
        sb_sub,
        "inbox",
        cmd_sandbox_inbox,
        "a person's conversation in the sandbox as text: what their phone received (with "
        "a knock's buttons) and what they wrote or pressed, oldest first",
    )
    p.add_argument("number", help="the person's E.164 number, or a username user's BSUID")
    p.add_argument("--sandbox-url", default=f"http://127.0.0.1:{SANDBOX_DEFAULT_PORT}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(logging.INFO if args.verbose else logging.WARNING)
    settings: Settings | None = None
    try:
        settings = Settings.from_env()
        logs.redact(settings)
        command: Callable[[argparse.Namespace, Settings], int] = args.func
        return command(args, settings)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except Exception as exc:
        explained = explain(exc, settings)
        if explained is None:
            raise  # our bug: the traceback is the report
        if args.verbose:
            traceback.print_exc()
        message, code = explained
        print(f"error: {message}", file=sys.stderr)
        return code


def _reader_went_away() -> int:
    """The reader of our output stopped reading (``status | head -8``): what it took is
    what was wanted. No traceback, and none at exit either, when Python flushes stdout
    into the closed pipe again; the exit status of a program ended by SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
