"""The one settings model: every variable documented, one error format, secrets kept."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from delivery_pipeline.settings import Settings, SettingsError

REPO = Path(__file__).resolve().parent.parent


def test_every_variable_says_what_it_means() -> None:
    """The settings reference is generated from the model (docs_reference): each field's
    description is its only documentation."""
    undescribed = [
        variable
        for section in Settings.sections().values()
        for field, variable in section.env_names().items()
        if len(section.model_fields[field].description or "") < 12
    ]
    assert undescribed == []


def test_every_variable_is_read_by_exactly_one_field() -> None:
    names = list(Settings.env_names())
    assert len(names) == len(set(names))


def test_bad_values_fail_in_one_format_naming_each_variable() -> None:
    with pytest.raises(SettingsError) as failed:
        Settings.from_env(
            {
                "DELIVERY_LEASE_SECONDS": "ten",
                "DELIVERY_UNKNOWN_POLICY": "maybe",
                "WHATSAPP_MESSAGING_TIER": "lots",
                "CHECKS_CRON": "every minute",
                "DELIVERY_KNOCK_TEMPLATES": "es=document_ready:es",
            }
        )
    message = str(failed.value)
    assert message.startswith("bad settings: ")
    assert "\n" not in message
    for variable, shown in [
        ("DELIVERY_LEASE_SECONDS", "'ten'"),
        ("DELIVERY_UNKNOWN_POLICY", "'maybe'"),
        ("WHATSAPP_MESSAGING_TIER", "'lots'"),
        ("CHECKS_CRON", "'every minute'"),
        ("DELIVERY_KNOCK_TEMPLATES", "'en'"),
    ]:
        assert re.search(rf"{variable}: [^;]*{re.escape(shown)}", message), (variable, message)


def test_values_are_parsed_and_empty_means_default() -> None:
    settings = Settings.from_env(
        {
            "DELIVERY_RATE_LIMIT": "12.5",
            "WHATSAPP_MESSAGING_TIER": "TIER_10K",
            "SANDBOX_PAIR_RATE": "off",
            "WHATSAPP_API_BASE_URL": "https://graph.facebook.com/",
            "DELIVERY_CONCURRENCY": "",
            "GENERATOR_BACKEND": " OpenAI ",
        }
    )
    assert settings.delivery.rate_limit == 12.5
    assert settings.checks.tier_limit == 10_000
    assert settings.sandbox.pair_rate_enabled is False
    assert settings.whatsapp.api_base_url == "https://graph.facebook.com"
    assert settings.delivery.concurrency == Settings().delivery.concurrency
    assert settings.generation.backend == "openai"


def test_secrets_never_show_in_repr_or_errors() -> None:
    token, secret = "EAAG-a-real-looking-token", "an-app-secret-value"
    settings = Settings.from_env({"WHATSAPP_ACCESS_TOKEN": token, "WHATSAPP_APP_SECRET": secret})
    assert settings.whatsapp.access_token.get_secret_value() == token
    assert token not in repr(settings) and secret not in repr(settings)
    assert token not in str(settings.whatsapp.effective())
    with pytest.raises(SettingsError) as failed:
        Settings.from_env({"WHATSAPP_SEND_TIMEOUT": "-1", "WHATSAPP_ACCESS_TOKEN": token})
    assert "WHATSAPP_SEND_TIMEOUT" in str(failed.value) and token not in str(failed.value)


def test_nothing_is_read_at_import_time() -> None:
    """Every module imports under a broken environment; only building settings fails."""
    code = (
        "import importlib, pkgutil, delivery_pipeline\n"
        "for m in pkgutil.walk_packages(delivery_pipeline.__path__, 'delivery_pipeline.'):\n"
        "    if not m.name.endswith('__main__'): importlib.import_module(m.name)\n"
        "from delivery_pipeline.dagster_defs.definitions import defs\n"
        "try:\n"
        "    defs()\n"
        "except ValueError as exc:\n"
        "    print('REFUSED', exc)\n"
    )
    broken = {
        "DELIVERY_LEASE_SECONDS": "soon",
        "DELIVERY_HEARTBEAT_SECONDS": "often",
        "CHECKS_CRON": "x",
        "REPORT_START_DATE": "yesterday",
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **broken},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert "REFUSED bad settings:" in result.stdout
    for variable in broken:
        assert variable in result.stdout


def test_review_settings_refuse_a_short_token_and_unknown_kinds_without_echoing_the_token() -> None:
    with pytest.raises(SettingsError) as failed:
        Settings.from_env({"REVIEW_TOKEN": "short-secret", "DELIVERY_REVIEW_KINDS": "plan,plna"})
    message = str(failed.value)
    assert "REVIEW_TOKEN: must be at least 16 characters" in message
    assert "short-secret" not in message
    assert "DELIVERY_REVIEW_KINDS: unknown kind 'plna'" in message
    settings = Settings.from_env(
        {"REVIEW_TOKEN": "t" * 16, "DELIVERY_REVIEW_KINDS": " plan , daily_brief,"}
    )
    assert settings.delivery.review_kind_set == {"plan", "daily_brief"}
    assert Settings().delivery.review_kind_set == frozenset(), "nothing is reviewed by default"
    assert "t" * 16 not in repr(settings)
