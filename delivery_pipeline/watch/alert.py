"""What an alert is: a key, a severity, one sentence, details, the channel told; and the
``ops_alerts`` row it becomes (kind: alert, reminder or resolved)."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb

from delivery_pipeline.model import Severity
from delivery_pipeline.store.rows.core import NewAlert

# The one severity (``model.Severity``), under the name the engine's modules import.
AlertSeverity = Severity


class AlertKind(enum.StrEnum):
    ALERT = "alert"
    REMINDER = "reminder"
    RESOLVED = "resolved"


class AlertChannel(enum.StrEnum):
    """Who is told (``ops_alerts.channel``): ops, or the reviewers about their own backlog
    (``REVIEW_WEBHOOK_URL``, falling back to the ops channel)."""

    OPS = "ops"
    REVIEWERS = "reviewers"


@dataclass(frozen=True)
class Alert:
    """What to tell a channel: a dedup key, a severity, one sentence, and details."""

    key: str
    severity: AlertSeverity
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    channel: AlertChannel = AlertChannel.OPS


def insert_params(
    alert: Alert,
    kind: AlertKind,
    *,
    episode: bool = False,
    observed_at: dt.datetime | None = None,
) -> NewAlert:
    """The ``insert_alert`` parameters of ``alert`` written as ``kind``."""
    return {
        "dedup_key": alert.key,
        "severity": alert.severity,
        "kind": kind,
        "message": alert.message,
        "details": Jsonb(alert.details),
        "channel": alert.channel,
        "episode": episode,
        "observed_at": observed_at,
    }
