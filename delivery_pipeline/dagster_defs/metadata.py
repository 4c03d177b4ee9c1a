"""Plain values as Dagster metadata: numbers stay numbers (the UI plots them),
times stay times, tables stay tables (the UI shows them with their column schema).

``as_metadata`` is the one way a check's result, a run's summary or an asset's
numbers become metadata: it takes whatever the evaluators and the engine return
(datetimes, dates, durations, enums, Decimals, None, nested dicts and lists of
them) and never raises for a value's type, because a check whose metadata
cannot be written is a watcher gone silent on the day it is needed.
"""

import datetime as dt
import enum
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

import dagster as dg
import pandas as pd

COLUMN_SCHEMA = "dagster/column_schema"
ROW_COUNT = "dagster/row_count"


def as_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Each value as the metadata the UI shows best; nothing is refused."""
    return {str(key): _metadata_value(value) for key, value in values.items()}


def _metadata_value(value: Any) -> Any:
    try:
        return _typed(value)
    except (TypeError, ValueError, OverflowError):  # an odd value (NaT): shown as text
        return dg.MetadataValue.text(str(value))


def _typed(value: Any) -> Any:
    if isinstance(value, dg.MetadataValue):
        return value
    if value is None:
        return dg.MetadataValue.null()
    if isinstance(value, enum.Enum):
        return _typed(value.value)
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float | Decimal):
        number = float(value)
        return dg.MetadataValue.float(number) if math.isfinite(number) else str(value)
    if isinstance(value, str):
        return dg.MetadataValue.text(value)
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return dg.MetadataValue.timestamp(aware)
    if isinstance(value, dt.timedelta):
        return dg.MetadataValue.float(value.total_seconds())
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        return dg.MetadataValue.json(plain(value))
    if hasattr(value, "item"):  # numpy scalars from a DataFrame
        return _typed(value.item())
    return dg.MetadataValue.text(str(plain(value)))


def plain(value: Any) -> Any:
    """``value`` as JSON: times as ISO 8601, durations as seconds, enums as their value,
    Decimals as numbers, sets as sorted lists, anything else as its text."""
    if value is None or isinstance(value, bool | int | str):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, float | Decimal):
        number = float(value)
        return number if math.isfinite(number) else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((plain(item) for item in value), key=str)
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if hasattr(value, "item"):  # numpy scalars from a DataFrame
        return plain(value.item())
    return str(value)


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
