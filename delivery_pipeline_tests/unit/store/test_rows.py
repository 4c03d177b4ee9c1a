"""The query types as ``store/rows/__init__.py`` states them: each query file's in the
module of ``store.rows`` named like it, the shapes several files share in
``rows.common``, which imports none of the others, and every annotation evaluated."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from delivery_pipeline.store import rows
from delivery_pipeline.store.queries import QUERIES_DIR, Queries, Query, read_queries

ROWS = Path(rows.__file__).parent


def declared_types(query: object) -> tuple[object, ...]:
    return (query.params, query.row) if isinstance(query, Query) else (query.params,)


def test_a_query_files_types_are_in_its_module_or_in_common() -> None:
    file_of = {
        name: path.stem for path in QUERIES_DIR.glob("*.sql") for name in read_queries([path])
    }
    elsewhere = [
        f"{name} (sql/queries/{file_of[name]}.sql): {kind.__module__}.{kind.__qualname__}"
        for name, query in Queries.declared().items()
        for kind in declared_types(query)
        if isinstance(kind, type)
        and kind.__module__.startswith(f"{rows.__name__}.")
        and kind.__module__.removeprefix(f"{rows.__name__}.") not in ("common", file_of[name])
    ]
    assert elsewhere == [], "a shape the queries of several files share belongs in rows.common"


def test_the_modules_import_no_module_of_rows_but_common() -> None:
    found = [
        f"{path.name} imports {node.module}"
        for path in sorted(ROWS.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith(rows.__name__)
        and (path.stem == "common" or node.module != f"{rows.__name__}.common")
    ]
    assert found == []


def test_every_annotation_is_evaluated() -> None:
    """``store.queries.row_factory`` reads a row's ``__annotations__`` as its fields'
    types, and a string there would cost every process its evaluation at start-up."""
    unevaluated = [
        f"{kind.__module__}.{kind.__qualname__}.{field}: {hint!r}"
        for query in Queries.declared().values()
        for kind in declared_types(query)
        for field, hint in getattr(kind, "__annotations__", {}).items()
        if isinstance(hint, str | typing.ForwardRef)
    ]
    assert unevaluated == []
