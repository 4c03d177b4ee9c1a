"""The generators: the offline default's text, and the OpenAI-compatible
backend against a scripted server on 127.0.0.1 (never a real host)."""

from __future__ import annotations

import datetime as dt

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.generation.backends import build_generator
from delivery_pipeline.generation.generator import (
    DocumentSpec,
    GeneratorMisconfigured,
    GeneratorRejected,
    GeneratorUnavailable,
)
from delivery_pipeline.generation.offline import OfflineGenerator, format_date
from delivery_pipeline.generation.openai import OpenAIGenerator
from delivery_pipeline.settings import Settings
from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer, chat_completion

START = dt.date(2025, 3, 3)  # a Monday


def spec(kind: str = "plan", locale: str = "en", name: str = "Ana", **kw: object) -> DocumentSpec:
    values = {
        "document_id": 7,
        "kind": kind,
        "name": name,
        "locale": locale,
        "time_zone": "America/Sao_Paulo",
        "for_date": START,
        **kw,
    }
    return DocumentSpec(**values)  # type: ignore[arg-type]


# ── offline ─────────────────────────────────────────────────────────────


@pytest.mark.parametrize("locale", ["en", "es", "pt"])
def test_offline_plan_spans_several_messages(locale):
    body = OfflineGenerator().generate(spec(locale=locale, name="Al"))
    chunks = delivery_messages(body, 4096)
    assert 3 <= len(chunks) <= 5
    assert body.count("\n\n") >= 30, "a real multi-paragraph plan"
    assert body.startswith("Al, ")


def test_offline_plan_is_in_the_persons_language_with_their_dates():
    g = OfflineGenerator()
    en, es, pt = (g.generate(spec(locale=loc)) for loc in ("en", "es", "pt"))
    assert "Week 1 of 6, Monday 3 March to Sunday 9 March" in en
    assert "Semana 1 de 6, del lunes 3 de marzo al domingo 9 de marzo" in es
    assert "Semana 1 de 6, de segunda-feira, 3 de março a domingo, 9 de março" in pt
    assert "Week 6 of 6, Monday 7 April to Sunday 13 April: Rest and reflection" in en
    assert "Evening question" not in es and "Pregunta para la noche" in es
    assert "Pergunta para a noite" in pt


def test_offline_is_deterministic_and_personal():
    g = OfflineGenerator()
    assert g.generate(spec()) == g.generate(spec())
    assert g.generate(spec(kind="daily_brief")) == g.generate(spec(kind="daily_brief"))
    # the theme order varies between documents; the last week stays the review
    orders = {
        tuple(
            line
            for line in g.generate(spec(document_id=i)).splitlines()
            if line.startswith("Week") and " of 6, " in line
        )
        for i in range(20)
    }
    assert len(orders) > 1
    assert all(order[-1].endswith("Rest and reflection") for order in orders)


@pytest.mark.parametrize(
    ("locale", "greeting", "date"),
    [
        ("en", "Good morning, Bia.", "Monday 3 March"),
        ("es", "Buenos días, Bia.", "lunes 3 de marzo"),
        ("pt", "Bom dia, Bia.", "segunda-feira, 3 de março"),
    ],
)
def test_offline_brief_is_short_and_local(locale, greeting, date):
    body = OfflineGenerator().generate(spec(kind="daily_brief", locale=locale, name="Bia"))
    assert body.startswith(greeting) and date in body
    assert len(delivery_messages(body, 4096)) == 1 and len(body) < 600


def test_offline_brief_changes_with_the_day():
    g = OfflineGenerator()
    briefs = {
        g.generate(spec(kind="daily_brief", for_date=START + dt.timedelta(days=i)))
        for i in range(7)
    }
    assert len(briefs) == 7


def test_blank_name_and_unknown_locale_still_write():
    body = OfflineGenerator().generate(spec(name="  \t", locale="fr"))
    assert body.startswith("friend, your six-week")


def test_format_date():
    assert format_date(dt.date(2024, 12, 25), "en") == "Wednesday 25 December"
    assert format_date(dt.date(2024, 12, 25), "es") == "miércoles 25 de diciembre"
    assert format_date(dt.date(2024, 12, 25), "pt") == "quarta-feira, 25 de dezembro"


def test_spec_rejects_unknown_kind():
    with pytest.raises(ValueError):
        spec(kind="novel")


# ── OpenAI-compatible backend ───────────────────────────────────────────


@pytest.fixture
def fake():
    with FakeHttpServer() as server:
        yield server


def openai(fake: FakeHttpServer, **kw: object) -> tuple[OpenAIGenerator, list[float]]:
    delays: list[float] = []
    options = {"timeout_seconds": 5.0, "max_retries": 2, "sleep": delays.append, **kw}
    return OpenAIGenerator(f"{fake.url}/v1", "test-model", "sk-test", **options), delays


def test_openai_sends_a_chat_completion_and_returns_the_text(fake):
    fake.answer(Answer(200, chat_completion("  Hola Ana.\n\nTu plan...  ")))
    gen, delays = openai(fake)
    body = gen.generate(spec(locale="es"))
    assert body == "Hola Ana.\n\nTu plan..."
    [request] = fake.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    payload = request.json()
    assert payload["model"] == "test-model"
    system, user = payload["messages"]
    assert system["role"] == "system" and "Spanish" in system["content"]
    assert "America/Sao_Paulo" in system["content"]
    assert user["role"] == "user" and "Ana" in user["content"] and "2025-03-03" in user["content"]
    assert delays == []


