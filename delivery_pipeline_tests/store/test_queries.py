"""Every named query against its declaration in ``store.queries``, on a migrated database.

Each query is prepared (never run) with the parameter types its ``TypedDict``
declares, and described: the SQL's ``%(name)s`` set must be the declared
keys (less, at most, its ``NotRequired`` ones), each parameter's type the one
the server expects, and the result columns, in order, the row's
fields with matching types (a ``Statement`` returns none). So a column added,
renamed or retyped in SQL without its row type, or a parameter without its
declaration, fails here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import re
import types
import typing
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from delivery_pipeline.store.queries import (
    QUERIES,
    Queries,
    Query,
    Statement,
    row_factory,
    row_fields,
)
from delivery_pipeline.store.rows.core import Claim, LedgerEntry

pytestmark = pytest.mark.engine

PLACEHOLDER = re.compile(r"%\((\w+)\)s")

# A Python type's name as these checks compare it, and the Postgres types it stands for.
PYTHON_OF_PG = {
    "boolean": "bool",
    "smallint": "int",
    "integer": "int",
    "bigint": "int",
    "real": "float",
    "double precision": "float",
    "numeric": "Decimal",
    "text": "str",
    "character varying": "str",
    "name": "str",
    "timestamp with time zone": "datetime",
    "date": "date",
    "time without time zone": "time",
    "interval": "timedelta",
    "uuid": "UUID",
    "jsonb": "json",
    "json": "json",
    "bytea": "bytes",
    "bigint[]": "list[int]",
    "integer[]": "list[int]",
    "text[]": "list[str]",
    "uuid[]": "list[UUID]",
    "boolean[]": "list[bool]",
    "double precision[]": "list[float]",
}
# The Postgres type a parameter is prepared with (what psycopg sends; a str goes
# as "unknown", so the server infers it, as it does when the query runs).
PG_OF_PYTHON = {
    "bool": "boolean",
    "int": "bigint",
    "float": "double precision",
    "Decimal": "numeric",
    "datetime": "timestamp with time zone",
    "date": "date",
    "time": "time without time zone",
    "timedelta": "interval",
    "UUID": "uuid",
    "json": "jsonb",
    "bytes": "bytea",
    "list[int]": "bigint[]",
    "list[str]": "text[]",
    "list[UUID]": "uuid[]",
    "list[bool]": "boolean[]",
    "list[float]": "double precision[]",
}
_NAMES = {
    bool: "bool",
    int: "int",
    float: "float",
    decimal.Decimal: "Decimal",
    str: "str",
    dt.datetime: "datetime",
    dt.date: "date",
    dt.time: "time",
    dt.timedelta: "timedelta",
    uuid.UUID: "UUID",
    bytes: "bytes",
    Jsonb: "json",
}


def python_names(hint: object) -> set[str]:
    """``int | None`` → ``{int}``; a StrEnum → ``{str}``; ``dict[str, Any]`` → ``{json}``;
    a union keeps each option (a value that is one type or another, per query)."""
    if isinstance(hint, types.UnionType):
        return set().union(*(python_names(o) for o in typing.get_args(hint) if o is not type(None)))
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = python_names(typing.get_args(hint)[0])
        return {f"list[{item}]"}
    if origin is dict:
        return {"json"}
    assert isinstance(hint, type), f"{hint!r} is not a type these checks know"
    for kind, name in _NAMES.items():
        if hint is kind or (kind is str and issubclass(hint, str)):
            return {name}
    raise AssertionError(f"{hint!r} is not a type these checks know")


def matches(pg_type: str, hint: object) -> bool:
    return PYTHON_OF_PG.get(pg_type, pg_type) in python_names(hint)


def _oid(oids: dict[str, int], hint: object) -> int:
    """The type a parameter is prepared with: its own, or "unknown" for a str or a union
    (the server infers it, as when the query runs)."""
    names = python_names(hint)
    return oids[PG_OF_PYTHON[names.pop()]] if len(names) == 1 and names <= set(PG_OF_PYTHON) else 0


def param_names(sql: str) -> list[str]:
    """The SQL's parameters, in order of first use."""
    return list(dict.fromkeys(PLACEHOLDER.findall(sql)))


