"""``Settings.retention`` (``RETENTION_*``): how long history is kept."""

import datetime as dt
from typing import ClassVar

from pydantic import Field

from delivery_pipeline.settings.section import Section

# A finished document's rendered file is kept this long after it was drawn: as long
# as a media id uploaded from it lasts (30 days), after which a resend uploads
# again and may as well draw it again from the body, which is never pruned.
DOCUMENT_FILES_DAYS = 30


class RetentionSettings(Section):
    """How long history is kept (the prune_history job). Raw bodies are the largest and
    read by no code: shortest. Statuses and inbound messages must outlive Meta's
    redelivery (up to 7 days: their once-only storage depends on them) and the
    report's and the checks' windows. Alerts are small, and a quarter of them is
    what an incident review looks back on."""

    env_prefix: ClassVar[str] = "RETENTION_"

    raw_webhooks_days: float = Field(
        7,
        ge=1,
        description="days a raw webhook body is kept after it was last received (at least 1)",
    )
    status_events_days: float = Field(
        30,
        ge=7,
        description=(
            "days a status webhook is kept (at least 7: Meta redelivers for up to 7 days); a knock "
            "still waiting on its person keeps its statuses"
        ),
    )
    inbound_messages_days: float = Field(
        30,
        ge=7,
        description=(
            "days an inbound message is kept (at least 7); each person's newest message stays"
        ),
    )
    ops_alerts_days: float = Field(
        90,
        ge=2,
        description=(
            "days an ops alert is kept (at least 2: unsent alerts are retried for a day); an open "
            "check episode stays whole"
        ),
    )

    def keep(self) -> dict[str, dt.timedelta]:
        """Table → how long its rows are kept."""
        return {
            "raw_webhooks": dt.timedelta(days=self.raw_webhooks_days),
            "status_events": dt.timedelta(days=self.status_events_days),
            "inbound_messages": dt.timedelta(days=self.inbound_messages_days),
            "ops_alerts": dt.timedelta(days=self.ops_alerts_days),
            "document_files": dt.timedelta(days=DOCUMENT_FILES_DAYS),
        }
