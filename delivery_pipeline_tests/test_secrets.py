"""Secrets in the settings model: which values are secret, stripped of stray whitespace,
never shown, and never handed to Dagster as configuration.

The processes themselves are tested in ``dagster_defs/test_secrets_dagster.py``
(the UI) and ``system/test_secrets_logs.py`` (the logs).
"""

from __future__ import annotations

import dagster as dg
import pytest

from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    DeliveryServiceResource,
    GeneratorResource,
    OpsChannelResource,
    ReviewResource,
    build_resources,
)
from delivery_pipeline.settings import Settings, SettingsError
from delivery_pipeline.settings.urls import without_password
from delivery_pipeline.store.db import public_url

DATABASE_URL = "postgresql://ops:a-db-password@db.internal:5432/delivery"


# The secrets with a shape of their own (application=value lists).
SHAPED = {
    "DATABASE_LISTEN_URL": "postgresql://listener:a-password-of-some-length@127.0.0.1:9/d",
    "DELIVERY_API_TOKENS": "acme=an-api-token-of-some-length",
    "REVIEW_TOKENS": "Ana=a-reviewer-token-of-some-length",
    "OPERATOR_TOKENS": "Olga=an-operator-token-of-some-length",
    "DELIVERY_MIGRATION_DATABASE_URL": "postgresql://owner:the-owners-password@db.internal/delivery",
    "DELIVERY_API_WEBHOOKS": "acme=http://127.0.0.1:9/DELIVERY_API_WEBHOOKS-of-some-length",
    "DELIVERY_API_WEBHOOK_SECRETS": "acme=whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
}


def _secret_variables() -> dict[str, str]:
    """Every variable the model holds as a secret → a valid value for it."""
    values = {"DATABASE_URL": DATABASE_URL}
    for section in Settings.sections().values():
        names = section.env_names()
        for field in section.secret_fields():
            name = names[field]
            values.setdefault(name, SHAPED.get(name, f"http://127.0.0.1:9/{name}-of-some-length"))
    return values


def test_a_secret_read_from_the_environment_keeps_no_trailing_newline() -> None:
    given = _secret_variables()
    settings = Settings.from_env({name: f"{value}\n" for name, value in given.items()})
    texts = settings.secret_texts()
    for name, value in given.items():
        assert texts.get(value) == name, (name, texts)
        assert not any(text.endswith("\n") for text in texts), name
    assert settings.review.token is not None
    assert settings.review.token.get_secret_value() == given["REVIEW_TOKEN"]
    assert settings.database.database_url == DATABASE_URL
    # surrounding whitespace of any kind, any setting
    assert Settings.from_env({"OPENAI_MODEL": "\tgpt-x \r\n"}).generation.openai_model == "gpt-x"


def test_a_run_reads_the_secret_without_its_newline_too(monkeypatch) -> None:
    """A run builds its resources from its own environment: the same rule holds there."""
    for name, value in _secret_variables().items():
        monkeypatch.setenv(name, f"{value}\n")
    seen: dict[str, object] = {}

    @dg.op
    def probe(
        app_db: dg.ResourceParam[AppDatabase],
        ops_channel: dg.ResourceParam[OpsChannelResource],
        review: dg.ResourceParam[ReviewResource],
        generator: dg.ResourceParam[GeneratorResource],
    ) -> None:
        seen["database"] = app_db.url()
        seen["ops"] = ops_channel.notifier().url
        seen["reviewers"] = review.notifier().url
        key = generator.settings.openai_api_key
        seen["key"] = key.get_secret_value() if key else None

    @dg.job
    def probing() -> None:
        probe()

    resources = build_resources(Settings.from_env())
    defs = dg.Definitions(jobs=[probing], resources=resources)
    assert defs.resolve_job_def("probing").execute_in_process().success
    assert seen["database"] == DATABASE_URL
    assert all(isinstance(v, str) and not v.endswith("\n") for v in seen.values()), seen


def test_the_database_url_is_a_secret_its_password_never_shown() -> None:
    settings = Settings.from_env({"DATABASE_URL": DATABASE_URL})
    assert settings.database.database_url == DATABASE_URL  # the connections' text
    assert "a-db-password" not in repr(settings)
    assert settings.database.effective()["database_url"] == "(set)"
    with pytest.raises(SettingsError) as failed:
        Settings.from_env({"DATABASE_URL": "postgresql://ops:a-db-password@db:notaport/x?x=="})
    assert "DATABASE_URL" in str(failed.value) and "a-db-password" not in str(failed.value)
    assert public_url(DATABASE_URL) == "postgresql://ops@db.internal:5432/delivery"
    assert "a-db-password" not in public_url("host=db password=a-db-password dbname=x")


def test_the_resources_take_no_config_and_describe_no_secret(monkeypatch) -> None:
    """What the UI's resources page shows is each resource's description and config: no
    config at all, and a description with the values in force, a secret as "(set)"."""
    for name, value in _secret_variables().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw:gw-key-123@llm.example/v1")
    monkeypatch.setenv("DELIVERY_SERVICE_URL", "http://service.internal:8766")
    resources = build_resources(Settings.from_env())
    shown = ""
    for name, resource in resources.items():
        fields = resource.config_schema.config_type.fields
        assert fields == {}, (name, fields)
        shown += resource.description or ""
    for secret in (*_secret_variables().values(), "a-db-password", "gw-key-123"):
        assert secret not in shown, secret
    # what is in force, by variable: a URL without a password as it is, a secret as set
    assert "- `DELIVERY_SERVICE_URL`: http://service.internal:8766" in shown
    assert "- `DATABASE_URL`: (set)" in shown and "- `OPENAI_BASE_URL`: (set)" in shown
    # what no Dagster process reads is not there at all, not even as set
    for withheld in (
        "WHATSAPP_APP_SECRET",
        "WHATSAPP_VERIFY_TOKEN",
        "DAGSTER_WEBSERVER_URL",
        "REVIEW_TOKEN",
        "REVIEW_TOKENS",
        "OPERATOR_TOKENS",
    ):
        assert f"`{withheld}`" not in shown, withheld
    assert isinstance(resources["generator"].resource_fn(None), GeneratorResource)
    assert isinstance(resources["delivery_service"].resource_fn(None), DeliveryServiceResource)


def test_a_url_is_shown_without_its_password() -> None:
    assert without_password("https://gw:key@llm.example/v1?a=1") == "https://gw@llm.example/v1?a=1"
    assert without_password("https://:key@llm.example/") == "https://llm.example/"
    assert without_password("https://llm.example/v1?password=x&a=1") == "https://llm.example/v1?a=1"
    untouched = "postgresql://ops@/delivery?host=/tmp/pg&port=5432"
    assert without_password(untouched) == untouched
    settings = Settings.from_env({"OPENAI_BASE_URL": "https://gw:key-123456@llm.example/v1"})
    assert settings.generation.effective()["openai_base_url"] == "(set)"
    assert settings.generation.hidden_fields() >= {"openai_base_url", "openai_api_key"}
