"""Secret-looking, unique values for every secret setting, and where to look for them.

Each value carries a random marker of its own; a test that finds none of the
markers in what a process showed has found none of the secrets, whole or cut
(a URL's password, a webhook's path). A database role with a password makes
the password real: the server checks it (unless it trusts every local
connection, in which case the password is still in every URL we hand out).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

import psycopg

from delivery_pipeline.settings import Settings

# Where the settings model says a value is secret, plus the URLs read by other
# tools (Dagster's storage) and URLs that may carry credentials in their userinfo.
SECRET_VARIABLES = (
    "WHATSAPP_ACCESS_TOKEN",
    "WHATSAPP_APP_SECRET",
    "WHATSAPP_VERIFY_TOKEN",
    "DELIVERY_INTERNAL_TOKEN",
    "OPS_WEBHOOK_URL",
    "REVIEW_TOKEN",
    "REVIEW_TOKENS",
    "OPERATOR_TOKENS",
    "REVIEW_WEBHOOK_URL",
    "OPENAI_API_KEY",
    "DATABASE_URL",
    "DAGSTER_PG_URL",
    "OPENAI_BASE_URL",
    "DAGSTER_WEBSERVER_URL",
    "DELIVERY_API_TOKENS",
    "DELIVERY_API_WEBHOOKS",
    "DELIVERY_API_WEBHOOK_SECRETS",
    "DELIVERY_METRICS_TOKEN",
    "DATABASE_LISTEN_URL",
    "DELIVERY_MIGRATION_DATABASE_URL",
    "SANDBOX_APP_SECRET",
)


def marker(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Role:
    name: str
    password: str


@contextmanager
def role_with_password(admin_url: str) -> Iterator[Role]:
    """A login role with a unique password (superuser: it runs migrations and Dagster's)."""
    role = Role(f"dp_secret_{uuid.uuid4().hex[:10]}", marker("pgpass"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                psycopg.sql.Identifier(role.name), psycopg.sql.Literal(role.password)
            )
        )
    try:
        yield role
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(role.name))
            )


def url_as(admin_url: str, database: str, role: Role, scheme: str = "postgresql") -> str:
    """A ``scheme://role:password@…/database`` URL to ``admin_url``'s server (TCP or socket)."""
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    host = str(info.get("host") or "127.0.0.1")
    port = str(info.get("port") or 5432)
    auth = f"{quote(role.name)}:{quote(role.password)}"
    if host.startswith("/"):
        return f"{scheme}://{auth}@/{database}?host={quote(host)}&port={port}"
    return f"{scheme}://{auth}@{host}:{port}/{database}"


def secret_environment(
    database_url: str,
    dagster_pg_url: str,
    hooks: str = "http://127.0.0.1:9",
    generator: str = "127.0.0.1:9",
) -> dict[str, str]:
    """A value for every secret setting, each with its own marker; the channels' webhooks
    under ``hooks`` (a sink that takes them; default: nowhere), the generator's base URL
    on ``generator`` (host:port; default: nowhere)."""
    env = {
        "WHATSAPP_ACCESS_TOKEN": "EAAG" + marker("access"),
        "WHATSAPP_APP_SECRET": marker("appsecret"),
        "WHATSAPP_VERIFY_TOKEN": marker("verify"),
        "DELIVERY_INTERNAL_TOKEN": marker("internal"),
        "OPS_WEBHOOK_URL": f"{hooks}/services/T0/B0/{marker('opshook')}",
        "REVIEW_TOKEN": marker("reviewtoken"),
        "REVIEW_TOKENS": f"Ana={marker('reviewtokens')}",
        "OPERATOR_TOKENS": f"Olga={marker('operatortokens')}",
        "REVIEW_WEBHOOK_URL": f"{hooks}/services/T0/B1/{marker('reviewhook')}",
        "OPENAI_API_KEY": "sk-" + marker("openai"),
        "DATABASE_URL": database_url,
        # the service listens where it queries: the same role and password
        "DATABASE_LISTEN_URL": database_url,
        # the schema's owner: here the same role (its password is the role's)
        "DELIVERY_MIGRATION_DATABASE_URL": database_url,
        "DELIVERY_METRICS_TOKEN": marker("metrics"),
        "SANDBOX_APP_SECRET": marker("sandboxsecret"),
        "DAGSTER_PG_URL": dagster_pg_url,
        "OPENAI_BASE_URL": f"http://proxy:{marker('openaiproxy')}@{generator}/v1",
        "DAGSTER_WEBSERVER_URL": f"http://ops:{marker('webserverauth')}@127.0.0.1:9",
        "DELIVERY_API_TOKENS": f"acme={marker('apitoken')}",
        "DELIVERY_API_WEBHOOKS": f"acme={hooks}/events/{marker('apihook')}",
        # a Standard Webhooks secret is base64: the marker is in the bytes it encodes
        "DELIVERY_API_WEBHOOK_SECRETS": "acme=whsec_"
        + base64.b64encode(marker("apisigning").encode()).decode(),
    }
    assert set(env) == set(SECRET_VARIABLES)
    return env


def needles(env: dict[str, str], role: Role) -> dict[str, str]:
    """What must never show, by name: every secret value whole, and the password alone."""
    found = {name: env[name] for name in SECRET_VARIABLES}
    found["database password"] = role.password
    for name, value in env.items():
        # the marker alone: a value cut, quoted or percent-encoded still shows it
        for word in value.replace("/", " ").replace(":", " ").replace("@", " ").split():
            if "-" in word and len(word) > 32:
                found[f"{name} (marker)"] = word[-32:]
    return found


def every_secret_variable_covered() -> set[str]:
    """The model's secret settings not in ``SECRET_VARIABLES`` (should be none)."""
    missing = set()
    for section in Settings.sections().values():
        names = section.env_names()
        for field in section.secret_fields():
            if names[field] not in SECRET_VARIABLES:
                missing.add(names[field])
    return missing
