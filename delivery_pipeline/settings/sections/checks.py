"""``Settings.checks`` (``CHECK_*``): the ops checks' thresholds."""

from typing import Any, ClassVar

from pydantic import Field, field_validator

from delivery_pipeline.settings.section import Section, env


class CheckSettings(Section):
    """When each ops check warns and errs. Ages in seconds; shares in 0..1."""

    env_prefix: ClassVar[str] = "CHECK_"

    # pending and generating (owner: the generator)
    pending_warn_seconds: float = Field(
        15 * 60,
        gt=0,
        description="pending_too_long: WARN when a document waits for generation this long",
    )
    pending_error_seconds: float = Field(60 * 60, gt=0, description="pending_too_long: ERROR")
    generating_warn_seconds: float = Field(
        15 * 60,
        gt=0,
        description=(
            "generating_too_long: WARN when a generation claim is this old (a dead or stuck "
            "generator)"
        ),
    )
    generating_error_seconds: float = Field(60 * 60, gt=0, description="generating_too_long: ERROR")
    # undelivered (owner: delivery): eligible and due this long is stranded
    undelivered_warn_seconds: float = Field(
        30 * 60,
        gt=0,
        description=(
            "undelivered_stranded: WARN when a document a sweep would deliver now was not taken "
            "for this long"
        ),
    )
    undelivered_error_seconds: float = Field(
        2 * 60 * 60, gt=0, description="undelivered_stranded: ERROR"
    )
    # undelivered this long since generation, even while retrying: WARN only
    undelivered_slow_seconds: float = Field(
        2 * 60 * 60,
        gt=0,
        description=(
            "undelivered_stranded: WARN when a document is still undelivered this long after "
            "generation while retrying"
        ),
    )
    # awaiting a knock reply (owner: the person): alerts only on abnormal shares
    knock_settle_seconds: float = Field(
        15 * 60, gt=0, description="awaiting_reply: a knock should show delivered by then"
    )
    knock_answer_grace_seconds: float = Field(
        60 * 60, gt=0, description="awaiting_reply: and answered by then"
    )
    knock_min_sample: int = Field(
        5, ge=1, description="awaiting_reply: knocks needed before the shares count"
    )
    knock_unanswered_share: float = Field(
        0.5, ge=0, le=1, description="awaiting_reply: WARN above this share of knocks unanswered"
    )
    knock_undelivered_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "awaiting_reply: ERROR above this share of knocks never delivered (a template that "
            "stopped working)"
        ),
    )
    # one knock accepted and never reported delivered (owner: the template):
    # statuses come in seconds; an hour without one is a dropped send (template
    # pacing), not a person who has not answered yet
    knock_undelivered_seconds: float = Field(
        60 * 60,
        gt=0,
        description=(
            "knock_not_delivered: a knock accepted and never reported delivered, read or failed "
            "this long (a dropped send)"
        ),
    )
    # abandoned or generation failed in the last day (owner: ops)
    abandoned_warn_count: int = Field(
        1,
        ge=1,
        description=(
            "abandoned_or_failed: WARN at this many documents lost in the last 24 h (abandoned for "
            "an unexpected reason, or failed generation)"
        ),
    )
    abandoned_error_count: int = Field(10, ge=1, description="abandoned_or_failed: ERROR")
    # messaging tier use (owner: ops)
    tier_warn_share: float = Field(
        0.8,
        gt=0,
        description="messaging_tier_headroom: WARN at this share of WHATSAPP_MESSAGING_TIER",
    )
    tier_error_share: float = Field(1.0, gt=0, description="messaging_tier_headroom: ERROR")
    sample_size: int = Field(5, ge=1, description="ids of the oldest rows each check lists")
    # Dagster's own record (owner: ops): the backlog refreshed, deliveries on the timeline
    backlog_stale_seconds: float = Field(
        15 * 60,
        gt=0,
        description=(
            "freshness_check: WARN when delivery_backlog was not materialized for this long"
        ),
    )
    events_warn_seconds: float = Field(
        5 * 60,
        gt=0,
        description=(
            "delivery_events_unrecorded: WARN when a delivery is not on the delivered_documents "
            "timeline after this long"
        ),
    )
    events_error_seconds: float = Field(
        30 * 60, gt=0, description="delivery_events_unrecorded: ERROR"
    )
    messaging_tier: str = Field(
        "250",
        json_schema_extra=env("WHATSAPP_MESSAGING_TIER"),
        description=(
            "unique people reached outside the window per 24 h: 250, 2000 (2k), 10000, 100000 or "
            "unlimited (the tier check)"
        ),
    )

    @field_validator("messaging_tier", mode="before")
    @classmethod
    def _tier(cls, value: Any) -> str:
        """``250``, ``2000`` (``2k``, ``TIER_2K``), …, ``unlimited``."""
        text = str(value).strip().lower().removeprefix("tier_").replace(",", "").replace("_", "")
        if text.endswith("k") and text[:-1].isdigit():
            text = str(int(text[:-1]) * 1000)
        if text != "unlimited" and not (text.isdigit() and int(text) > 0):
            raise ValueError("must be 250, 2000, 10000, 100000 or unlimited")
        return text

    @property
    def tier_limit(self) -> int | None:
        return None if self.messaging_tier == "unlimited" else int(self.messaging_tier)
