"""``documents cancel|resend``: an operator's actions on one document.

The rule is ``store/operator.py`` (through the claim, recorded in
``document_actions``); here only the command line. An expected failure (no
such document, already delivered, being sent right now) is one line saying
what to do, exit 2 for an id that does not exist, 1 for a state the action
does not apply to.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from typing import Any

from delivery_pipeline.cli.failures import CommandFailed, UsageError
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, resolve_database_url

AddCommand = Callable[..., argparse.ArgumentParser]


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment (some containers)
        return "operator"


def _act(args: argparse.Namespace, settings: Settings, resend: bool) -> int:
    from delivery_pipeline.store import operator

    with connect(resolve_database_url(settings.database)) as conn:
        try:
            act = operator.resend if resend else operator.cancel
            taken = act(conn, args.id, args.operator, args.reason, settings.delivery)
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


def add_operator_commands(docs_sub: Any, add: AddCommand) -> None:
    """``documents cancel`` and ``documents resend``, on ``main``'s ``documents`` group."""
    who = "who acts (default: your login name); kept with the action"
    p = add(
        docs_sub,
        "cancel",
        cmd_documents_cancel,
        "cancel a document not yet delivered: never sent (abandoned as cancelled); a sender "
        "in flight stops before its next part",
    )
    p.add_argument("id", type=int)
    p.add_argument("--reason", help="why (kept with the action)")
    p.add_argument("--operator", default=_login_name(), help=who)
    p = add(
        docs_sub,
        "resend",
        cmd_documents_resend,
        "send a delivered (or abandoned) document again, every part, recorded as a resend",
    )
    p.add_argument("id", type=int)
    p.add_argument("--reason", help="why (kept with the action)")
    p.add_argument("--operator", default=_login_name(), help=who)
