"""``delivery-pipeline db``: the database's schema and address."""

from __future__ import annotations

import argparse

from delivery_pipeline.cli.failures import CommandFailed
from delivery_pipeline.cli.registration import Commands, add_command, add_group, database_url
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import public_url, resolve_migration_url


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
    print(public_url(database_url(settings)))  # never the password
    return 0


def register(commands: Commands) -> None:
    db = add_group(commands, "db", "database schema", "Database schema.")
    add_command(
        db,
        "upgrade",
        cmd_db_upgrade,
        "apply pending migrations from sql/migrations/ (idempotent), as "
        "DELIVERY_MIGRATION_DATABASE_URL's role when set",
    )
    add_command(
        db,
        "url",
        cmd_db_url,
        "print the database URL in use, without its password (starts the embedded one if needed)",
    )
