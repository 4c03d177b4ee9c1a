"""``Settings.database``: the app database (its URLs, timeouts, pool mode) and the
embedded Postgres used when none is set."""

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from delivery_pipeline.settings.section import Section, env

# The checkout this package runs from (settings/sections/ is three levels down).
PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_DATA_DIR = PROJECT_ROOT / ".data"


class DatabaseSettings(Section):
    # A password in it is routine (postgresql://user:password@host/db, or password=…).
    text_secrets: ClassVar[frozenset[str]] = frozenset(
        {"database_url", "migration_database_url", "listen_url"}
    )

    database_url: str | None = Field(
        None,
        repr=False,
        json_schema_extra=env("DATABASE_URL"),
        description=(
            "the app database (any Postgres ≥ 14; a password in it is never shown); unset: an "
            "embedded Postgres under DELIVERY_DATA_DIR"
        ),
    )
    migration_database_url: str | None = Field(
        None,
        repr=False,
        json_schema_extra=env("DELIVERY_MIGRATION_DATABASE_URL"),
        description=(
            "the app database as the role that owns the schema, for `delivery-pipeline db "
            "upgrade` alone (everything else connects with DATABASE_URL, a role that may read "
            "and write rows but not change tables: docs/how-to/deploy.md); unset: DATABASE_URL"
        ),
    )
    data_dir: str = Field(
        str(DEFAULT_DATA_DIR),
        json_schema_extra=env("DELIVERY_DATA_DIR"),
        description="where the embedded Postgres lives",
    )
    connect_timeout_seconds: int = Field(
        10,
        ge=2,
        json_schema_extra=env("DATABASE_CONNECT_TIMEOUT_SECONDS"),
        description="Dagster's sensors, checks and ops give up reaching the app database "
        "after this long (libpq's connect_timeout; 2 at least)",
    )
    statement_timeout_seconds: float = Field(
        30.0,
        gt=0,
        json_schema_extra=env("DATABASE_STATEMENT_TIMEOUT_SECONDS"),
        description="a statement of Dagster's sensors, checks and ops (a lock wait included) "
        "is cancelled after this long: a sensor skips, a run fails; keep it under Dagster's "
        "60 s sensor deadline",
    )
    pool_mode: Literal["session", "transaction"] = Field(
        "session",
        json_schema_extra=env("DATABASE_POOL_MODE"),
        description=(
            "what DATABASE_URL reaches: session (Postgres itself, or a pooler in session mode) or "
            "transaction (a pooler such as PgBouncer in transaction mode: no session state, no "
            "server-side prepared statements, no startup options, no LISTEN on it)"
        ),
    )
    listen_url: str | None = Field(
        None,
        repr=False,
        json_schema_extra=env("DATABASE_LISTEN_URL"),
        description=(
            "where the webhook service LISTENs for notifications (a session: Postgres itself or "
            "a session-mode pool; a password in it is never shown); unset: DATABASE_URL, or no "
            "listening when DATABASE_POOL_MODE is transaction (the service then looks at its "
            "intervals)"
        ),
    )
    embedded_os_user: str = Field(
        "embedded_postgres",
        pattern=r"^[a-z_][a-z0-9_-]{0,31}$",
        json_schema_extra=env("DELIVERY_EMBEDDED_OS_USER"),
        description=(
            "the system user the embedded Postgres runs as when started by root (created on first "
            "use)"
        ),
    )

    @field_validator("database_url", "migration_database_url", "listen_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        """Refused here, in one line, rather than as a driver error on first use."""
        import psycopg  # only when a URL is set: the sandbox needs no driver

        if value is not None:
            try:
                psycopg.conninfo.conninfo_to_dict(value)
            except psycopg.ProgrammingError:
                # psycopg's text quotes the value, password and all: not shown.
                raise ValueError(
                    "not a PostgreSQL URL (like postgresql://user@host:5432/delivery)"
                ) from None
        return value

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def transaction_pooled(self) -> bool:
        """Does DATABASE_URL reach a pooler that hands each transaction any server session?"""
        return self.pool_mode == "transaction"