def test_openai_retries_transient_errors_with_backoff(fake):
    fake.answer(
        Answer(503, {"error": "busy"}),
        Answer(500, {"error": "oops"}),
        Answer(200, chat_completion("done")),
    )
    gen, delays = openai(fake, retry_base_seconds=0.5)
    assert gen.generate(spec()) == "done"
    assert len(fake.requests) == 3
    # exponential from the base, with the project's ±25 % jitter (backoff.py)
    assert 0.375 <= delays[0] <= 0.625 and 0.75 <= delays[1] <= 1.25


def test_openai_honours_retry_after_capped(fake):
    fake.answer(
        Answer(429, {"error": "slow down"}, headers=(("Retry-After", "7"),)),
        Answer(429, {"error": "slow down"}, headers=(("Retry-After", "900"),)),
        Answer(200, chat_completion("ok")),
    )
    gen, delays = openai(fake)
    assert gen.generate(spec()) == "ok"
    assert delays == [7.0, 30.0]


def test_openai_gives_up_after_bounded_retries(fake):
    fake.default = Answer(502, {"error": "bad gateway"})
    gen, delays = openai(fake, max_retries=3)
    with pytest.raises(GeneratorUnavailable, match="502"):
        gen.generate(spec())
    assert len(fake.requests) == 4 and len(delays) == 3


@pytest.mark.parametrize("status", [401, 403, 404])
def test_openai_misconfiguration_is_not_retried(fake, status):
    fake.default = Answer(status, {"error": {"message": "invalid api key"}})
    gen, _ = openai(fake)
    with pytest.raises(GeneratorMisconfigured, match="OPENAI_API_KEY"):
        gen.generate(spec())
    assert len(fake.requests) == 1


def test_openai_rejected_request_is_permanent(fake):
    fake.default = Answer(400, {"error": {"message": "content policy"}})
    gen, _ = openai(fake)
    with pytest.raises(GeneratorRejected, match="content policy"):
        gen.generate(spec())
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "answer",
    [
        Answer(200, chat_completion("   ")),
        Answer(200, {"choices": []}),
        Answer(200, raw=b"not json"),
    ],
)
def test_openai_unusable_answers_are_retried_then_unavailable(fake, answer):
    fake.default = answer
    gen, _ = openai(fake, max_retries=1)
    with pytest.raises(GeneratorUnavailable):
        gen.generate(spec())
    assert len(fake.requests) == 2


def test_openai_timeout_is_unavailable(fake):
    fake.default = Answer(200, chat_completion("too late"), delay_seconds=2.0)
    gen, _ = openai(fake, timeout_seconds=0.2, max_retries=0)
    with pytest.raises(GeneratorUnavailable, match="timed out"):
        gen.generate(spec())


def test_openai_unreachable_is_unavailable():
    from delivery_pipeline.testing.sandbox import free_port

    gen = OpenAIGenerator(
        f"http://127.0.0.1:{free_port()}/v1", "m", None, max_retries=1, sleep=lambda s: None
    )
    with pytest.raises(GeneratorUnavailable, match="could not reach"):
        gen.generate(spec())


def test_openai_without_key_sends_no_authorization(fake):
    fake.answer(Answer(200, chat_completion("local model")))
    gen = OpenAIGenerator(fake.url, "llama", None)
    assert gen.generate(spec()) == "local model"
    assert "authorization" not in fake.requests[0].headers


# ── settings ────────────────────────────────────────────────────────────


def test_settings_from_env_read_only_generator_variables(fake):
    env = {
        "GENERATOR_BACKEND": "OpenAI",
        "OPENAI_BASE_URL": f"{fake.url}/v1",
        "OPENAI_MODEL": "m1",
        "OPENAI_API_KEY": "sk-secret",
        "GENERATOR_MAX_RETRIES": "0",
        "WHATSAPP_ACCESS_TOKEN": "wa-secret",
        "WHATSAPP_APP_SECRET": "app-secret",
    }
    settings = Settings.from_env(env).generation
    assert settings.backend == "openai" and settings.max_retries == 0
    assert "sk-secret" not in repr(settings)
    assert "wa-secret" not in repr(vars(settings)) and "app-secret" not in repr(vars(settings))
    fake.answer(Answer(200, chat_completion("from env")))
    generator = build_generator(settings)
    assert isinstance(generator, OpenAIGenerator)
    assert generator.generate(spec()) == "from env"
    assert fake.requests[0].headers["authorization"] == "Bearer sk-secret"


def test_settings_default_to_offline_and_validate():
    assert isinstance(build_generator(Settings.from_env({}).generation), OfflineGenerator)
    with pytest.raises(ValueError, match="GENERATOR_BACKEND"):
        Settings.from_env({"GENERATOR_BACKEND": "magic"})
    with pytest.raises(ValueError, match="GENERATOR_TIMEOUT_SECONDS"):
        Settings.from_env({"GENERATOR_TIMEOUT_SECONDS": "soon"})
