"""The one settings model, and what reads its values: a package of one concern a module.

* ``model``: ``Settings``, the sections composed (one field each), the one reader of
  the process environment (``Settings.from_env()``).
* ``sections``: one module a section (a pydantic model, a variable prefix each), named
  as its field of ``Settings`` (``sections/delivery.py``), with the defaults and
  limits it names.
* ``section``: what every section shares: reading its variables (and their older
  names), stripping whitespace, hiding secrets, ``SettingsError``, a shared token's
  length.
* ``parsing``: the string lists a variable may hold (templates, times to live,
  document parameters, kinds, tokens, webhooks, trusted proxies).
* ``numbers``: business-number routing (``WHATSAPP_NUMBERS``, the calling-code rule).
* ``urls``: secret text and URLs carrying a password (``secret``, ``without_password``).
* ``eligibility``: the parameters of the database's eligibility functions.

Modules import one way: ``urls`` and ``parsing`` import no sibling, ``section``
imports ``urls``, ``numbers`` imports ``parsing`` and ``section``, ``sections`` any
of those (a section no other section), ``model`` any of them. Every name is re-exported here:
``from delivery_pipeline.settings import Settings``.
"""

from delivery_pipeline.settings.eligibility import (
    Eligibility,
    Guard,
)
from delivery_pipeline.settings.model import Settings, transport_warnings
from delivery_pipeline.settings.numbers import (
    BusinessNumber,
    bind_number,
    parse_numbers,
)
from delivery_pipeline.settings.parsing import (
    API_TOKEN_MIN_LENGTH,
    APPLICATION_NAME,
    DOCUMENT_PARAMETERS,
    PERSON_NAME_MAX,
    PLATFORM_TTL_SECONDS,
    QUIET_HOURS,
    REVIEW_TOKEN_MIN_LENGTH,
    REVIEWABLE_KINDS,
    WEBHOOK_SECRET_PREFIX,
    knock_choices,
    knock_template_list,
    parse_api_tokens,
    parse_api_webhooks,
    parse_document_parameters,
    parse_file_kinds,
    parse_person_tokens,
    parse_review_kinds,
    parse_template_choices,
    parse_template_ttls,
    parse_templates,
    parse_trusted_proxies,
    parse_webhook_secrets,
)
from delivery_pipeline.settings.section import (
    SHARED_TOKEN_MIN_LENGTH,
    Section,
    SettingsError,
    env,
    formerly,
    long_enough,
)
from delivery_pipeline.settings.sections.api import ApiSettings
from delivery_pipeline.settings.sections.checks import CheckSettings
from delivery_pipeline.settings.sections.database import (
    DEFAULT_DATA_DIR,
    PROJECT_ROOT,
    DatabaseSettings,
)
from delivery_pipeline.settings.sections.delivery import (
    DEFAULT_KNOCK_TEMPLATES,
    MAX_SWEEPERS,
    DeliverySettings,
    document_template_list,
)
from delivery_pipeline.settings.sections.generation import GenerationSettings
from delivery_pipeline.settings.sections.logs import LogSettings
from delivery_pipeline.settings.sections.ops import DOCS_DEFAULT_PORT, OpsSettings
from delivery_pipeline.settings.sections.retention import DOCUMENT_FILES_DAYS, RetentionSettings
from delivery_pipeline.settings.sections.review import ReviewSettings
from delivery_pipeline.settings.sections.sandbox import DEV_APP_SECRET, SandboxSettings
from delivery_pipeline.settings.sections.schedules import ScheduleSettings
from delivery_pipeline.settings.sections.service import (
    REVIEW_PAGE_PATH,
    SERVICE_DEFAULT_PORT,
    ServiceSettings,
)
from delivery_pipeline.settings.sections.whatsapp import (
    DEV_ACCESS_TOKEN,
    DEV_PHONE_NUMBER_ID,
    SANDBOX_DEFAULT_PORT,
    WhatsAppSettings,
)
from delivery_pipeline.settings.urls import (
    LOOPBACK_HOSTS,
    carries_credentials,
    plain_http_elsewhere,
    secret,
    without_password,
)

__all__ = [
    "API_TOKEN_MIN_LENGTH",
    "APPLICATION_NAME",
    "ApiSettings",
    "BusinessNumber",
    "CheckSettings",
    "DEFAULT_DATA_DIR",
    "DEFAULT_KNOCK_TEMPLATES",
    "DEV_ACCESS_TOKEN",
    "DEV_APP_SECRET",
    "DEV_PHONE_NUMBER_ID",
    "DOCS_DEFAULT_PORT",
    "DOCUMENT_FILES_DAYS",
    "DOCUMENT_PARAMETERS",
    "DatabaseSettings",
    "DeliverySettings",
    "Eligibility",
    "GenerationSettings",
    "Guard",
    "LOOPBACK_HOSTS",
    "LogSettings",
    "MAX_SWEEPERS",
    "OpsSettings",
    "PERSON_NAME_MAX",
    "PLATFORM_TTL_SECONDS",
    "PROJECT_ROOT",
    "QUIET_HOURS",
    "REVIEWABLE_KINDS",
    "REVIEW_PAGE_PATH",
    "REVIEW_TOKEN_MIN_LENGTH",
    "RetentionSettings",
    "ReviewSettings",
    "SANDBOX_DEFAULT_PORT",
    "SERVICE_DEFAULT_PORT",
    "SHARED_TOKEN_MIN_LENGTH",
    "SandboxSettings",
    "ScheduleSettings",
    "Section",
    "ServiceSettings",
    "Settings",
    "SettingsError",
    "WEBHOOK_SECRET_PREFIX",
    "WhatsAppSettings",
    "bind_number",
    "carries_credentials",
    "document_template_list",
    "env",
    "formerly",
    "knock_choices",
    "knock_template_list",
    "long_enough",
    "parse_api_tokens",
    "parse_api_webhooks",
    "parse_document_parameters",
    "parse_file_kinds",
    "parse_numbers",
    "parse_person_tokens",
    "parse_review_kinds",
    "parse_template_choices",
    "parse_template_ttls",
    "parse_templates",
    "parse_trusted_proxies",
    "parse_webhook_secrets",
    "plain_http_elsewhere",
    "secret",
    "transport_warnings",
    "without_password",
]
