"""No process we start writes a secret to its log.

The real one: the webhook service, run as ``docs/how-to/deploy.md`` runs it, with a
unique value for every secret and its ops and reviewers' webhooks pointing at
a loopback sink whose paths are secrets; it posts both channels' alerts,
answers Meta's handshake, a signed webhook, a poke and a reviewer's sign-in,
and its log (at DEBUG, the most it can say) holds none of the values. Then
the one logging set-up itself (``delivery_pipeline/logs.py``), in process.
"""

from __future__ import annotations

import io
import json
import logging

import psycopg
import pytest

from delivery_pipeline import logs
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.sandbox import (
    WebhookReceiver,
    start_sandbox,
)
from delivery_pipeline.testing.service import start_service
from delivery_pipeline.watch.alerts import Alert, AlertChannel, AlertSeverity, record_once
from delivery_pipeline.whatsapp.signature import sign
from delivery_pipeline_tests.support.review import post_sign_in
from delivery_pipeline_tests.support.secret_values import (
    needles,
    role_with_password,
    secret_environment,
    url_as,
)


@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_service_log_holds_no_secret(
    pg_admin_url: str, database_url: str, log_format: str
) -> None:
    database = str(psycopg.conninfo.conninfo_to_dict(database_url)["dbname"])
    with connect(database_url) as conn:
        for channel in AlertChannel:
            record_once(
                conn, Alert(f"test:log:{channel}", AlertSeverity.ERROR, "a test", {}, channel)
            )
    with role_with_password(pg_admin_url) as role, WebhookReceiver() as hooks:
        env = secret_environment(
            url_as(pg_admin_url, database, role),
            url_as(pg_admin_url, "unused", role, scheme="postgresql+psycopg2"),
            hooks.url,
        )
        secrets = needles(env, role)
        env["DELIVERY_LOG_FORMAT"] = log_format
        identity = {
            "WHATSAPP_ACCESS_TOKEN": env["WHATSAPP_ACCESS_TOKEN"],
            "WHATSAPP_APP_SECRET": env["WHATSAPP_APP_SECRET"],
        }
        with start_sandbox(**identity) as sandbox:
            service = start_service(
                env["DATABASE_URL"], sandbox.url, args=("--log-level", "debug"), **env
            )
            try:
                # Both channels' alerts reach the sink: the URLs were used.
                posted = hooks.wait_for(lambda got: len(got) >= 2, timeout=30)
                assert {hook.path.split("/")[-2] for hook in posted} == {"B0", "B1"}
                http = service.http
                handshake = {
                    "hub.mode": "subscribe",
                    "hub.verify_token": env["WHATSAPP_VERIFY_TOKEN"],
                    "hub.challenge": "42",
                }
                assert http.get("/webhooks/whatsapp", params=handshake).text == "42"
                body = b'{"object": "whatsapp_business_account", "entry": []}'
                signed = {"X-Hub-Signature-256": sign(env["WHATSAPP_APP_SECRET"], body)}
                assert http.post("/webhooks/whatsapp", content=body, headers=signed).is_success
                bearer = {"Authorization": f"Bearer {env['DELIVERY_INTERNAL_TOKEN']}"}
                poke = http.post("/internal/sweep", json={"document_id": 1}, headers=bearer)
                assert poke.status_code == 202
                token = env["REVIEW_TOKEN"]
                assert post_sign_in(http, "Rita", token).status_code == 303
                http.cookies.clear()
                assert post_sign_in(http, "Eve", token[:-1]).status_code == 401
                scraper = {"Authorization": f"Bearer {env['DELIVERY_METRICS_TOKEN']}"}
                metrics = http.get("/metrics", headers=scraper)
                assert metrics.status_code == 200
                shown = sorted(what for what, value in secrets.items() if value in metrics.text)
                assert shown == [], shown
            finally:
                service.child.stop()
                written = service.log()
                service.stop()
            sandbox_log = sandbox.log()
    assert "accepts our identity" in written, written  # INFO lines were written
    if log_format == "json":
        records = [json.loads(line) for line in written.splitlines() if line.strip()]
        assert {"time", "level", "logger", "message", "process"} <= set(records[0])
        assert any("accepts our identity" in record["message"] for record in records)
    for name, log in (("service", written), ("sandbox", sandbox_log)):
        leaked = sorted(what for what, value in secrets.items() if value in log)
        assert leaked == [], (name, leaked, log[-3000:])


# ── the set-up, in process ──────────────────────────────────────────────

HOOK = "https://chat.example/hooks/T0/B0/a-secret-webhook-path"
LOG = logging.getLogger("delivery_pipeline.test")


