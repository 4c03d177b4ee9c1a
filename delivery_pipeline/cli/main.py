"""``delivery-pipeline``: the operator's command line.

The parser is built by the command groups, each registering its own commands
(``register``) in the order ``--help`` lists them. Every expected failure is
one line on stderr that says what to do next, with exit status 1 (needs
attention) or 2 (bad input: nothing written); see ``failures``. ``--verbose``
adds the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence

from delivery_pipeline import logs
from delivery_pipeline.cli import (
    db_commands,
    delivery_commands,
    documents,
    people,
    sandbox_commands,
    service_command,
    up,
)
from delivery_pipeline.cli.failures import explain
from delivery_pipeline.cli.registration import Command, Commands
from delivery_pipeline.settings import Settings

COMMAND_GROUPS: tuple[Callable[[Commands], None], ...] = (
    db_commands.register,
    people.register,
    documents.register,
    delivery_commands.register,
    service_command.register,
    up.register,
    sandbox_commands.register,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delivery-pipeline",
        description="Deliver generated documents over WhatsApp. Settings come from the "
        "environment (docs/reference/settings.md); with no DATABASE_URL an embedded Postgres is "
        "used.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log at INFO; show the traceback of an error"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMAND_GROUPS:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(logging.INFO if args.verbose else logging.WARNING)
    settings: Settings | None = None
    try:
        settings = Settings.from_env()
        logs.redact(settings)
        command: Command = args.func
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
