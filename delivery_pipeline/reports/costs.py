"""What delivery cost, per UTC day: from each message's ``pricing`` (sql/migrations/023).

Counted for the day: messages priced, and the billable ones, by pricing
category (``utility`` knocks, ``service`` chunks, …). With a rate table
(``DELIVERY_RATE_TABLE``) each billable message costs its category's price in
the country it went to, and the report adds: the day's spend, the cost per
document delivered that day (every priced message of those documents, knocks
included, whatever day it went), and the **spend lost** on documents
abandoned that day (their knocks and parts: money spent on something that
never arrived whole). Without a table: the same counts, and no money.

Billed messages per delivered document are also given **by way**
(``model.Way``, ``documents.way``: the way the delivery report counts).
Each way's documents, billable messages and billable messages per document:
what choosing a way costs, in messages.

The rate table (``reports/rates.py``) is a CSV file with a header
``category,country,price``. A message whose category has no row for its
country nor ``*`` is counted as ``unpriced``. No Dagster here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

import pandas as pd
import psycopg

from delivery_pipeline.model import Way
from delivery_pipeline.reports.rates import RateTable, RateTableError, load_rate_table
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.common import DayBounds
from delivery_pipeline.store.rows.cost import PricedMessage

__all__ = ["CostReport", "RateTable", "RateTableError", "cost_report", "load_rate_table"]


@dataclass(frozen=True)
class CostReport:
    day: dt.date
    numbers: dict[str, Any]
    by_category: pd.DataFrame  # category, messages, billable, cost
    priced: bool  # a rate table was given
    # way, delivered, billable, billable_per_document: documents delivered in the day
    by_way: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    def markdown(self) -> str:
        n = self.numbers
        lines = [
            "",
            "**What it cost**" + ("" if self.priced else " (counts only: no DELIVERY_RATE_TABLE)"),
            "",
            "| category | messages | billable | cost |",
            "|---|---:|---:|---:|",
        ]
        for row in self.by_category.to_dict("records"):
            cost = row["cost"]
            shown = None if cost is None or pd.isna(cost) else float(cost)
            lines.append(
                f"| {row['category']} | {row['messages']} | {row['billable']} | {_money(shown)} |"
            )
        lines += [
            f"| **all** | {n['messages_priced']} | {n['billable_messages']} | "
            f"{_money(n['cost_total'])} |",
            "",
            f"cost per delivered document: {_money(n['cost_per_delivered_document'])} "
            f"({n['billable_per_delivered_document']} billable messages each)",
            "",
            f"spent on documents that never arrived: {_money(n['lost_spend'])} "
            f"({n['lost_billable_messages']} billable messages: {n['lost_knocks']} knocks, "
            f"{n['lost_chunks']} parts)",
            "",
            "| delivered by way | documents | billable messages | per document |",
            "|---|---:|---:|---:|",
        ]
        for row in self.by_way.to_dict("records"):
            lines.append(
                f"| {Way(row['way']).label} | {row['delivered']} | {row['billable']} | "
                f"{row['billable_per_document']} |"
            )
        return "\n".join(lines)


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _frame(rows: list[PricedMessage]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(PricedMessage._fields))


def _costs(frame: pd.DataFrame, rates: RateTable | None) -> pd.Series:
    """Each message's cost (0 when not billable, NaN when it cannot be priced)."""
    if rates is None or frame.empty:
        return pd.Series([float("nan")] * len(frame), index=frame.index, dtype=float)
    values = [
        (0.0 if not billable else rates.price(category, country))
        for billable, category, country in zip(
            frame["billable"], frame["category"], frame["country"], strict=True
        )
    ]
    return pd.Series([float("nan") if v is None else v for v in values], index=frame.index)


def _billable(frame: pd.DataFrame) -> pd.Series:
    return frame["billable"].fillna(False).astype(bool)


def _total(costs: pd.Series, priced: bool) -> float | None:
    return round(float(costs.fillna(0).sum()), 6) if priced else None


def cost_report(conn: psycopg.Connection[Any], day: dt.date, rates: RateTable | None) -> CostReport:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    params: DayBounds = {"start": start, "end": start + dt.timedelta(days=1)}
    sent = _frame(QUERIES.report_priced_messages.all(conn, params))
    delivered = _frame(QUERIES.report_delivered_document_messages.all(conn, params))
    lost = _frame(QUERIES.report_lost_messages.all(conn, params))
    delivered_count = QUERIES.documents_delivered_count.one(conn, params) or 0
    priced = rates is not None

    sent_costs = _costs(sent, rates)
    billable = _billable(sent)
    categories = sorted({str(c) for c in sent["category"].dropna()})
    rows: list[dict[str, Any]] = []
    for category in categories:
        mine = sent["category"] == category
        rows.append(
            {
                "category": category,
                "messages": int(mine.sum()),
                "billable": int((mine & billable).sum()),
                "cost": _total(sent_costs[mine], priced),
            }
        )
    by_category = pd.DataFrame(rows, columns=["category", "messages", "billable", "cost"])
    numbers: dict[str, Any] = {
        "messages_priced": len(sent),
        "billable_messages": int(billable.sum()),
        "unpriced_billable_messages": int((billable & sent_costs.isna()).sum()) if priced else 0,
        "cost_total": _total(sent_costs, priced),
    }
    for row in rows:
        numbers[f"messages_{row['category']}"] = row["messages"]
        numbers[f"billable_{row['category']}"] = row["billable"]
        if priced:
            numbers[f"cost_{row['category']}"] = row["cost"]

    delivered_cost = _total(_costs(delivered, rates), priced)
    delivered_billable = int(_billable(delivered).sum())
    numbers["cost_per_delivered_document"] = (
        round(delivered_cost / delivered_count, 6)
        if delivered_cost is not None and delivered_count
        else None
    )
    numbers["billable_per_delivered_document"] = (
        round(delivered_billable / delivered_count, 3) if delivered_count else 0
    )

    ways = pd.DataFrame(
        QUERIES.report_delivered_ways.all(conn, params),
        columns=["document_id", "way", "messages", "billable"],
    )
    by_way = pd.DataFrame(
        [_way_row(way, ways[ways["way"] == way]) for way in Way],
        columns=["way", "delivered", "billable", "billable_per_document"],
    )
    # How many went each way is the delivery report's (delivered_<way>); the cost is here.
    for way_row in by_way.to_dict("records"):
        numbers[f"billable_per_document_{way_row['way']}"] = way_row["billable_per_document"]

    lost_billable = _billable(lost)
    numbers["lost_billable_messages"] = int(lost_billable.sum())
    numbers["lost_knocks"] = int((lost_billable & (lost["part"] == "knock")).sum())
    numbers["lost_chunks"] = int((lost_billable & (lost["part"] == "chunk")).sum())
    numbers["lost_spend"] = _total(_costs(lost, rates), priced)
    return CostReport(
        day=day, numbers=numbers, by_category=by_category, priced=priced, by_way=by_way
    )


def _way_row(way: str, documents: pd.DataFrame) -> dict[str, Any]:
    """One way's documents delivered in the day, their billable messages, and those
    per document (None: none went that way)."""
    delivered, billable = len(documents), int(documents["billable"].sum())
    return {
        "way": way,
        "delivered": delivered,
        "billable": billable,
        "billable_per_document": round(billable / delivered, 3) if delivered else None,
    }
