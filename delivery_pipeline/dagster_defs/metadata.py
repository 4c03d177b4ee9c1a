"""Plain values as Dagster metadata: numbers stay numbers (the UI plots them),
tables stay tables (the UI shows them with their column schema)."""

import math
from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg
import pandas as pd

COLUMN_SCHEMA = "dagster/column_schema"
ROW_COUNT = "dagster/row_count"


def as_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers and text as they are, None and booleans typed, anything else as JSON."""
    metadata: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            metadata[key] = dg.MetadataValue.null()
        elif isinstance(value, bool):
            metadata[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int | float | str):
            metadata[key] = value
        else:
            metadata[key] = dg.MetadataValue.json(value)
    return metadata


def schema(*columns: tuple[str, str, str]) -> dg.TableSchema:
    """A column schema from (name, type, description) triples."""
    return dg.TableSchema(
        columns=[dg.TableColumn(name, kind, description) for name, kind, description in columns]
    )


def _cell(value: Any) -> Any:
    if isinstance(value, str):
        return str(value)  # a StrEnum (states, reasons) as its plain text
    if isinstance(value, float) and math.isnan(value):
        return None  # "no age" (delivered and abandoned rows): an empty cell, not NaN
    if hasattr(value, "item"):  # numpy scalars from a DataFrame
        return value.item()
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def table(rows: Iterable[Mapping[str, Any]], columns: dg.TableSchema) -> dg.TableMetadataValue:
    """Rows as a table with its schema (only the schema's columns, in its order)."""
    names = [column.name for column in columns.columns]
    cells = [dg.TableRecord({name: _cell(row.get(name)) for name in names}) for row in rows]
    return dg.MetadataValue.table(cells, columns)
