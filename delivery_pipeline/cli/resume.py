"""``delivery-pipeline resume``: the operator fixed what paused sending; resume now.

Without it the pause ends by itself at the next successful probe
(docs/design/pause.md); with it every sender resumes at once (one ready
notification wakes every listening service). The alert episode is resolved, naming who resumed.
"""

from __future__ import annotations

import argparse
import getpass

from delivery_pipeline.cli.failures import ExitCode
from delivery_pipeline.delivery.pause import EVERY_NUMBER, resumed_alert
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, resolve_database_url
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.alerts import note_check


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "an operator"


def run(args: argparse.Namespace, settings: Settings) -> int:
    by = f"resumed by {args.by or _operator()} (delivery-pipeline resume)"
    with connect(resolve_database_url(settings.database)) as conn:
        with conn.transaction():
            ended = QUERIES.resume_sending.all(
                conn, {"by": by[:200], "phone_number_id": args.number}
            )
        if not ended:
            what = f" from business number {args.number}" if args.number else ""
            print(f"sending{what} was not paused: nothing to resume")
            return ExitCode.DONE
        for resumed in ended:
            note_check(conn, resumed_alert(by, resumed.phone_number_id), failing=False)
    for resumed in ended:
        who = (
            "every sender"
            if resumed.phone_number_id == EVERY_NUMBER
            else f"business number {resumed.phone_number_id}"
        )
        print(
            f"sending resumed for {who} (paused since {resumed.paused_at:%Y-%m-%d %H:%M:%S %Z}"
            f", code {resumed.pause_code}: {resumed.pause_reason}); if the cause is not fixed, "
            "the next send pauses it again"
        )
    return ExitCode.DONE
