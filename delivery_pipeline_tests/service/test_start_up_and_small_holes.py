"""The smaller holes of a security review, each through real processes: settings a
deployment gets wrong refused with one line (or said once, loudly, at start-up), and
what a client can make the service write or answer.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import ServiceProcess, service_env, start_service
from delivery_pipeline_tests.support import cli
from delivery_pipeline_tests.support.review import post_sign_in

REVIEW_TOKEN = "reviewers-only-" + "y" * 24
REAL_TOKEN = "EAAG-a-real-looking-access-token"


@pytest.mark.parametrize(
    ("variable", "env", "said"),
    [
        ("DELIVERY_TRUSTED_PROXIES", {"DELIVERY_TRUSTED_PROXIES": "*"}, "any client choose"),
        ("DELIVERY_TRUSTED_PROXIES", {"DELIVERY_TRUSTED_PROXIES": "::/0"}, "every address"),
        ("DELIVERY_INTERNAL_TOKEN", {"DELIVERY_INTERNAL_TOKEN": "abc"}, "at least 16"),
        ("WHATSAPP_VERIFY_TOKEN", {"WHATSAPP_VERIFY_TOKEN": "abc"}, "at least 16"),
        (
            "WHATSAPP_API_BASE_URL",
            {"WHATSAPP_ACCESS_TOKEN": REAL_TOKEN, "WHATSAPP_API_BASE_URL": "http://graph.example"},
            "clear text",
        ),
    ],
)
def test_a_setting_that_would_open_a_hole_is_refused_with_one_line(
    database_url, variable, env, said
):
    for command in (
        [sys.executable, "-m", "delivery_pipeline.cli", "db", "url"],
        [sys.executable, "-m", "delivery_pipeline.service", "--port", "9"],
    ):
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=60,
            env=service_env(database_url, "http://127.0.0.1:9", **env),
        )
        assert done.returncode == 2, (command, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and variable in lines[0] and said in lines[0], done.stderr
        for value in env.values():
            if value == REAL_TOKEN:
                assert value not in done.stderr


def test_the_development_defaults_of_up_pass(tmp_path):
    from delivery_pipeline.cli.provision import dev_secrets
    from delivery_pipeline.settings import Settings

    Settings.from_env(dev_secrets(tmp_path))  # raises if any were refused


def test_db_url_never_prints_the_password(pg_admin_url):
    host = pg_admin_url.split("@", 1)[1]
    with_password = f"postgresql://postgres:not-for-your-eyes@{host}"
    done = cli.run(with_password, "db", "url")
    assert done.returncode == 0, done.stderr
    assert "not-for-your-eyes" not in done.stdout + done.stderr
    assert done.stdout.strip() == f"postgresql://postgres@{host}"


@pytest.fixture(scope="module")
def service(pg_admin_url: str, template_database: str) -> Iterator[ServiceProcess]:
    """One service with every start-up mistake of the second kind: a real token sent to
    the sandbox on this machine, an http:// generator elsewhere, and requests from a
    balancer (this machine) that DELIVERY_TRUSTED_PROXIES does not name."""
    import uuid

    import psycopg

    from delivery_pipeline.store.db import ensure_database, with_database

    name = f"dp_test_{uuid.uuid4().hex[:12]}"
    ensure_database(pg_admin_url, name, template=template_database)
    with start_service(
        with_database(pg_admin_url, name),
        "http://127.0.0.1:9",
        WHATSAPP_ACCESS_TOKEN=REAL_TOKEN,
        GENERATION_BACKEND="openai",
        OPENAI_BASE_URL="http://llm.example:8080/v1",
        OPENAI_API_KEY="sk-a-key-of-the-generator",
        DELIVERY_TRUSTED_PROXIES="10.9.9.9",
        REVIEW_TOKEN=REVIEW_TOKEN,
        DELIVERY_LISTEN="false",
    ) as svc:
        yield svc
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_tokens_in_clear_or_to_a_sandbox_are_said_once_at_start_up(service):
    log = service.log()
    assert log.count("nothing reaches WhatsApp") == 1, log
    assert log.count("OPENAI_API_KEY and every prompt travel in clear text") == 1, log
    assert "sk-a-key-of-the-generator" not in log


def test_a_balancer_missing_from_trusted_proxies_is_said_once(service):
    for client in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
        service.http.get("/healthz", headers={"X-Forwarded-For": client})
    said = "DELIVERY_TRUSTED_PROXIES does not name"
    deadline = time.monotonic() + 30
    while said not in service.log():
        assert time.monotonic() < deadline, service.log()
        time.sleep(0.1)
    assert service.log().count(said) == 1


def test_review_with_a_slash_and_a_forged_host_stays_here(service):
    answered = service.http.get("/review/", headers={"Host": "evil.example"})
    assert answered.status_code == 307
    assert answered.headers["location"] == "/review"
    # and no other path redirects by the Host either
    assert "evil.example" not in service.http.get(
        "/healthz/", headers={"Host": "evil.example"}
    ).headers.get("location", "")


def test_the_sign_in_form_has_a_csrf_token(service):
    with httpx.Client(base_url=service.url, timeout=30) as browser:
        # a page elsewhere posting the form: no token, no cookie
        forged = browser.post("/review/sign-in", data={"name": "Eve", "token": REVIEW_TOKEN})
        assert forged.status_code == 403 and "dp_review_session" not in forged.cookies
        # a token from the form, but not this browser's cookie
        with httpx.Client(base_url=service.url, timeout=30) as other:
            form = other.get("/review/sign-in").text
        token = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        stolen = browser.post(
            "/review/sign-in", data={"csrf": token, "name": "Eve", "token": REVIEW_TOKEN}
        )
        assert stolen.status_code == 403
        # through the form, as a browser does
        assert post_sign_in(browser, "Rita", REVIEW_TOKEN).status_code == 303


def test_a_name_with_control_characters_is_logged_and_kept_clean(service, pg_admin_url):
    with httpx.Client(base_url=service.url, timeout=30) as browser:
        name = "Eve\x1b[2J\u202eX\x00Y"
        assert post_sign_in(browser, name, REVIEW_TOKEN).status_code == 303
        page = browser.get("/review").text
    deadline = time.monotonic() + 30
    while "signed in" not in service.log().split("Eve", 1)[-1]:
        assert time.monotonic() < deadline, service.log()
        time.sleep(0.1)
    log = service.log()
    assert "Eve[2JXY signed in" in log, log
    assert not any(c in log for c in "\x1b\u202e\x00")
    assert "Eve[2JXY" in page


def test_messages_from_strangers_log_through_the_rate_limit(service):
    for i in range(40):
        body = payloads.inbound(f"+1999555{i:04d}", f"wamid.STRANGER{i:03d}", "hi")
        assert service.post_webhook(body).status_code == 200
    lines = [line for line in service.log().splitlines() if "unknown sender" in line]
    assert 1 <= len(lines) <= 10, lines
