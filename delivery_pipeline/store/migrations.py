"""Apply the numbered SQL files in ``sql/migrations/`` once each, under an advisory lock."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import MIGRATIONS_DIR, QUERIES

log = logging.getLogger(__name__)

_MIGRATION_FILE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")


def migration_files(sql_dir: Path = MIGRATIONS_DIR) -> list[tuple[int, str, Path]]:
    """(version, name, path) for every numbered file, in order."""
    found = []
    for path in sql_dir.iterdir():
        match = _MIGRATION_FILE.match(path.name)
        if match:
            found.append((int(match.group(1)), match.group(2), path))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a number in {sql_dir}")
    return found


def upgrade(database_url: str, sql_dir: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations; returns the names applied (empty when up to date).

    Safe from several processes at once: each migration's transaction takes the
    migration lock first and looks again whether it is applied, so the second
    process waits, then finds nothing left to do. A transaction-level lock, so
    safe behind a transaction pooler too.
    """
    applied_now: list[str] = []
    with connect(database_url) as conn:
        with conn.transaction():
            QUERIES.migrations_lock.run(conn, {})
            QUERIES.migrations_table.run(conn, {})
        for version, name, path in migration_files(sql_dir):
            with conn.transaction():
                QUERIES.migrations_lock.run(conn, {})
                if version in set(QUERIES.migrations_applied.all(conn, {})):
                    continue
                conn.execute(path.read_text())
                QUERIES.migrations_record.run(conn, {"version": version, "name": name})
            applied_now.append(f"{version:03d}_{name}")
            log.info("applied migration %03d_%s", version, name)
    return applied_now