@dataclasses.dataclass
class Described:
    params: dict[str, str]  # name → the Postgres type the server expects
    columns: list[tuple[str, str]]  # (name, Postgres type)
    error: str | None = None  # the server refused to prepare it


@pytest.fixture(scope="module")
def described(template_database: str, pg_admin_url: str) -> dict[str, Described]:
    """Every query prepared and described on a clone of the migrated template (its own,
    so that the template stays free to clone)."""
    from delivery_pipeline.store.db import ensure_database, with_database

    name = f"dp_queries_{uuid.uuid4().hex[:10]}"
    ensure_database(pg_admin_url, name, template=template_database)
    try:
        with psycopg.connect(with_database(pg_admin_url, name), autocommit=True) as conn:
            return {query.name: describe(conn, query) for query in QUERIES}
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("DROP DATABASE {}").format(psycopg.sql.Identifier(name)))


def describe(
    conn: psycopg.Connection[typing.Any],
    query: Query[typing.Any, typing.Any] | Statement[typing.Any],
) -> Described:
    """Prepare ``query`` with its declared parameter types (never run it) and describe it."""
    type_names = {
        oid: name for oid, name in conn.execute("SELECT oid, format_type(oid, NULL) FROM pg_type")
    }
    oids = {name: oid for oid, name in type_names.items()}
    names = param_names(query.sql)
    hints = typing.get_type_hints(query.params)
    text = PLACEHOLDER.sub(lambda m: f"${names.index(m.group(1)) + 1}", query.sql)
    sent = [_oid(oids, hints[n]) if n in hints else 0 for n in names]
    prepared = conn.pgconn.prepare(b"", text.encode(), sent)
    if prepared.status != psycopg.pq.ExecStatus.COMMAND_OK:
        return Described({}, [], prepared.error_message.decode().strip())
    result = conn.pgconn.describe_prepared(b"")
    return Described(
        {names[i]: type_names[result.param_type(i)] for i in range(result.nparams)},
        [(result.fname(i).decode(), type_names[result.ftype(i)]) for i in range(result.nfields)],
    )


@pytest.mark.parametrize("name", sorted(Queries.declared()))
def test_parameters_are_declared(name: str, described: dict[str, Described]) -> None:
    query = getattr(QUERIES, name)
    hints = typing.get_type_hints(query.params)
    assert described[name].error is None, (
        f"{name} with its declared parameters: {described[name].error}"
    )
    # (__optional_keys__ misses a NotRequired written as a string annotation on 3.11)
    extras = typing.get_type_hints(query.params, include_extras=True)
    optional = {k for k, h in extras.items() if typing.get_origin(h) is typing.NotRequired}
    used = set(param_names(query.sql))
    assert used - optional == set(hints) - optional and used <= set(hints), (
        f"{name}: the SQL's %(…)s names and {query.params.__name__}'s keys differ"
    )
    for param, pg_type in described[name].params.items():
        assert matches(pg_type, hints[param]), (
            f"{name}: %({param})s is {pg_type} in SQL, {hints[param]} in {query.params.__name__}"
        )


@pytest.mark.parametrize("name", sorted(Queries.declared()))
def test_rows_are_declared(name: str, described: dict[str, Described]) -> None:
    query = getattr(QUERIES, name)
    assert described[name].error is None, (
        f"{name} with its declared parameters: {described[name].error}"
    )
    columns = [(c, t) for c, t in described[name].columns if t != "void"]
    if isinstance(query, Statement):
        assert columns == [], f"{name} returns {columns}: declare it a Query with a row type"
        return
    assert isinstance(query, Query)
    fields = row_fields(query.row)
    if fields is None:
        assert len(columns) == 1, f"{name} returns {columns}, not one {query.row.__name__}"
        assert matches(columns[0][1], query.row), (
            f"{name}: its column is {columns[0][1]}, declared {query.row.__name__}"
        )
        return
    hints = typing.get_type_hints(query.row)
    assert [c for c, _ in columns] == list(fields), (
        f"{name}: the result columns and {query.row.__name__}'s fields differ (names or order)"
    )
    for column, pg_type in columns:
        assert matches(pg_type, hints[column]), (
            f"{name}: column {column} is {pg_type}, {hints[column]} in {query.row.__name__}"
        )


