"""``delivery-pipeline sweep``: one delivery pass, its progress live, its result.

Before claiming anything it checks what an operator's shell gets wrong: the
database (reachable, migrated), the target (``--person`` and ``--document``
must exist) and the WhatsApp identity (does the API accept our token for our
phone number id?). A refusal there is this shell's configuration, so it is
one line and exit 1, not a paused sender for everybody.

Output: progress on stderr while it runs (``progress``), then the result on
stdout, ending with every document scheduled for retry and why.
"""

from __future__ import annotations

import argparse
import json
import sys

from delivery_pipeline.cli.failures import CommandFailed, ExitCode, UsageError
from delivery_pipeline.cli.progress_display import Mode, shown
from delivery_pipeline.delivery.result import SweepResult
from delivery_pipeline.delivery.sweep import SweepNotStarted, sweep_sync
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, resolve_database_url, with_application_name
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.ages import format_age
from delivery_pipeline.watch.delivery_events import CLI_SOURCE

# Retries listed one per line; the rest are counted (``documents show`` has each).
RETRIES_LISTED = 20


def run(args: argparse.Namespace, settings: Settings) -> int:
    for name in ("limit", "concurrency"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.number is not None and settings.whatsapp.business_number(args.number) is None:
        configured = ", ".join(n.id for n in settings.whatsapp.business_numbers)
        raise UsageError(
            f"--number {args.number} is not one of our business numbers ({configured}: "
            "WHATSAPP_PHONE_NUMBER_ID and WHATSAPP_NUMBERS)"
        )
    try:
        target = SweepTarget(person_id=args.person, document_id=args.document)
    except ValueError as exc:
        flag = "--person" if str(exc).startswith("person_id") else "--document"
        raise UsageError(f"{flag}: {exc}") from exc
    database_url = resolve_database_url(settings.database)
    _check_target(database_url, target)
    mode: Mode = "json" if args.json else "live" if sys.stderr.isatty() else "lines"
    try:
        with shown(mode, sys.stderr) as tally:
            result = sweep_sync(
                settings,
                # named, so Dagster's timeline shows these deliveries as the command line's
                with_application_name(database_url, CLI_SOURCE),
                target=target,
                number=args.number,
                limit=args.limit,
                concurrency=args.concurrency,
                observer=tally,
                check_identity_first=True,
            )
    except SweepNotStarted as exc:
        raise CommandFailed(str(exc)) from exc
    if args.json:
        print(json.dumps(result.as_dict()))
    else:
        _print_result(result, target)
    if result.stopped_by:
        print(f"error: the sweep stopped: {result.stopped_by}", file=sys.stderr)
        return ExitCode.ATTENTION
    return ExitCode.DONE


def _check_target(database_url: str, target: SweepTarget) -> None:
    with connect(database_url) as conn:
        QUERIES.health.one(conn, {})  # reachable, and migrated
        person, document = target.person_id, target.document_id
        if person is not None and not QUERIES.person_by_id.one(conn, {"id": person}):
            raise UsageError(f"no person {person} (`delivery-pipeline people list` shows them)")
        if document is not None and not QUERIES.document_by_id.one(conn, {"id": document}):
            raise UsageError(f"no document {document}")


def _print_result(result: SweepResult, target: SweepTarget) -> None:
    summary = result.as_dict()
    for key, value in summary.items():
        if not isinstance(value, dict | list) and value is not None:
            print(f"{key:>16}: {value}")
    for key in ("abandoned", "send_errors"):
        if summary[key]:
            counts = ", ".join(f"{name} {n}" for name, n in summary[key].items())
            print(f"{key:>16}: {counts}")
    if result.retries:
        print(f"\nscheduled for retry ({len(result.retries)}):")
        for retry in result.retries[:RETRIES_LISTED]:
            when = "now" if retry.after_seconds <= 0 else f"in {format_age(retry.after_seconds)}"
            print(f"  document {retry.document_id}, {when}: {retry.reason}")
        if len(result.retries) > RETRIES_LISTED:
            print(
                f"  … and {len(result.retries) - RETRIES_LISTED} more "
                "(`delivery-pipeline documents show ID` shows each one's last error)"
            )
    if not target.whole_queue and result.claimed == 0:
        what, which = (
            ("document", target.document_id)
            if target.document_id is not None
            else ("person", target.person_id)
        )
        print(
            f"\nnothing of {what} {which} is due now (in backoff, awaiting a reply, "
            "delivered, or held by another sweep): `delivery-pipeline documents show ID` says which"
        )
