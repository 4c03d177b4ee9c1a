"""One alert per cause, resolved once: the bad days of issue 37, counted at the ops channel.

Real processes and the real order of things: the sandbox refuses a token or
pauses a template (and posts the lifecycle webhook), the webhook service
applies it, the engine sweeps, an operator runs ``delivery-pipeline resume``
as a subprocess, the ``delivery_checks`` job evaluates every check into a
Dagster instance, and the alert sensors tick. What reached the ops channel is
what the sandbox's ops endpoint received.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dagster import DagsterInstance

from delivery_pipeline_tests.support import cli
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body, state_of
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.inbox import knocks
from delivery_pipeline_tests.support.waiting import wait_for
from delivery_pipeline_tests.support.watcher import Watcher

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::dagster.BetaWarning")]


@pytest.fixture
def service(sandbox, settings) -> Iterator[Any]:
    with hooked_service(sandbox, settings.database.database_url) as svc:
        yield svc


@pytest.fixture
def watcher(settings, sandbox, service) -> Iterator[Watcher]:
    with DagsterInstance.ephemeral() as instance:
        yield Watcher(instance, settings, sandbox, service.url)


def checks_and_ticks(watcher: Watcher, times: int = 2) -> None:
    """What the daemon does meanwhile: the backlog's and the checks' schedules, the
    run-status sensors after each run (a red checks run too), the alert sensor."""
    for _ in range(times):
        watcher.run_ended(watcher.refresh_backlog())
        result, _ = watcher.run_checks()
        watcher.run_ended(result)
        watcher.tick()
        watcher.tick()


def episode_rows(db) -> list[tuple[str, str]]:
    rows = db.execute(
        "SELECT dedup_key, kind FROM ops_alerts WHERE sent_at IS NOT NULL ORDER BY id"
    ).fetchall()
    return [(r["dedup_key"], r["kind"]) for r in rows]


@pytest.mark.parametrize("fixed_by", ["delivery-pipeline resume", "the next probe"])
def test_a_refused_token_pauses_once_and_is_resolved_once(db, settings, sandbox, watcher, fixed_by):
    # 04:14: WhatsApp refuses the token (190); the sweep pauses every sender.
    sandbox.refuse(190)
    person = add_person(db)
    sandbox.set_window(person["phone"], 60)
    doc = add_document(db, person["id"], plan_body(2))
    sweep(settings)
    assert state_of(db, doc["id"]) == "undelivered"

    # The daemon's checks see the pause, the sensor posts: one alert, whoever saw it.
    checks_and_ticks(watcher)
    [paused] = watcher.posts()
    assert paused.startswith(":red_circle: *ERROR* Sending is paused for every sender")
    assert "190" in paused

    # The last checks run before the fix: its result says "paused"…
    watcher.run_checks()
    # …04:21: the token is fixed, and sending resumes.
    sandbox.clear_refusals()
    if fixed_by == "delivery-pipeline resume":
        done = cli.run(settings.database.database_url, "resume", "--by", "olga")
        assert done.returncode == 0, done.stderr
    else:
        db.execute("UPDATE sender_state SET next_probe_at = now() WHERE phone_number_id = '*'")
        sweep(settings)
    assert state_of(db, doc["id"]) in ("undelivered", "delivered")

    # 04:22: the sensor reads that result from before the resume: it reopens nothing.
    watcher.tick()
    watcher.tick()
    # And the days goes on: checks run, the sensor ticks, the document goes out.
    sweep(settings)
    checks_and_ticks(watcher)
    assert state_of(db, doc["id"]) == "delivered"

    posts = watcher.posts()
    assert len(posts) == 2, posts
    assert posts[1].startswith(":white_check_mark: *resolved* Sending resumed for every sender")
    assert episode_rows(db) == [
        ("check:sender_paused", "alert"),
        ("check:sender_paused", "resolved"),
    ]


@pytest.mark.parametrize("back_by", ["its webhook", "its pause ending by itself"])
def test_a_paused_template_is_one_alert_resolved_once(db, settings, sandbox, watcher, back_by):
    # The template pauses: its webhook reaches the service (the engine's report).
    sandbox.template("document_ready", "en", status="PAUSED", reason="LOW_QUALITY")
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM message_templates WHERE name = 'document_ready' AND status = 'PAUSED'"
        ).fetchone(),
        what="the pause webhook applied",
    )
    # A person outside the window: the knock is held (en has no other template).
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    sweep(settings)
    assert state_of(db, doc["id"]) == "knock_held"

    # Template check, knocks-held check, the webhook, the held knock, a red checks run:
    # one alert.
    checks_and_ticks(watcher, times=3)
    [paused] = watcher.posts()
    assert paused.startswith(":red_circle: *ERROR* WhatsApp says the template document_ready")

    # The template comes back.
    if back_by == "its webhook":
        sandbox.template("document_ready", "en", status="APPROVED")
        wait_for(
            lambda: db.execute(
                "SELECT 1 FROM message_templates WHERE name = 'document_ready' "
                "AND status = 'APPROVED'"
            ).fetchone(),
            what="the approval webhook applied",
        )
    else:
        sandbox.template("document_ready", "en", status="APPROVED", webhook=False)
        db.execute(
            "UPDATE message_templates SET status_at = status_at - interval '3 hours 1 minute', "
            "paused_until = paused_until - interval '3 hours 1 minute'"
        )
        db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = %(id)s", doc)
    # The approval webhook wakes the held knock and the service may send it itself before
    # this sweep claims it: either way one knock reaches the phone, perhaps just after.
    sweep(settings)
    sent = wait_for(
        lambda: knocks(sandbox.inbox(person["phone"])), what="the knock on the approved template"
    )
    assert [k["name"] for k in sent] == ["document_ready"]
    checks_and_ticks(watcher, times=3)

    posts = watcher.posts()
    assert len(posts) == 2, posts
    assert posts[1].startswith(
        ":white_check_mark: *resolved* Check `knock_template_document_ready_en`"
    )
    assert episode_rows(db) == [
        ("template:document_ready:en", "alert"),
        ("template:document_ready:en", "resolved"),
    ]
