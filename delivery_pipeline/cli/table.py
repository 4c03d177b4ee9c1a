"""Rows as an aligned plain-text table: what the CLI's listings print."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def print_rows(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> None:
    """A header of ``columns`` and one line per row, each column as wide as its widest cell."""
    widths = [max([len(c), *(len(str(r.get(c, ""))) for r in rows)]) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        cells = (str(row.get(c, "")).ljust(w) for c, w in zip(columns, widths, strict=True))
        print("  ".join(cells).rstrip())
