"""The command line on a bad day, each case a real subprocess: one line on stderr
that says what to do, exit 1 (needs attention) or 2 (usage); live progress
and the reasons for retries; ``status`` with the oldest waiting documents."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.sandbox import free_port
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.data import add_document, add_person, document


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


COMMANDS_ON_THE_DATABASE = [
    ("status",),
    ("sweep",),
    ("people", "list"),
    ("documents", "show", "1"),
    ("db", "upgrade"),
]


@pytest.mark.parametrize("args", COMMANDS_ON_THE_DATABASE, ids=" ".join)
def test_database_unreachable_names_the_url_without_its_password(args):
    url = f"postgresql://ops:s3cret-pw@127.0.0.1:{free_port()}/delivery"
    result = run(url, *args)
    assert result.returncode == 1
    line = one_line_error(result)
    assert "postgresql://ops@127.0.0.1:" in line and "is Postgres running?" in line
    assert "s3cret-pw" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "args", [a for a in COMMANDS_ON_THE_DATABASE if a[0] != "db"], ids=" ".join
)
def test_schema_missing_says_run_db_upgrade(empty_database, args):
    result = run(empty_database, *args)
    assert result.returncode == 1
    assert "run `delivery-pipeline db upgrade`" in one_line_error(result)


def test_a_database_url_that_is_not_a_url_is_a_usage_error():
    result = run("notaurl", "status")
    assert result.returncode == 2
    line = one_line_error(result)
    assert "DATABASE_URL" in line and "notaurl" not in line


def test_verbose_adds_the_traceback_to_the_line():
    result = run(f"postgresql://postgres@127.0.0.1:{free_port()}/x", "--verbose", "status")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: cannot reach the database")


def test_sandbox_say_without_a_sandbox(database_url):
    url = f"http://127.0.0.1:{free_port()}"
    result = run(database_url, "sandbox", "say", "+15550001", "hi", "--sandbox-url", url)
    assert result.returncode == 1
    line = one_line_error(result)
    assert url in line and "delivery-pipeline sandbox" in line


@pytest.mark.parametrize(
    "command", [("sandbox", "--port"), ("service", "--port"), ("up", "--sandbox-port")]
)
def test_a_port_in_use_is_one_line_before_anything_starts(database_url, sandbox, command):
    result = run(database_url, *command, str(sandbox.port))
    assert result.returncode == 1
    assert (
        f"127.0.0.1:{sandbox.port}" in one_line_error(result) and "already running" in result.stderr
    )


@pytest.mark.parametrize(
    ("flag", "what"), [("--person", "no person"), ("--document", "no document")]
)
def test_sweep_for_what_does_not_exist(database_url, flag, what):
    result = run(database_url, "sweep", flag, "99999")
    assert result.returncode == 2
    assert f"{what} 99999" in one_line_error(result)


def _waiting_document(db, sandbox) -> dict:
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    return add_document(db, person["id"], "A short plan.")


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"WHATSAPP_ACCESS_TOKEN": "not-the-sandbox-token"}, "WHATSAPP_ACCESS_TOKEN"),
        ({"WHATSAPP_PHONE_NUMBER_ID": "999"}, "WHATSAPP_PHONE_NUMBER_ID"),
    ],
)
def test_a_sandbox_identity_mismatch_is_explained_before_anything_is_claimed(
    database_url, db, sandbox, env, names
):
    doc = _waiting_document(db, sandbox)
    result = run(database_url, "sweep", WHATSAPP_API_BASE_URL=sandbox.url, **env)
    assert result.returncode == 1
    assert names in one_line_error(result)
    assert document(db, doc["id"])["claimed_at"] is None
    assert db.execute(QUERIES.sender_state.sql).fetchone()["paused_at"] is None, (
        "one shell's wrong token must not pause sending for everybody"
    )


def test_no_whatsapp_api_at_all_is_one_line(database_url, db, sandbox):
    _waiting_document(db, sandbox)
    url = f"http://127.0.0.1:{free_port()}"
    result = run(database_url, "sweep", WHATSAPP_API_BASE_URL=url)
    assert result.returncode == 1
    assert url in one_line_error(result) and "WHATSAPP_API_BASE_URL" in result.stderr


# ── sweep: progress while it runs, retries and why at the end ──


def test_sweep_ends_with_the_documents_scheduled_for_retry_and_why(database_url, db, sandbox):
    doc = _waiting_document(db, sandbox)
    sandbox.faults(error_5xx_rate=1.0)
    env = {"WHATSAPP_API_BASE_URL": sandbox.url, "DELIVERY_BACKOFF_BASE_SECONDS": "60"}

    text = run(database_url, "sweep", **env)
    assert text.returncode == 0, text.stderr
    assert "scheduled for retry (1):" in text.stdout
    assert f"document {doc['id']}, in " in text.stdout and "injected by the sandbox" in text.stdout
    assert "send_errors: TransientError 1" in text.stdout

    db.execute("UPDATE documents SET next_attempt_at = now()")
    as_json = json.loads(run(database_url, "sweep", "--json", **env).stdout)
    [retry] = as_json["retries"]
    assert retry["document_id"] == doc["id"] and retry["after_seconds"] > 30
    assert "injected by the sandbox" in retry["reason"]


def _slow_sweep_setup(db, sandbox, documents: int = 8) -> dict[str, str]:
    for _ in range(documents):
        _waiting_document(db, sandbox)
    sandbox.faults(latency_ms=400)
    return {"WHATSAPP_API_BASE_URL": sandbox.url, "DELIVERY_CONCURRENCY": "1"}


def test_sweep_progress_is_plain_lines_when_not_a_terminal(database_url, db, sandbox):
    result = run(database_url, "sweep", **_slow_sweep_setup(db, sandbox))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines and all(line.startswith("sweep ") for line in lines)
    assert "claimed" in lines[0] and "messages" in lines[0]
    assert "\x1b[" not in result.stderr, "no terminal codes in a log"


def test_sweep_progress_is_json_lines_with_json(database_url, db, sandbox):
    result = run(database_url, "sweep", "--json", **_slow_sweep_setup(db, sandbox))
    assert result.returncode == 0, result.stderr
    progress = [json.loads(line)["progress"] for line in result.stderr.strip().splitlines()]
    assert progress and {"claimed", "done", "messages_per_second", "errors"} <= set(progress[-1])
    assert [p["done"] for p in progress] == sorted(p["done"] for p in progress)
    assert json.loads(result.stdout)["delivered"] == 8


def test_sweep_progress_is_live_on_a_terminal(database_url, db, sandbox):
    env = {**os.environ, "DATABASE_URL": database_url, **_slow_sweep_setup(db, sandbox)}
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "delivery_pipeline.cli", "sweep"],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    ) as proc:
        os.close(follower)
        seen = bytearray()
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen.extend(chunk)
        proc.wait(timeout=60)
    os.close(leader)
    shown = seen.decode(errors="replace")
    assert proc.returncode == 0
    assert "claimed 8" in shown and "\x1b[" in shown, "a live line redrawn in place"


# ── status ──


def test_status_shows_the_oldest_waiting_document_its_error_and_next_attempt(
    database_url, db, sandbox
):
    first = _waiting_document(db, sandbox)
    _waiting_document(db, sandbox)
    db.execute(
        "UPDATE documents SET last_delivery_error = '(131000) Something went wrong', "
        "next_attempt_at = now() + interval '10 minutes' WHERE id = %s",
        (first["id"],),
    )
    result = run(database_url, "status")
    assert result.returncode == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if line.startswith("undelivered")]
    assert f"  {first['id']}  " in row and "in 9m" in row and "(131000) Something" in row
    assert "sending: not paused" in result.stdout and "pacer: " in result.stdout

    states = json.loads(run(database_url, "status", "--json").stdout)
    [undelivered] = [s for s in states["states"] if s["state"] == "undelivered"]
    assert undelivered["oldest_id"] == first["id"] and undelivered["count"] == 2
    assert states["pacer"]["throughput_limit"] == 80 and states["pacer"]["throttles"] == 0
    db.execute(QUERIES.pacer_row.sql, {"phone_number_id": states["pacer"]["phone_number_id"]})
    db.execute(
        QUERIES.throttle_pacer.sql,
        {"phone_number_id": states["pacer"]["phone_number_id"], "seconds": 600},
    )
    # Far ahead of a CLI's start-up on a loaded machine (seconds): the reading is the
    # throttle's, not the clock's.
    throttled = json.loads(run(database_url, "status", "--json").stdout)["pacer"]
    assert throttled["throttles"] == 1 and throttled["booked_ahead_seconds"] > 500
    assert "last throttled (130429)" in throttled["description"]


def test_status_says_sending_is_paused_what_to_fix_and_exits_1(database_url, db):
    db.execute(
        QUERIES.pause_sender.sql,
        {
            "phone_number_id": "*",
            "code": 190,
            "reason": "(190) Invalid OAuth access token",
            "document_id": None,
            "first_seconds": 10.0,
            "max_seconds": 300.0,
        },
    )
    result = run(database_url, "status")
    assert result.returncode == 1
    assert (
        "sending: PAUSED for every sender since" in result.stdout
        and "WHATSAPP_ACCESS_TOKEN" in result.stdout
    )
