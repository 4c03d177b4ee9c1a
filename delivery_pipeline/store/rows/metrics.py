"""The row of ``sql/queries/metrics.sql``: the webhook service's ``/metrics``."""

from typing import Any, NamedTuple


class MetricRow(NamedTuple):
    """One sample of ``/metrics`` read from the database."""

    metric: str
    labels: dict[str, Any]
    value: float
