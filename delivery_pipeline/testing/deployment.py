"""A whole deployment as real processes, for the tests and benchmarks of Dagster
as the system of record: the sandbox, the webhook service, ``dagster-webserver``
and ``dagster-daemon run`` (each with its own code server, each started by the
one supervisor), Dagster's storage in its own Postgres database beside the app's.

What the tests do to it is what happens in production: the daemon's process
stops and starts again (``stop_daemon``/``start_daemon``), Dagster's storage
becomes unreachable and comes back (``block_storage``/``unblock_storage``: the
database refuses connections and loses the ones it had). Dagster is asked
over HTTP (``graphql``); opening its storage in-process (a ``DagsterInstance``
on ``env["DAGSTER_HOME"]``) is the caller's, since the harness imports no
Dagster (``lint-imports``): ``delivery_pipeline_tests/support/dagster_deployment.py``
adds it for the tests, and a benchmark opens its own.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg

from delivery_pipeline.cli.children import prepare_dagster_home
from delivery_pipeline.store.db import ensure_database, sqlalchemy_url, with_database
from delivery_pipeline.supervisor import Child
from delivery_pipeline.testing.sandbox import (
    REPO_ROOT,
    SandboxProcess,
    free_port,
    start_sandbox,
)
from delivery_pipeline.testing.service import (
    APP_SECRET,
    ServiceProcess,
    start_service,
)

T = TypeVar("T")
D = TypeVar("D", bound="Deployment")


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 120.0) -> T:
    """Poll until ``probe`` returns something truthy (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.25)


def graphql(
    webserver_url: str, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Ask Dagster's GraphQL API; an answer with errors fails the test."""
    response = httpx.post(
        f"{webserver_url}/graphql",
        json={"query": query, "variables": variables or {}},
        timeout=30,
    )
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def _executable(name: str) -> str:
    return str(Path(sys.executable).parent / name)


class Deployment:
    def __init__(
        self,
        admin_url: str,
        database_url: str,
        dagster_database: str,
        root: Path,
        sandbox: SandboxProcess,
        service: ServiceProcess,
        env: dict[str, str],
        webserver_port: int,
    ) -> None:
        self.admin_url = admin_url
        self.database_url = database_url
        self.dagster_database = dagster_database
        self.root = root
        self.sandbox = sandbox
        self.service = service
        self.env = env
        self.webserver_url = f"http://127.0.0.1:{webserver_port}"
        workspace = str(REPO_ROOT / "workspace.yaml")
        # The run command's children: each in its own process group with its code server.
        self.webserver = Child(
            "webserver",
            [
                _executable("dagster-webserver"),
                "-w",
                workspace,
                "-h",
                "127.0.0.1",
                "-p",
                str(webserver_port),
            ],
            env,
            f"{self.webserver_url}/server_info",
            root / "webserver.log",
        )
        self.daemon = Child(
            "daemon",
            [_executable("dagster-daemon"), "run", "-w", workspace],
            env,
            None,
            root / "daemon.log",
        )

    # ── Dagster's API ─────────────────────────────────────────────────

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        return graphql(self.webserver_url, query, variables)

    # ── what happens to it ────────────────────────────────────────────

    def start_daemon(self) -> None:
        self.daemon.start(REPO_ROOT, stream=False)

    def stop_daemon(self) -> None:
        self.daemon.stop()

    def block_storage(self) -> None:
        """Dagster's storage goes away: its database refuses connections and drops its own."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            ident = psycopg.sql.Identifier(self.dagster_database)
            conn.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(ident))
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %(d)s",
                {"d": self.dagster_database},
            )

    def unblock_storage(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            ident = psycopg.sql.Identifier(self.dagster_database)
            conn.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(ident))

    def close(self) -> None:
        """Stop Dagster's processes (a subclass closes what it opened first)."""
        self.daemon.stop()
        self.webserver.stop()

    def logs(self) -> str:
        return "\n".join(
            [
                f"--- webserver ---\n{self.webserver.tail(60)}",
                f"--- daemon ---\n{self.daemon.tail(60)}",
                f"--- service ---\n{self.service.log()[-6000:]}",
            ]
        )


@contextmanager
def dagster_deployment(
    admin_url: str, template_database: str | None = None, **settings: str
) -> Iterator[Deployment]:
    """Everything up, on fresh databases on ``admin_url``'s server; ``settings`` are
    environment variables for the service and Dagster (``WATCHDOG_STALE_SECONDS=…``)."""
    with deployment_of(Deployment, admin_url, template_database, settings) as deployment:
        yield deployment


@contextmanager
def deployment_of(
    kind: type[D], admin_url: str, template_database: str | None, settings: dict[str, str]
) -> Iterator[D]:
    """``dagster_deployment`` as a ``kind`` (a ``Deployment`` that adds to it)."""
    from delivery_pipeline.store.migrations import upgrade

    suffix = uuid.uuid4().hex[:10]
    app_db, dagster_db = f"dp_rec_{suffix}", f"dp_rec_dagster_{suffix}"
    ensure_database(admin_url, app_db, template=template_database)
    ensure_database(admin_url, dagster_db)
    database_url = with_database(admin_url, app_db)
    if template_database is None:
        upgrade(database_url)
    root = Path(tempfile.mkdtemp(prefix="dp-dagster-"))
    home = prepare_dagster_home(root / "dagster_home")
    service_port, webserver_port = free_port(), free_port()
    service_url = f"http://127.0.0.1:{service_port}"
    sandbox = start_sandbox(SANDBOX_APP_SECRET=APP_SECRET)
    common: dict[str, Any] = {
        "DAGSTER_WEBSERVER_URL": f"http://127.0.0.1:{webserver_port}",
        "OPS_WEBHOOK_URL": f"{sandbox.url}/_sandbox/ops",
        **settings,
    }
    service = None
    deployment = None
    try:
        sandbox.faults(webhook_url=f"{service_url}/webhooks/whatsapp", app_secret=APP_SECRET)
        service = start_service(database_url, sandbox.url, port=service_port, **common)
        env = {
            **service.env,
            "DELIVERY_SERVICE_URL": service_url,
            "DAGSTER_HOME": str(home),
            "DAGSTER_PG_URL": sqlalchemy_url(with_database(admin_url, dagster_db)),
        }
        deployment = kind(
            admin_url, database_url, dagster_db, root, sandbox, service, env, webserver_port
        )
        deployment.webserver.start(REPO_ROOT, stream=False)
        deployment.start_daemon()
        eventually(deployment.webserver.ready, "the Dagster webserver", timeout=180)
        yield deployment
    except BaseException:
        if deployment is not None:
            print(deployment.logs())
        raise
    finally:
        if deployment is not None:
            deployment.close()
        if service is not None:
            service.stop()
        sandbox.stop()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            for name in (app_db, dagster_db):
                ident = psycopg.sql.Identifier(name)
                conn.execute(
                    psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(ident)
                )
                conn.execute(
                    psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident)
                )
