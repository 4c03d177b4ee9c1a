"""What every named query takes and returns: its parameters and its row, beside its SQL.

Parameters are a ``TypedDict`` per shape, so mypy checks each call's names
and types (a ``NotRequired`` key is one that some queries of a shared shape
do not read); a row is a ``NamedTuple`` whose fields are the query's result
columns, in order and by name (a query of one column returns the value
itself). ``store.queries`` pairs each query with its two types;
``delivery_pipeline_tests/store/test_queries.py`` describes every query on a
migrated database and fails when a type and its SQL disagree. A field typed
with one of ``model``'s enums is loaded as that enum (the CHECK constraint
guarantees the value).

A query file's own types are in the module named like it (``rows.core`` for
``sql/queries/core.sql``; ``backlog.sql`` and ``schema.sql`` have none of
their own); the shapes that the queries of several files share are in
``rows.common``, which the others import and which imports none of them.
This package itself holds and imports nothing: a type is imported from the
module that declares it, so its import says which SQL file it belongs to.

Every process builds all of these classes at import, and a sender's start-up
is part of what each of its messages costs (docs/benchmarks.md, "Start-up"):
so rows are named tuples, not frozen dataclasses (whose methods are compiled
from generated source, class by class), and annotations in these modules are
evaluated, not postponed (``typing`` compiles each string annotation of a
``TypedDict`` or a ``NamedTuple`` into a forward reference).
"""
