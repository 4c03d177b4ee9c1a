"""Documents where a person looks, and answers that say what will actually happen.

Each command a real subprocess against real Postgres (the sandbox and the webhook
service real where a command's answer depends on them): ``documents show``
leads with the state, its owner, why it waits and until when; ``documents list``
finds documents by state, person, kind and age; ``documents add`` says when the
document goes and what it supersedes; ``documents resend`` says what became of
it; ``status | head`` ends quietly; the template columns of ``status`` are
filled by the first accepted knock.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from delivery_pipeline.testing.service import APP_SECRET, start_service
from delivery_pipeline_tests.support.cli import REPO, run
from delivery_pipeline_tests.support.data import add_document, add_person, document, plan_body
from delivery_pipeline_tests.support.engine import hooked_service
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.engine


def quiet_now(db, person_id: int) -> str:
    """Quiet hours for the person that began an hour ago and end in two (UTC)."""
    now = db.execute("SELECT now() AT TIME ZONE 'UTC' AS t").fetchone()["t"]
    hours = f"{now - dt.timedelta(hours=1):%H:%M}-{now + dt.timedelta(hours=2):%H:%M}"
    db.execute(
        "UPDATE people SET quiet_hours = %(q)s, last_inbound_at = now() - interval '1 hour' "
        "WHERE id = %(id)s",
        {"q": hours, "id": person_id},
    )
    return hours


def lines(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


# ── documents add: when it will go ──────────────────────────────────────


def test_added_in_the_persons_quiet_hours_says_when_it_will_go(database_url, db):
    person = add_person(db, inbound_age_seconds=3600)
    hours = quiet_now(db, person["id"])
    ends = hours.split("-")[1]
    [answer] = lines(
        run(database_url, "documents", "add", "--person", str(person["id"]), stdin="A plan.")
    )
    assert answer.startswith("document ") and f"for person {person['id']}" in answer
    assert f"waits for the end of their quiet hours ({hours} UTC)" in answer
    assert f" {ends} UTC (in 1h 5" in answer or f" {ends} UTC (in 1h 59m" in answer
    assert "ready for delivery now" not in answer


def test_added_says_a_knock_comes_first_and_what_it_supersedes(database_url, db):
    person = add_person(db, inbound_age_seconds=None)  # never wrote: window closed
    first = run(database_url, "documents", "add", "--person", str(person["id"]), stdin="Plan 1.")
    assert "their 24 h window is closed, so they get a knock first" in first.stdout
    first_id = int(first.stdout.split()[1].rstrip(":"))
    [second] = lines(
        run(database_url, "documents", "add", "--person", str(person["id"]), stdin="Plan 2.")
    )
    assert f"it supersedes document {first_id} (the same kind and day, not sent yet)" in second

    listed = json.loads(
        run(database_url, "documents", "list", "--person", str(person["id"]), "--json").stdout
    )
    assert [(d["id"], d["state"]) for d in listed][1] == (first_id, "undelivered")
    assert listed[1]["why"].startswith(f"superseded by document {listed[0]['id']}")


def test_added_in_the_window_is_ready_now(database_url, db):
    person = add_person(db)
    [answer] = lines(
        run(database_url, "documents", "add", "--person", str(person["id"]), stdin="A plan.")
    )
    assert answer.endswith("ready for delivery now")


# ── documents show: the state first ─────────────────────────────────────


def test_show_leads_with_the_state_its_owner_why_and_until(database_url, db, sandbox):
    person = add_person(db, name="Bia", inbound_age_seconds=3600)
    hours = quiet_now(db, person["id"])
    doc = add_document(db, person["id"], "A plan.")
    held = run(  # held for the night
        database_url, "sweep", "--document", str(doc["id"]), WHATSAPP_API_BASE_URL=sandbox.url
    )
    assert held.returncode == 0, held.stderr
    out = lines(run(database_url, "documents", "show", str(doc["id"])))
    assert out[0] == f"document {doc['id']}: plan for person {person['id']} Bia ({person['phone']})"
    assert out[1].startswith("state:  quiet_hours since ")
    assert out[2] == "owner:  the clock"
    assert out[3] == f"why:    the person's quiet hours ({hours} UTC): it goes out when they end"
    assert out[4].startswith("until:  ") and "UTC (in 1h 5" in out[4]
    assert "detail:" in out and "  status: succeeded" in out, "the detail follows"

    shown = json.loads(run(database_url, "documents", "show", str(doc["id"]), "--json").stdout)
    assert list(shown) == ["state", "document", "chunks", "actions"]
    assert shown["state"]["state"] == "quiet_hours" and shown["state"]["owner"] == "the clock"
    assert shown["state"]["until"] is not None and shown["document"]["id"] == doc["id"]


@pytest.mark.parametrize(
    "args",
    [
        ("documents", "show", "99999"),
        ("documents", "resend", "99999"),
        ("documents", "cancel", "99999"),
    ],
    ids=" ".join,
)
def test_an_unknown_id_points_to_the_list_not_to_itself(database_url, args):
    result = run(database_url, *args)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: no document 99999: ")
    assert "documents list" in line and "documents show" not in line


# ── documents list ──────────────────────────────────────────────────────


def test_list_filters_by_state_person_kind_and_age(database_url, db):
    ana = add_person(db, name="Ana")
    bia = add_person(db, name="Bia", inbound_age_seconds=None)
    plan = add_document(db, ana["id"], "Plan.")
    brief = add_document(db, ana["id"], "Brief.", kind="daily_brief", for_date=dt.date.today())
    old = add_document(db, bia["id"], "Old plan.")
    db.execute(
        "UPDATE documents SET delivered_at = now(), created_at = now() - interval '3 days' "
        "WHERE id = %(id)s",
        old,
    )

    def ids(*args: str) -> list[int]:
        return [
            d["id"]
            for d in json.loads(run(database_url, "documents", "list", *args, "--json").stdout)
        ]

    assert ids() == [old["id"], brief["id"], plan["id"]]
    assert ids("--state", "delivered") == [old["id"]]
    assert ids("--person", str(ana["id"])) == [brief["id"], plan["id"]]
    assert ids("--person", ana["phone"], "--kind", "daily_brief") == [brief["id"]]
    assert ids("--since", "1d") == [brief["id"], plan["id"]]
    assert ids("--since", (dt.date.today() - dt.timedelta(days=7)).isoformat(), "--limit", "1") == [
        old["id"]
    ]

    table = lines(run(database_url, "documents", "list", "--state", "undelivered"))
    assert table[0].split() == [
        "id",
        "kind",
        "person",
        "state",
        "owner",
        "since",
        "until",
        "way",
        "why",
    ]
    assert len(table) == 3 and all(" delivery " in row for row in table[1:])

    for bad, says in (("--state", "lost"), ("--since", "yesterday"), ("--kind", "memo")):
        result = run(database_url, "documents", "list", bad, says)
        assert result.returncode == 2 and result.stderr.startswith("error: "), result.stderr


# ── documents resend: what became of it ──────────────────────────────────


def test_resend_without_a_poke_says_what_actually_happened(database_url, db, sandbox):
    person = add_person(db)
    sandbox.set_window(person["phone"], 60)
    env = {"WHATSAPP_API_BASE_URL": sandbox.url, "DELIVERY_INTERNAL_TOKEN": ""}
    with start_service(database_url, sandbox.url) as service:
        sandbox.faults(webhook_url=service.webhook_url, app_secret=APP_SECRET)
        doc = add_document(db, person["id"], plan_body(2))
        wait_for(lambda: document(db, doc["id"])["delivered_at"], what="the first delivery")
        # No DELIVERY_INTERNAL_TOKEN: no poke. The listening service takes it anyway.
        [answer] = lines(run(database_url, "documents", "resend", str(doc["id"]), **env))
    assert "heartbeat will deliver it" not in answer
    assert "no poke" in answer and "delivered at" in answer, answer

    # Nothing listening: it says so, and what will deliver it.
    [answer] = lines(run(database_url, "documents", "resend", str(doc["id"]), **env))
    assert "nothing took it within 3 s" in answer
    assert f"delivery-pipeline sweep --document {doc['id']}" in answer


# ── status ──────────────────────────────────────────────────────────────


def test_status_into_a_closed_pipe_ends_without_a_traceback(database_url, db):
    for _ in range(3):
        add_document(db, add_person(db)["id"], "A plan.")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: `status | head -0`
    result = subprocess.run(
        [sys.executable, "-m", "delivery_pipeline.cli", "status"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=REPO,
    )
    os.close(write)
    assert result.stderr == "", result.stderr
    assert result.returncode == 141


def test_status_knows_a_template_it_has_just_sent_is_approved(database_url, db, sandbox):
    person = add_person(db, inbound_age_seconds=None)
    add_document(db, person["id"], plan_body(2))
    before = json.loads(run(database_url, "status", "--json").stdout)["knock_templates"][0]
    assert (before["status"], before["quality"], before["category"]) == (None, None, None)
    with hooked_service(sandbox, database_url):
        swept = run(database_url, "sweep", WHATSAPP_API_BASE_URL=sandbox.url)
        assert swept.returncode == 0, swept.stderr
        wait_for(
            lambda: db.execute("SELECT 1 FROM message_pricing WHERE part = 'knock'").fetchone(),
            what="the knock's priced status",
        )
    template = json.loads(run(database_url, "status", "--json").stdout)["knock_templates"][0]
    assert (template["name"], template["language"]) == ("document_ready", "en")
    assert (template["status"], template["quality"], template["category"]) == (
        "APPROVED",
        "UNKNOWN",
        "UTILITY",
    )
    table = run(database_url, "status").stdout
    [row] = [line for line in table.splitlines() if line.startswith("document_ready  en ")]
    assert row.split()[2:6] == ["ok", "APPROVED", "UNKNOWN", "UTILITY"]
