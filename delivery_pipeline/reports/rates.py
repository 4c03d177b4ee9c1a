"""The price of a message: the rate table (``DELIVERY_RATE_TABLE``), read once.

A CSV file with a header ``category,country,price``: ``country`` an ISO 3166
code or ``*`` (any other country), ``price`` per billable message in one
currency of your choice. Apart from ``costs.py`` (the daily report, pandas) so
the webhook service prices a document for its application without loading pandas.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

ANY_COUNTRY = "*"
_COUNTRY = re.compile(r"^[A-Z]{2}$")
_CATEGORY = re.compile(r"^[a-z_]{1,40}$")


class RateTableError(ValueError):
    """The rate table cannot be read; the message says where and what to fix."""


@dataclass(frozen=True)
class RateTable:
    """Price per billable message, by (category, country); ``*`` for any other country."""

    rates: dict[tuple[str, str], float]
    source: str = ""

    def price(self, category: str | None, country: str | None) -> float | None:
        if category is None:
            return None
        found = self.rates.get((category, country or ANY_COUNTRY))
        return found if found is not None else self.rates.get((category, ANY_COUNTRY))


def load_rate_table(path: str | Path) -> RateTable:
    """Read a rate table file; ``RateTableError`` names the line and the problem."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RateTableError(
            f"cannot read the rate table {where} ({exc.strerror or exc}): "
            "fix DELIVERY_RATE_TABLE or unset it"
        ) from None
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    reader = csv.DictReader(lines)
    header = {name.strip() for name in reader.fieldnames or []}
    if not {"category", "country", "price"} <= header:
        raise RateTableError(
            f"the rate table {where} needs a header line category,country,price "
            f"(found {', '.join(sorted(header)) or 'none'})"
        )
    rates: dict[tuple[str, str], float] = {}
    for number, row in enumerate(reader, start=2):
        category = (row.get("category") or "").strip().lower()
        country = (row.get("country") or "").strip().upper()
        raw = (row.get("price") or "").strip()
        if not _CATEGORY.match(category):
            raise RateTableError(f"{where} line {number}: category {category!r} is not a name")
        if country != ANY_COUNTRY and not _COUNTRY.match(country):
            raise RateTableError(
                f"{where} line {number}: country {country!r} is not an ISO code (like BR) or *"
            )
        try:
            price = float(raw)
        except ValueError:
            price = -1.0
        if not price >= 0 or price == float("inf"):
            raise RateTableError(f"{where} line {number}: price {raw!r} is not a number >= 0")
        if (category, country) in rates:
            raise RateTableError(f"{where} line {number}: {category},{country} given twice")
        rates[(category, country)] = price
    return RateTable(rates, where)
