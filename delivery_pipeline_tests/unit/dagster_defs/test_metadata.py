"""The one serialisation of metadata: whatever an evaluator returns becomes a result
Dagster takes, shown as well as it can be (numbers as numbers, times as times)."""

from __future__ import annotations

import datetime as dt
import enum
import math
from decimal import Decimal

import dagster as dg
import numpy as np

from delivery_pipeline.dagster_defs.metadata import as_metadata, plain
from delivery_pipeline.model import AbandonReason, Severity


class Colour(enum.Enum):
    RED = 1


WHEN = dt.datetime(2026, 3, 2, 4, 14, tzinfo=dt.UTC)

WHAT_EVALUATORS_RETURN = {
    "paused_until": WHEN,
    "naive": dt.datetime(2026, 3, 2, 4, 14),
    "for_date": dt.date(2026, 3, 2),
    "lease": dt.timedelta(minutes=5),
    "severity": Severity.ERROR,
    "reason": AbandonReason.STALE,
    "colour": Colour.RED,
    "price": Decimal("0.0147"),
    "none": None,
    "flag": True,
    "count": 3,
    "share": 0.5,
    "nan": float("nan"),
    "numpy": np.int64(7),
    "ids": (1, 2, 3),
    "reasons": frozenset({"stale", "opted_out"}),
    "nested": {"at": WHEN, "by": [Severity.WARNING, Decimal("1.5"), None], 3: "three"},
    "thing": object(),
}


def test_every_value_an_evaluator_returns_is_metadata_dagster_takes() -> None:
    metadata = as_metadata(WHAT_EVALUATORS_RETURN)
    result = dg.AssetCheckResult(passed=False, metadata=metadata)  # validates every value
    shown = result.metadata
    assert isinstance(shown["paused_until"], dg.TimestampMetadataValue)
    assert shown["paused_until"].value == WHEN.timestamp()
    assert shown["naive"].value == WHEN.timestamp(), "a naive time is UTC"
    assert shown["count"].value == 3 and shown["share"].value == 0.5
    assert shown["price"].value == 0.0147 and shown["numpy"].value == 7
    assert shown["severity"].value == "error" and shown["colour"].value == 1
    assert shown["flag"].value is True and shown["none"].value is None
    assert shown["nan"].value == "nan", "no NaN in JSON: its text"
    assert shown["nested"].value == {
        "at": WHEN.isoformat(),
        "by": ["warning", 1.5, None],
        "3": "three",
    }
    assert shown["reasons"].value == ["opted_out", "stale"]
    assert shown["lease"].value == 300.0 and shown["for_date"].value == "2026-03-02"


def test_plain_is_json() -> None:
    import json

    text = json.dumps(plain(WHAT_EVALUATORS_RETURN))
    back = json.loads(text)
    assert back["lease"] == 300.0 and back["for_date"] == "2026-03-02"
    assert back["ids"] == [1, 2, 3] and not math.isnan(back["share"])
