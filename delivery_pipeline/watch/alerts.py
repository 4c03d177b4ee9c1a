"""Recording ops alerts, deduplicated by key.

Every alert is a row in ``ops_alerts`` first; the ops-channel notifier sends
the unsent rows and marks them. Recording never depends on the channel being
up.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from delivery_pipeline.store.db import QUERIES

log = logging.getLogger(__name__)


async def record_alert(
    conn: AsyncConnection,
    dedup_key: str,
    severity: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    quiet_seconds: float = 3600.0,
) -> bool:
    """Record an alert unless the same key was alerted within ``quiet_seconds``.

    Returns whether a row was written.
    """
    async with conn.transaction():
        await conn.execute(QUERIES.alert_lock, {"dedup_key": dedup_key})
        cur = await conn.execute(QUERIES.last_alert, {"dedup_key": dedup_key})
        last = await cur.fetchone()
        if last is not None and last["kind"] != "resolved" and last["age_seconds"] < quiet_seconds:
            return False
        await conn.execute(
            QUERIES.insert_alert,
            {
                "dedup_key": dedup_key,
                "severity": severity,
                "kind": "alert",
                "message": message,
                "details": Jsonb(details or {}),
            },
        )
    log.warning("ops alert [%s] %s: %s", severity, dedup_key, message)
    return True
