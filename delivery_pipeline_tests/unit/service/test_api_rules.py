"""The API's pure rules: its settings, the events' retry schedule, what an answer means."""

from __future__ import annotations

import datetime as dt

import pytest

from delivery_pipeline.service.api.events import Outcome, outcome_of
from delivery_pipeline.settings import Settings, SettingsError
from delivery_pipeline.store.application_events import Schedule

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_tokens_rotate_per_application_and_never_show():
    api = Settings.from_env(
        {"DELIVERY_API_TOKENS": "acme=old-token-0123456789, acme=new-token-0123456789"}
    ).api
    assert api.applications_by_token == {
        "old-token-0123456789": "acme",
        "new-token-0123456789": "acme",
    }
    assert "token-0123456789" not in repr(api)


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"DELIVERY_API_TOKENS": "acme=short"}, "DELIVERY_API_TOKENS"),
        ({"DELIVERY_API_TOKENS": "Acme!=a-long-enough-token-value"}, "DELIVERY_API_TOKENS"),
        (
            {"DELIVERY_API_TOKENS": "acme=a-long-enough-token-value,b=a-long-enough-token-value"},
            "DELIVERY_API_TOKENS",
        ),
        ({"DELIVERY_API_WEBHOOKS": "acme=ftp://example"}, "DELIVERY_API_WEBHOOKS"),
        ({"DELIVERY_API_WEBHOOKS": "acme=http://127.0.0.1:9/x"}, "DELIVERY_API_WEBHOOK_SECRETS"),
        (
            {
                "DELIVERY_API_WEBHOOKS": "acme=http://127.0.0.1:9/x",
                "DELIVERY_API_WEBHOOK_SECRETS": "acme=whsec_not-base64",
            },
            "DELIVERY_API_WEBHOOK_SECRETS",
        ),
    ],
)
def test_a_bad_value_names_its_variable_and_not_the_secret(environ, variable):
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(environ)
    message = str(refused.value)
    assert message.startswith(f"bad settings: {variable}:")
    assert "a-long-enough-token-value" not in message and "127.0.0.1" not in message


def test_several_signing_secrets_sign_with_each():
    api = Settings.from_env(
        {
            "DELIVERY_API_WEBHOOKS": "acme=https://app.example/events",
            "DELIVERY_API_WEBHOOK_SECRETS": f"acme={SECRET},acme={SECRET}",
        }
    ).api
    assert len(api.signing_secrets["acme"]) == 2
    assert api.endpoints == {"acme": "https://app.example/events"}


def test_the_schedule_is_standard_webhooks_for_hours_and_scales():
    production = Schedule()
    assert [production.after(n) for n in (1, 2, 7, 20)] == [5, 300, 36000, 36000]
    assert production.horizon == dt.timedelta(hours=27, minutes=35, seconds=5)
    assert Schedule(0.01).after(2) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.DELIVERED),
        (204, Outcome.DELIVERED),
        (400, Outcome.REFUSED),
        (410, Outcome.REFUSED),
        (408, Outcome.UNREACHABLE),
        (429, Outcome.UNREACHABLE),
        (503, Outcome.UNREACHABLE),
        (301, Outcome.REFUSED),
    ],
)
def test_what_an_endpoints_answer_means(status, outcome):
    assert outcome_of(status) == outcome