def test_every_query_in_sql_is_declared_and_the_loader_says_which(tmp_path: Path) -> None:
    from delivery_pipeline.store.queries import QUERIES_DIR

    for path in QUERIES_DIR.glob("*.sql"):
        (tmp_path / path.name).write_text(path.read_text())
    extra = tmp_path / "extra.sql"
    extra.write_text("-- name: not_declared\n-- A query nobody declared.\nSELECT 1\n")
    with pytest.raises(ImportError, match=r"not declared in Queries \['not_declared'\]"):
        Queries.load(tmp_path)
    extra.unlink()
    (tmp_path / "backlog.sql").unlink()
    with pytest.raises(ImportError, match=r"missing in SQL \['backlog_by_state'\]"):
        Queries.load(tmp_path)


def test_a_declaration_runs_only_once_loaded() -> None:
    with pytest.raises(RuntimeError, match="run QUERIES.person_by_id"):
        _ = Queries.person_by_id.sql


def test_enum_fields_are_loaded_as_their_enum(db: psycopg.Connection[typing.Any]) -> None:
    from delivery_pipeline.model import Action, ChunkState

    cur = db.cursor(row_factory=row_factory(LedgerEntry))
    row = cur.execute(
        "SELECT 1 AS document_id, false AS person_busy, true AS written_now, 0 AS chunk_index, "
        "'sent' AS state, "
        "1 AS send_attempts, 'x' AS callback_data, NULL AS body, 0.0 AS ambiguous_age_seconds"
    ).fetchone()
    assert row is not None and row.state is ChunkState.SENT
    assert typing.get_type_hints(Claim)["action"] is Action


@pytest.mark.parametrize(
    ("hint", "names"),
    [
        (int | None, {"int"}),
        (list[int], {"list[int]"}),
        (dict[str, typing.Any], {"json"}),
        (int | str | None, {"int", "str"}),
    ],
)
def test_python_names(hint: object, names: set[str]) -> None:
    assert python_names(hint) == names


# The modules that run SQL text that is not a named query: the migration files,
# CREATE DATABASE (an identifier), sql/schema.sql.
RUNS_FILES_OR_IDENTIFIERS = {
    "store/queries.py",
    "store/migrations.py",
    "store/db.py",
    "store/schema.py",
}


def test_the_package_reads_rows_only_through_named_queries() -> None:
    import delivery_pipeline

    package = Path(delivery_pipeline.__file__).parent
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if str(path.relative_to(package)) not in RUNS_FILES_OR_IDENTIFIERS
        # The shared test harness (tests and benchmarks, never the product)
        # sets rows up and injects faults (a database refusing connections)
        # as delivery_pipeline_tests/support does.
        and path.relative_to(package).parts[0] != "testing"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\.(execute|fetchone|fetchall|fetchmany)\(", line)
    ]
    assert found == [], "run SQL as QUERIES.<name>.one/all/run, typed in store.rows"


def test_the_engines_connections_do_not_jit_compile(database_url):
    """The engine's pool turns JIT off on each of its connections (the claim's plan
    cost more to compile than to run), without touching the URL's own options."""
    import asyncio

    from delivery_pipeline.store.db import async_pool, with_application_name

    async def settings() -> tuple[str, str]:
        url = with_application_name(database_url, "jit-test")
        async with async_pool(url, max_size=2) as pool, pool.connection() as conn:
            cur = await conn.execute(
                "SELECT current_setting('jit') AS jit, current_setting('application_name') AS name"
            )
            row = await cur.fetchone()
            assert row is not None
            return row["jit"], row["name"]

    assert asyncio.run(settings()) == ("off", "jit-test")


def test_the_statements_run_per_message_fit_psycopgs_conversion_cache() -> None:
    """psycopg converts a statement's ``%(name)s`` placeholders once and keeps the
    result only for statements of at most 4,096 characters; a longer one is
    parsed again at every call. The loader drops comment lines, indented ones
    included, so the ledger's statements and the claim stay under it."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    hot = ("advance_delivery", "begin_delivery", "claim_batch", "reserve_send_slots")
    lengths = {name: len(getattr(QUERIES, name).sql.encode()) for name in hot}
    assert all(n <= MAX_CACHED_STATEMENT_LENGTH for n in lengths.values()), lengths
    assert not any(
        line.lstrip().startswith("--") for line in QUERIES.advance_delivery.sql.splitlines()
    )
