"""Reading Meta's webhook bodies: the parts we use, whatever shape the rest has.

Meta batches up to 1000 updates per body and the 2026 formats add fields
(business-scoped user ids, usernames without phone numbers); anything of an
unexpected type is skipped here, never raised on, so one odd update cannot
cost the others in the same body.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def parse_timestamp(raw: Any) -> dt.datetime:
    """Unix seconds as a string (a few arrive in milliseconds); now() if unreadable."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return dt.datetime.now(dt.UTC)
    if value > 1e11:
        value /= 1000.0
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return dt.datetime.now(dt.UTC)


def iter_values(payload: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every ``entry[].changes[]`` as (field, value); malformed parts are skipped."""
    out: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(payload, dict):
        raise ValueError("payload is not a JSON object")
    entries = payload.get("entry")
    if not isinstance(entries, list):
        raise ValueError("payload has no entry list")
    for entry in entries:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        if not isinstance(changes, list):
            continue
        for change in changes:
            if isinstance(change, dict) and isinstance(change.get("value"), dict):
                out.append((str(change.get("field", "")), change["value"]))
    return out


def dicts(items: Any) -> list[dict[str, Any]]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def message_body(message: dict[str, Any]) -> str | None:
    kind = message.get("type")
    part = message.get(kind) if isinstance(kind, str) else None
    if not isinstance(part, dict):
        return None
    if kind == "text":
        return text_or_none(part.get("body"))
    if kind == "button":
        return text_or_none(part.get("text"))
    if kind == "interactive":
        for key in ("button_reply", "list_reply"):
            if isinstance(part.get(key), dict):
                return text_or_none(part[key].get("title"))
    if kind in ("image", "video", "document"):
        return text_or_none(part.get("caption"))
    if kind == "reaction":
        return text_or_none(part.get("emoji"))
    return None


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
