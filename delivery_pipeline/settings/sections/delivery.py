"""``Settings.delivery`` (``DELIVERY_*``): how documents are sent: claims, retries,
chunks, knocks and their templates, document templates, quiet hours, review."""

import datetime as dt
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from delivery_pipeline.settings.eligibility import Eligibility
from delivery_pipeline.settings.parsing import (
    DOCUMENT_PARAMETERS,
    PLATFORM_TTL_SECONDS,
    QUIET_HOURS,
    REVIEWABLE_KINDS,
    parse_document_parameters,
    parse_file_kinds,
    parse_review_kinds,
    parse_template_choices,
    parse_template_ttls,
    parse_templates,
)
from delivery_pipeline.settings.section import Section, parsed_by

DEFAULT_KNOCK_TEMPLATES = "en=document_ready:en,es=document_ready:es,pt=document_ready:pt_BR"

# DELIVERY_SWEEPERS at most (each sweeper is a process with its own connections).
MAX_SWEEPERS = 64


class DeliverySettings(Section):
    env_prefix: ClassVar[str] = "DELIVERY_"

    lease_seconds: int = Field(
        600,
        ge=1,
        description="a delivery claim's lease: a crashed sender's claim is taken over after it",
    )
    window_margin_seconds: int = Field(
        900,
        ge=0,
        lt=24 * 3600,
        description=(
            "safety margin before the 24 h window ends: free-form text only until 24 h minus this"
        ),
    )
    max_attempts: int = Field(
        5,
        ge=1,
        description=(
            "send attempts failed by the message's own error (refused at once or failed later) "
            "before the document is abandoned max_attempts"
        ),
    )
    backoff_base_seconds: float = Field(
        30.0, ge=0, description="the first retry delay (doubling, ±25 % jitter)"
    )
    backoff_max_seconds: float = Field(3600.0, ge=0, description="the retry delay's cap")
    rate_limit: float | None = Field(
        None,
        gt=0,
        description=(
            "an optional cap, messages per second, for one process (the number's limit is "
            "WHATSAPP_THROUGHPUT_LIMIT)"
        ),
    )
    concurrency: int = Field(16, ge=1, description="documents in flight per sweep")
    sweepers: int = Field(
        2, ge=1, le=MAX_SWEEPERS, description="parallel sweeper ops per deliver_documents run"
    )
    executor: Literal["multiprocess", "docker", "k8s"] = Field(
        "multiprocess",
        description="where a deliver_documents run's sweepers run: processes of the run, "
        "Docker containers (dagster-docker) or Kubernetes pods (dagster-k8s)",
    )
    chunk_limit: int = Field(
        4096,
        ge=16,
        le=4096,
        description=(
            "UTF-16 code units per message (16–4096): the strictest reading of the platform's "
            "characters, so an emoji counts two; chunks are cut only between grapheme clusters"
        ),
    )
    chunk_interval_seconds: float = Field(
        0.0, ge=0, description="pause between the parts of one document"
    )
    unknown_policy: Literal["resend", "abandon"] = Field(
        "resend",
        description=(
            "a send whose outcome never settled: resend (at least once: a possible duplicate part) "
            "or abandon (at most once: abandoned unknown_outcome)"
        ),
    )
    unknown_grace_seconds: int = Field(
        300,
        ge=0,
        description=(
            "how long an unknown send outcome waits for a status webhook before the policy decides"
        ),
    )
    knock_templates: str = Field(
        DEFAULT_KNOCK_TEMPLATES,
        description=(
            "each locale's approved knock templates, locale=name:language, comma-separated, "
            "fallbacks in order after '|' (en=document_ready:en|document_waiting:en); en is "
            "required (the fallback locale)"
        ),
    )
    template_ttls: str = Field(
        "",
        description=(
            "the time to live each template was created with (its message_send_ttl_seconds), "
            "name=seconds or name:language=seconds, comma-separated; a template not named has "
            "the platform's default, 30 days. A template message not delivered within it was "
            "dropped by the platform: a brief it carried ends expired"
        ),
    )
    template_ttl_grace_seconds: float = Field(
        600,
        gt=0,
        description=(
            "how long past a template message's time to live a late delivered status is still "
            "awaited before the message is taken as dropped"
        ),
    )
    document_templates: str = Field(
        "",
        description=(
            "each locale's approved document templates (a utility template with a DOCUMENT "
            "header), in DELIVERY_KNOCK_TEMPLATES' format: outside the window a document goes "
            "as one PDF on the first healthy one, no reply needed; none healthy, the knock; "
            "unset: always the knock"
        ),
    )
    brief_document_templates: str = Field(
        "",
        description=(
            "a daily brief's own document templates, in the same format (one created with a "
            "time to live that ends with the day); unset: DELIVERY_DOCUMENT_TEMPLATES"
        ),
    )
    document_template_parameters: str = Field(
        "brief_attached=name|date",
        description=(
            "each document template's named body parameters, name=param|param, comma-separated, "
            "from name (the person's), kind (plan, brief…, in their language) and date (the "
            "document's day); a template not listed takes name|kind|date"
        ),
    )
    file_outside_window: str = Field(
        "plan,daily_brief",
        description=(
            "kinds that go as a file on a document template outside the window, comma-separated, "
            "or none (only the people whose own choice is a file); the others knock (only with "
            "DELIVERY_DOCUMENT_TEMPLATES set)"
        ),
    )
    file_in_window: str = Field(
        "",
        description=(
            "kinds that go as one document message (the PDF with a short caption) inside the "
            "window, comma-separated, or none; the others go as text parts; unset: every kind as "
            "parts"
        ),
    )
    template_recheck_seconds: float = Field(
        900,
        gt=0,
        description=(
            "a template one of our sends found refused (a template-scoped error) is avoided "
            "this long, fleet-wide, then tried again, unless a lifecycle webhook approves it "
            "sooner; a send that named it, a held knock and a document bound to a number not "
            "configured here look again at least this often"
        ),
    )
    knock_param_max: int = Field(
        60, ge=1, description="the cap of the knock's name parameter (characters)"
    )
    knock_button_templates: str = Field(
        "documents_ready",
        description=(
            "knock templates approved with the count parameter {{2}} and the quick replies Send it "
            "/ Later / Stop, comma-separated names; any other knock template is sent with the name "
            "alone"
        ),
    )
    no_reply_seconds: float = Field(
        24 * 3600,
        gt=0,
        description=(
            "a document still unanswered this long after its knock's one reminder is abandoned "
            "no_reply"
        ),
    )
    later_seconds: float | None = Field(
        None,
        gt=0,
        description=(
            "a Later press snoozes the person's waiting documents this long; unset: until their "
            "next morning (the end of their quiet hours, or 08:00 where they live)"
        ),
    )
    heartbeat_seconds: int = Field(30, ge=1, description="the delivery_heartbeat sensor's interval")
    pause_probe_seconds: float = Field(
        10.0,
        gt=0,
        description=(
            "the first probe after a sender-wide pause; the interval doubles with each refused "
            "probe"
        ),
    )
    pause_probe_max_seconds: float = Field(
        300.0,
        gt=0,
        description=(
            "the probe interval's cap: the longest wait after a fix nobody announced with `resume`"
        ),
    )
    review_kinds: str = Field(
        "",
        description=(
            "kinds a reviewer approves before delivery, comma-separated (plan, daily_brief); "
            "unset: none"
        ),
    )
    resends_per_day: int = Field(
        3,
        ge=1,
        description=(
            "resends of one document within 24 hours, whoever asks (the review page, the CLI, "
            "the API, the operate_document job); the next is refused until the oldest of them "
            "is 24 hours old"
        ),
    )

    quiet_hours: str = Field(
        "21:00-08:00",
        description=(
            "local quiet hours, in each person's own time zone, in which nothing they did not just "
            "ask for is sent (no knock either); off for none; a person's own (people add "
            "--quiet-hours) wins"
        ),
    )
    rate_table: str = Field(
        "",
        description=(
            "a CSV file of prices per billable message (category,country,price) for the delivery "
            "report's costs; unset: counts only, without money"
        ),
    )

    _review_kinds = field_validator("review_kinds")(parsed_by(parse_review_kinds))

    @property
    def review_kind_set(self) -> frozenset[str]:
        """The kinds whose documents wait for a reviewer before delivery."""
        return parse_review_kinds(self.review_kinds)

    _templates = field_validator("knock_templates")(parsed_by(parse_templates))

    _ttls = field_validator("template_ttls")(parsed_by(parse_template_ttls))

    def template_ttl_seconds(self, name: str, language: str) -> float:
        """The time to live the template ``name`` in ``language`` was created with: its
        own entry, else its name's, else the platform's default."""
        ttls = parse_template_ttls(self.template_ttls)
        return ttls.get(f"{name}:{language}", ttls.get(name, PLATFORM_TTL_SECONDS))

    @field_validator("document_templates", "brief_document_templates")
    @classmethod
    def _document_templates(cls, value: str) -> str:
        if value.strip():
            parse_template_choices(value)
        return value

    _document_parameters = field_validator("document_template_parameters")(
        parsed_by(parse_document_parameters)
    )

    _file_kinds = field_validator("file_outside_window", "file_in_window")(
        parsed_by(parse_file_kinds)
    )

    def document_template_choices(self, kind: str) -> dict[str, list[tuple[str, str]]]:
        """Each locale's document templates for ``kind``, the preferred first (empty:
        none configured, the knock)."""
        raw = self.document_templates
        if kind == "daily_brief" and self.brief_document_templates.strip():
            raw = self.brief_document_templates
        return parse_template_choices(raw) if raw.strip() else {}

    def document_template_parameter_names(self, name: str) -> tuple[str, ...]:
        """The named body parameters document template ``name`` takes."""
        return parse_document_parameters(self.document_template_parameters).get(
            name, DOCUMENT_PARAMETERS
        )

    @property
    def file_outside_window_kinds(self) -> frozenset[str]:
        return parse_file_kinds(self.file_outside_window)

    @property
    def file_in_window_kinds(self) -> frozenset[str]:
        return parse_file_kinds(self.file_in_window)

    @field_validator("quiet_hours")
    @classmethod
    def _quiet(cls, value: str) -> str:
        if value.lower() in ("", "off", "none"):
            return ""
        if not QUIET_HOURS.match(value):
            raise ValueError("must be local HH:MM-HH:MM (like 21:00-08:00), or off")
        return value

    @property
    def eligibility(self) -> Eligibility:
        """The eligibility function's parameters (sql/migrations/013: lease, window, quiet)."""
        return {
            "lease": self.lease,
            "service_window": self.window,
            "quiet_hours": self.quiet_hours or None,
        }

    @property
    def knock_template_map(self) -> dict[str, tuple[str, str]]:
        """Each locale's first knock template."""
        return parse_templates(self.knock_templates)

    @property
    def knock_button_template_set(self) -> frozenset[str]:
        """Knock templates with the count parameter and the three quick replies."""
        return frozenset(n.strip() for n in self.knock_button_templates.split(",") if n.strip())

    @property
    def knock_template_choices(self) -> dict[str, list[tuple[str, str]]]:
        """Each locale's knock templates, the preferred first, then its fallbacks."""
        return parse_template_choices(self.knock_templates)

    @property
    def window_seconds(self) -> int:
        """How long after the person's last message we still send free-form."""
        return 24 * 3600 - self.window_margin_seconds

    @property
    def window(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.window_seconds)

    @property
    def lease(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.lease_seconds)


def document_template_list(settings: DeliverySettings) -> list[tuple[str, str]]:
    """Every distinct (name, language) of the document templates, in order."""
    seen: list[tuple[str, str]] = []
    for kind in REVIEWABLE_KINDS:
        for choices in settings.document_template_choices(kind).values():
            seen.extend(choice for choice in choices if choice not in seen)
    return seen
