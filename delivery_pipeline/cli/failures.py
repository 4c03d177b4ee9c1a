"""What an operator sees when a command cannot do its job: one line, the next step.

Exit codes (docs/reference/cli-errors.md):

  0  done
  1  needs attention: something outside the command line must be fixed or
     looked at (the database is unreachable or not migrated, WhatsApp refused
     our identity, the sandbox is not running, a sweep stopped, sending is
     paused)
  2  usage: the command line or a setting is wrong (nothing was written)

Anything else that escapes a command is our bug and shows its traceback;
``--verbose`` shows the traceback of an expected failure too.
"""

from __future__ import annotations

import enum
import socket
from pathlib import Path

import psycopg

from delivery_pipeline.settings import Settings, SettingsError
from delivery_pipeline.store.db import public_url
from delivery_pipeline.store.intake import InputError


class ExitCode(enum.IntEnum):
    DONE = 0
    ATTENTION = 1
    USAGE = 2


class CommandFailed(Exception):
    """An expected failure: its message is the one line the operator reads."""

    code = ExitCode.ATTENTION


class UsageError(CommandFailed):
    """Bad input: reported to the operator, nothing written."""

    code = ExitCode.USAGE


# The schema (or part of it) is not there: a database never migrated, or
# migrated by older code.
_SCHEMA_MISSING = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedColumn,
    psycopg.errors.UndefinedFunction,
)


def require_free_port(host: str, port: int, what: str) -> None:
    """Say now, in one line, that ``what`` cannot listen there, rather than let
    the server fail with its own message and exit status."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except socket.gaierror as exc:
            raise UsageError(
                f"--host {host}: not an address of this machine ({exc.strerror})"
            ) from exc
        except OSError as exc:
            raise CommandFailed(
                f"cannot listen on {host}:{port} ({exc.strerror}): is {what} already running "
                "there? Stop it, or choose another port"
            ) from exc


def explain(exc: BaseException, settings: Settings | None) -> tuple[str, ExitCode] | None:
    """The one line and exit code for an expected failure; None: our bug."""
    if isinstance(exc, CommandFailed):
        return str(exc), exc.code
    if isinstance(exc, InputError | SettingsError):
        return str(exc), ExitCode.USAGE
    where = _database(settings)
    if isinstance(exc, _SCHEMA_MISSING):
        return (
            f"the database at {where} has no schema, or an older one "
            f"({_first_line(exc)}): run `delivery-pipeline db upgrade`",
            ExitCode.ATTENTION,
        )
    if isinstance(exc, psycopg.OperationalError):
        return _unreachable(where, _first_line(exc)), ExitCode.ATTENTION
    return None


def _unreachable(where: str, cause: str) -> str:
    # libpq: 'connection failed: connection to server at "h", port 5 failed: <why>'
    why = cause.rpartition("failed: ")[2].removeprefix("FATAL:").strip() or cause
    if "does not exist" in why and why.startswith("database"):
        return f"cannot use the database at {where}: {why}: create it, or fix DATABASE_URL"
    if any(word in why for word in ("password", "role", "authentication", "pg_hba")):
        return (
            f"the database at {where} refused us ({why}): "
            "check the user and password in DATABASE_URL"
        )
    return f"cannot reach the database at {where} ({why}): is Postgres running? (DATABASE_URL)"


def _database(settings: Settings | None) -> str:
    if settings is None:
        return "DATABASE_URL"
    if settings.database.database_url:
        return public_url(settings.database.database_url)
    return f"the embedded Postgres in {Path(settings.database.data_dir) / 'pg'}"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(exc).__name__
