"""Shared fixtures: a real Postgres (isolated database per test), the sandbox
as a real subprocess, settings pointing at both.

Postgres: ``DELIVERY_TEST_DATABASE_URL`` (an admin URL on any server ≥ 14)
when set, else an embedded Postgres started for the session.

``./dev test`` runs the suite on parallel workers (pytest-xdist, ``--dist
loadgroup``): each worker is a session of its own, so it has its own embedded
Postgres (or its own template database on the server) and its own sandbox.
A test marked ``solo`` (a fleet of processes sized to the machine, a rate it
must reach) runs while no other test of the run does.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import DictRow

from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, ensure_database, with_database
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.testing.pooler import Pooler
from delivery_pipeline.testing.sandbox import SandboxProcess, start_sandbox

TEST_DB_ENV = "DELIVERY_TEST_DATABASE_URL"

# Quiet hours (21:00-08:00 by default) would make a test's outcome depend on
# the hour it runs at: off for every process the tests start, unless a test
# turns them on (store/test_quiet_hours.py).
os.environ.setdefault("DELIVERY_QUIET_HOURS", "off")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first, so that no worker starts a minute-long test while the
    others are about to finish; solo tests last, where no long test holds up
    their turn. Every other test of a module that has a module-scoped fixture
    (a whole ``up``, a whole deployment) runs on one worker, which sets that
    fixture up once."""

    def solo(item: pytest.Item) -> bool:
        return item.get_closest_marker("solo") is not None

    items.sort(key=lambda item: (solo(item), item.get_closest_marker("slow") is None))
    for item in items:
        definitions = getattr(item, "_fixtureinfo", None)
        if solo(item) or definitions is None:
            continue
        for name in item.fixturenames:
            defs = definitions.name2fixturedefs.get(name)
            if defs and defs[-1].scope == "module":
                item.add_marker(pytest.mark.xdist_group(item.module.__name__))
                break


def _locked(path: Path, mode: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, mode)
    return fd


@pytest.fixture(autouse=True)
def _machine_share(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[None]:
    """Across the run's workers, a readers-writer lock on the machine: every
    test holds it shared, a ``solo`` test exclusively. The turnstile gives a
    waiting solo test its turn: no test starts until it has run."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    run = tmp_path_factory.getbasetemp().parent  # shared by the run's workers
    solo = request.node.get_closest_marker("solo") is not None
    turnstile = _locked(run / "turnstile.lock", fcntl.LOCK_EX)
    machine = _locked(run / "machine.lock", fcntl.LOCK_EX if solo else fcntl.LOCK_SH)
    if not solo:
        os.close(turnstile)
    try:
        yield
    finally:
        os.close(machine)
        if solo:
            os.close(turnstile)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    url = os.environ.get(TEST_DB_ENV)
    if url:
        yield url
        return
    from delivery_pipeline.testing.postgres import embedded_admin_url

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with embedded_admin_url(f"dp-test-pg-{worker}-") as admin:
        yield admin


@pytest.fixture(scope="session")
def template_database(pg_admin_url: str) -> Iterator[str]:
    """A migrated database that each test's database is cloned from."""
    name = f"dp_template_{uuid.uuid4().hex[:10]}"
    ensure_database(pg_admin_url, name)
    upgrade(with_database(pg_admin_url, name))
    yield name
    _drop(pg_admin_url, name)


def _drop(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                psycopg.sql.Identifier(name)
            )
        )


@pytest.fixture
def database_url(pg_admin_url: str, template_database: str) -> Iterator[str]:
    """A fresh, migrated database for this test."""
    name = f"dp_test_{uuid.uuid4().hex[:12]}"
    ensure_database(pg_admin_url, name, template=template_database)
    yield with_database(pg_admin_url, name)
    _drop(pg_admin_url, name)


@pytest.fixture
def empty_database(pg_admin_url: str) -> Iterator[str]:
    """A database with no schema at all."""
    name = f"dp_empty_{uuid.uuid4().hex[:10]}"
    ensure_database(pg_admin_url, name)
    yield with_database(pg_admin_url, name)
    _drop(pg_admin_url, name)


@pytest.fixture(scope="session")
def pooler(pg_admin_url: str) -> Iterator[Pooler]:
    """Debian's PgBouncer in transaction mode in front of the session's Postgres
    (``delivery_pipeline/testing/pooler.py``); ``pooler.url(database_url)`` is a test's
    database through it. CI installs the package (.ci/run), so it never skips there."""
    from delivery_pipeline.testing import pooler as pooling

    if not pooling.available():
        pytest.skip(f"PgBouncer is not installed ({pooling.PGBOUNCER}): apt-get install pgbouncer")
    with pooling.pgbouncer(pg_admin_url) as running:
        yield running


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[DictRow]]:
    with connect(database_url) as conn:
        yield conn


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[SandboxProcess]:
    server = start_sandbox()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sandbox(sandbox_server: SandboxProcess) -> Iterator[SandboxProcess]:
    """The session's sandbox, reset to its start configuration for this test."""
    sandbox_server.reset()
    yield sandbox_server
    sandbox_server.reset()


@pytest.fixture
def settings(sandbox: SandboxProcess, database_url: str) -> Settings:
    """Settings for an engine talking to the sandbox; fast backoff for tests."""
    return Settings().replace(
        database={"database_url": database_url},
        whatsapp={"api_base_url": sandbox.url, "send_timeout": 5.0, "throughput_limit": 2000.0},
        delivery={
            "concurrency": 8,
            "backoff_base_seconds": 0.0,
            "backoff_max_seconds": 0.0,
            # The environment's "off" reaches child processes; an in-process
            # Settings() holds the code's default, which is on at night.
            "quiet_hours": "",
        },
    )


@pytest.fixture
def browser() -> Iterator[object]:
    """Debian's chromium driven by Playwright (``support/browser.py``)."""
    from delivery_pipeline_tests.support.browser import chromium

    with chromium() as launched:
        yield launched