@pytest.fixture
def root_logging():
    """The root logger as the test found it, afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in logs.HTTP_CLIENT_LOGGERS}
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


def captured(root_logging: logging.Logger) -> io.StringIO:
    """The root logger writing to the string returned, and nowhere else."""
    stream = io.StringIO()
    root_logging.handlers[:] = [logging.StreamHandler(stream)]
    return stream


def configured(root_logging: logging.Logger, env: dict[str, str]) -> io.StringIO:
    """The one logging set-up with the settings ``env`` (and the ops webhook ``HOOK``)
    give, writing to the string returned."""
    stream = captured(root_logging)
    logs.configure(logging.INFO, Settings.from_env({"OPS_WEBHOOK_URL": HOOK, **env}))
    return stream


def fail_naming_the_hook() -> None:
    """A failure logged with its traceback, whose message holds the hook."""
    try:
        raise RuntimeError(f"failed for url '{HOOK}'")
    except RuntimeError:
        LOG.exception("it failed")


def test_http_clients_log_no_url_at_any_level(root_logging) -> None:
    stream = captured(root_logging)
    logs.configure("debug")
    assert root_logging.level == logging.DEBUG
    for name in logs.HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).info("HTTP Request: POST https://hooks.slack.com/services/X")
        logging.getLogger(f"{name}._client").debug("GET https://hooks.slack.com/services/Y")
        logging.getLogger(name).warning("a warning still shows")
    assert "hooks.slack.com" not in stream.getvalue()
    assert stream.getvalue().count("a warning still shows") == len(logs.HTTP_CLIENT_LOGGERS)


def test_every_secret_in_force_is_redacted_from_messages_and_tracebacks(root_logging) -> None:
    stream = configured(
        root_logging,
        {
            "REVIEW_TOKEN": "a-long-reviewer-token-value",
            "DATABASE_URL": "postgresql://ops:db-pass%2Fword@db:5432/delivery",
            "OPENAI_BASE_URL": "https://gateway:gateway-key-1@llm.example/v1",
        },
    )
    LOG.info("posting to %s", HOOK)
    LOG.info("token %r, password db-pass/word, key gateway-key-1", "a-long-reviewer-token-value")
    fail_naming_the_hook()
    written = stream.getvalue()
    for secret in (
        "a-secret-webhook-path",
        "a-long-reviewer-token-value",
        "db-pass",
        "gateway-key-1",
    ):
        assert secret not in written, (secret, written)
    assert "<OPS_WEBHOOK_URL>" in written and "<REVIEW_TOKEN>" in written
    assert "<DATABASE_URL password>" in written and "<OPENAI_BASE_URL password>" in written
    assert "RuntimeError" in written and "it failed" in written  # the traceback is kept


def test_json_lines_redact_every_secret_in_messages_and_tracebacks(root_logging) -> None:
    stream = configured(
        root_logging,
        {
            "DATABASE_URL": "postgresql://ops:db-pass%2Fword@db:5432/delivery",
            "DELIVERY_LOG_FORMAT": "json",
        },
    )
    LOG.info("posting to %s with db-pass/word", HOOK)
    fail_naming_the_hook()
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "posting to <OPS_WEBHOOK_URL> with <DATABASE_URL password>"
    assert (first["level"], first["logger"]) == ("INFO", "delivery_pipeline.test")
    assert second["message"] == "it failed"
    assert "RuntimeError: failed for url '<OPS_WEBHOOK_URL>'" in second["traceback"]
    assert "a-secret-webhook-path" not in stream.getvalue()
    assert "db-pass" not in stream.getvalue()


def test_a_log_format_set_before_the_settings_are_read_is_the_environments(
    root_logging, monkeypatch
) -> None:
    """The CLI logs before it reads its settings: the format comes from the environment."""
    monkeypatch.setenv("DELIVERY_LOG_FORMAT", "json")
    stream = captured(root_logging)
    logs.configure(logging.INFO)
    logging.getLogger("delivery_pipeline.cli").warning("one line")
    assert json.loads(stream.getvalue())["message"] == "one line"


def test_dagster_processes_write_our_lines_as_json_scrubbed(capsys) -> None:
    """In Dagster's processes (``ready_for_capture``): our loggers' own JSON handler on
    stderr, after the scrubbing one; nothing through the root's handlers besides."""
    settings = Settings.from_env({"OPS_WEBHOOK_URL": HOOK, "DELIVERY_LOG_FORMAT": "json"})
    package = logging.getLogger(logs.CAPTURED_LOGGER)
    handlers, propagate, level = list(package.handlers), package.propagate, package.level
    try:
        logs.ready_for_capture(settings)
        logs.ready_for_capture(settings)  # loaded twice in one process: still one of each
        assert sum(isinstance(h, logs.JsonLines) for h in package.handlers) == 1
        assert isinstance(package.handlers[0], logs.Scrubbing)
        logging.getLogger("delivery_pipeline.sensor").warning("posting to %s", HOOK)
        written = capsys.readouterr().err
    finally:
        package.handlers[:] = handlers
        package.propagate, package.level = propagate, level
    assert json.loads(written)["message"] == "posting to <OPS_WEBHOOK_URL>"


def test_the_sandbox_writes_json_lines_without_its_secrets() -> None:
    token, secret = "EAAG-a-sandbox-token-of-some-length", "a-sandbox-app-secret-of-length"
    with start_sandbox(
        DELIVERY_LOG_FORMAT="json", WHATSAPP_ACCESS_TOKEN=token, WHATSAPP_APP_SECRET=secret
    ) as sandbox:
        sandbox.reset()
        written = sandbox.log()
    records = [json.loads(line) for line in written.splitlines() if line.strip()]
    assert any(r["message"].startswith("WhatsApp sandbox on http://") for r in records), written
    assert token not in written and secret not in written
