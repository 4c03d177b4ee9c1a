"""Property tests on a test's database or client: Hypothesis's settings for them, and
instants in UTC to draw."""

from __future__ import annotations

import datetime as dt

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st


def examples(count: int, *also: HealthCheck) -> settings:
    """Settings for a property test that takes a function-scoped fixture (the
    database connection, a client): every example shares it, which these tests mean
    (each example adds its own rows, or rolls them back). No deadline: a round trip
    to Postgres varies with the machine's load."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, *also],
    )


def instants(first_year: int, last_year: int) -> st.SearchStrategy[dt.datetime]:
    """Instants in UTC from 1 January of ``first_year`` to 31 December of ``last_year``."""
    return st.datetimes(
        min_value=dt.datetime(first_year, 1, 1),
        max_value=dt.datetime(last_year, 12, 31),
        timezones=st.just(dt.UTC),
    )
