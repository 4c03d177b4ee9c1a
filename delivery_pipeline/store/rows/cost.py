"""Parameters and rows of ``sql/queries/cost.sql``: what messages cost (023)."""

from typing import NamedTuple, TypedDict

from psycopg.types.json import Jsonb


class PricingRecord(TypedDict):
    """One message's ``pricing``, as ``record_pricing`` reads it (its recordset columns)."""

    wa_message_id: str
    document_id: int | None
    knock_id: int | None  # a knock tagged by its knock id: charged to its first document
    part: str  # chunk | knock | other
    chunk_index: int | None
    country: str | None
    billable: bool | None
    category: str | None
    pricing_model: str | None
    pricing_type: str | None
    priced_at: str  # ISO 8601


class RecordPricing(TypedDict):
    records: Jsonb


class PricedMessage(NamedTuple):
    """A priced message as the report counts it."""

    document_id: int | None
    part: str
    billable: bool | None
    category: str | None
    country: str | None


class DeliveredWay(NamedTuple):
    """A document delivered in the report's day: the way it went (``model.Way``) and
    its priced and billable messages."""

    document_id: int
    way: str
    messages: int
    billable: int
