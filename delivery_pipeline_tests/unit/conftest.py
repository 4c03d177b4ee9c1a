"""The fast layer: the pure rules, with no Postgres and no process.

Every test here is marked ``unit`` (``./dev test -m unit`` runs the layer
alone, in seconds). A test that asks for a fixture of the real-process
suites (a database, the sandbox, the service) fails at collection: it
belongs beside them, one folder up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
# The fixtures of delivery_pipeline_tests/conftest.py that reach Postgres or start a process.
REAL = frozenset(
    {
        "pg_admin_url",
        "template_database",
        "database_url",
        "db",
        "sandbox_server",
        "sandbox",
        "settings",
        "browser",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE not in Path(str(item.path)).parents:
            continue
        item.add_marker(pytest.mark.unit)
        real = REAL & set(getattr(item, "fixturenames", ()))
        if real:
            raise pytest.UsageError(f"{item.nodeid} is a unit test and asks for {sorted(real)}")
