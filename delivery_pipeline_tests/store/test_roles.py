"""Two database roles on the real Postgres: migrations as the schema's owner
(``DELIVERY_MIGRATION_DATABASE_URL``), everything else as a login role granted
``delivery_runtime`` (sql/migrations/041), which reads and writes rows and cannot change a table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from delivery_pipeline.store.db import with_database
from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import start_service
from delivery_pipeline_tests.support import cli


@dataclass(frozen=True)
class Roles:
    migration_url: str
    runtime_url: str


def _as(url: str, user: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["user"] = user
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **{k: v for k, v in info.items() if v is not None})


@pytest.fixture
def roles(pg_admin_url: str) -> Iterator[Roles]:
    """A database owned by a role that is no superuser, and a login role that is only
    granted delivery_runtime (made by the first migration run on this server, as here)."""
    suffix = uuid.uuid4().hex[:8]
    owner, app, name = f"dp_owner_{suffix}", f"dp_app_{suffix}", f"dp_roles_{suffix}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE").format(sql.Identifier(owner)))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(app)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(owner)
            )
        )
    database = with_database(pg_admin_url, name)
    try:
        yield Roles(_as(database, owner), _as(database, app))
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            for role in (app, owner):
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_the_runtime_role_runs_the_system_and_cannot_change_a_table(roles, sandbox, pg_admin_url):
    app = psycopg.conninfo.conninfo_to_dict(roles.runtime_url)["user"]
    # Migrated as the owner: db upgrade takes DELIVERY_MIGRATION_DATABASE_URL over DATABASE_URL.
    upgraded = cli.run(
        roles.runtime_url, "db", "upgrade", DELIVERY_MIGRATION_DATABASE_URL=roles.migration_url
    )
    assert upgraded.returncode == 0, upgraded.stderr
    # The group role is the server's: an earlier migration on this server may have made it
    # as another role, and from PostgreSQL 16 only a role's admins grant it. The server's
    # administrator grants it, as the deploy guide says.
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("GRANT delivery_runtime TO {}").format(sql.Identifier(app)))
    with psycopg.connect(roles.migration_url, autocommit=True) as owner:
        tables = owner.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() "
            "AND tableowner <> current_user"
        ).fetchone()
        assert tables == (0,), "every table is the owner's"

    # Everything else as the runtime role: a person added, a message ingested by the
    # service, a document handed over and swept to the sandbox.
    added = cli.run(roles.runtime_url, "people", "add", "--phone", "+15550109001", "--name", "Ana")
    assert added.returncode == 0, added.stderr
    with start_service(roles.runtime_url, sandbox.url) as service:
        body = payloads.inbound("+15550109001", "wamid.ROLES1", "hello")
        assert service.post_webhook(body).status_code == 200
        assert service.http.get("/healthz").json()["status"] == "ok"
    handed = cli.run(
        roles.runtime_url, "documents", "add", "--person", "+15550109001", stdin="Your plan."
    )
    assert handed.returncode == 0, handed.stderr
    swept = cli.run(
        roles.runtime_url, "sweep", WHATSAPP_API_BASE_URL=sandbox.url, DELIVERY_QUIET_HOURS="off"
    )
    assert swept.returncode == 0, swept.stderr
    # The sweep sent (the text, or the knock that asks first): rows claimed, sends recorded.
    assert sandbox.inbox("+15550109001"), "nothing was sent"
    with psycopg.connect(roles.runtime_url, autocommit=True) as runtime:
        stored = runtime.execute(
            "SELECT count(*) FROM inbound_messages WHERE wa_message_id = 'wamid.ROLES1'"
        ).fetchone()
        assert stored == (1,)
        for statement in (
            "DROP TABLE documents",
            "ALTER TABLE documents ADD COLUMN taken_over int",
            "TRUNCATE people CASCADE",
            "CREATE INDEX ON documents (id)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                runtime.execute(statement)
    # db upgrade as the runtime role alone: refused, in one line saying what to do.
    refused = cli.run(roles.runtime_url, "db", "upgrade")
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert "DELIVERY_MIGRATION_DATABASE_URL" in line and "may not change the schema" in line
