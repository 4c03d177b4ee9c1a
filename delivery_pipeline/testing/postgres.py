"""An embedded Postgres server of its own, for a test session or a benchmark run."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def embedded_admin_url(prefix: str) -> Iterator[str]:
    """Start a throwaway embedded Postgres; yield its admin URL; delete it after."""
    from delivery_pipeline.store import embedded

    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    server = embedded.server(root / "pg", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def upgrade_before(database_url: str, version: int, scratch: Path) -> None:
    """Migrate ``database_url`` to the schema just before migration ``version``: a
    database as an older release left it, for testing what ``version`` does to its rows."""
    from delivery_pipeline.store.migrations import migration_files, upgrade

    older = scratch / f"sql-before-{version:03d}"
    older.mkdir()
    for number, _, path in migration_files():
        if number < version:
            shutil.copy(path, older / path.name)
    upgrade(database_url, older)
