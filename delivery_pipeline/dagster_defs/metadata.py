"""Plain values as Dagster metadata: numbers stay numbers (the UI plots them)."""

from collections.abc import Mapping
from typing import Any

import dagster as dg


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
