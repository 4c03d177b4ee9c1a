"""Migrations: once each, idempotent, safe from two processes at once."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from delivery_pipeline.store.migrations import migration_files, upgrade

pytestmark = pytest.mark.engine


def test_upgrade_applies_each_file_once(empty_database):
    names = [f"{v:03d}_{n}" for v, n, _ in migration_files()]
    assert upgrade(empty_database) == names
    assert upgrade(empty_database) == []
    with psycopg.connect(empty_database) as conn:
        recorded = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert recorded == len(names)


def test_two_processes_upgrading_at_once(empty_database):
    code = (
        "import sys; from delivery_pipeline.store.migrations import upgrade; "
        "print(len(upgrade(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, empty_database],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [r[1] for r in results]
    # Each migration's transaction takes the lock: the two may take turns, but between
    # them each migration is applied once, and in order.
    applied = [int(out.strip()) for out, _ in results]
    assert sum(applied) == len(migration_files()), applied
    with psycopg.connect(empty_database) as conn:
        order = conn.execute("SELECT version FROM schema_migrations ORDER BY applied_at, version")
        versions = [row[0] for row in order.fetchall()]
    assert versions == [version for version, _, _ in migration_files()]
