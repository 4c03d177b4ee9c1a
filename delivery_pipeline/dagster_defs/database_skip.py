"""A sensor whose app database does not answer skips its tick, and says why.

Every connection a sensor opens gives up (``AppDatabase.connect``: the connect
and statement timeouts), so a database that hangs or is down raises within
``DATABASE_STATEMENT_TIMEOUT_SECONDS``, well inside Dagster's deadline for a
tick. The sensor then returns a ``SkipReason`` naming the database, rather than
a failed tick with a traceback: nothing was decided, the next tick asks again.
Any other error still fails the tick.
"""

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import dagster as dg
import psycopg

from delivery_pipeline.store.db import database_unavailable

P = ParamSpec("P")
R = TypeVar("R")


def unavailable_reason(exc: BaseException) -> dg.SkipReason:
    """The skip of a tick whose database did not answer: the driver's first line, which
    names the host or the cancelled statement, never a password."""
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return dg.SkipReason(
        f"The app database did not answer ({type(exc).__name__}: {first_line}); this tick "
        "decided nothing, the next one asks again."
    )


def skip_when_database_unavailable(
    evaluate: Callable[P, R],
) -> Callable[P, R | dg.SkipReason]:
    """``evaluate``, returning ``unavailable_reason`` when the app database cannot serve it
    (connection refused or timed out, statement cancelled by its timeout)."""

    @functools.wraps(evaluate)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R | dg.SkipReason:
        try:
            return evaluate(*args, **kwargs)
        except psycopg.Error as exc:
            if not database_unavailable(exc):
                raise
            return unavailable_reason(exc)

    return guarded
