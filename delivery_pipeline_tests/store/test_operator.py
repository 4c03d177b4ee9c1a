"""Priority, supersede, cancel and resend (sql/migrations/025, store/operator.py), through the
production path: `sweep` and `documents cancel|resend` as real processes, real
Postgres, the sandbox over HTTP."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline_tests.support import cli
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    chunks,
    document,
    plan_body,
)
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
LIMIT = 300  # small parts: many of them, quickly


def _env(settings, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": settings.database.database_url,
        "WHATSAPP_API_BASE_URL": settings.whatsapp.api_base_url,
        "WHATSAPP_THROUGHPUT_LIMIT": "2000",
        "DELIVERY_BACKOFF_BASE_SECONDS": "0",
        "DELIVERY_CHUNK_LIMIT": str(LIMIT),
        **extra,
    }


def _sweep(settings, *args: str, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json", *args],
        env=_env(settings, **extra),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs: list[subprocess.Popen]) -> None:
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]


def _cli(settings, *args: str) -> subprocess.CompletedProcess:
    return cli.run(settings.database.database_url, *args, **_env(settings))


def _open_window(db, sandbox, person: dict[str, Any]) -> None:
    sandbox.say(person["phone"], "hi")
    db.execute("UPDATE people SET last_inbound_at = now() WHERE id = %s", (person["id"],))


def _plan(db, person: dict[str, Any], parts: int, tag: str, **kwargs: Any) -> tuple[int, list[str]]:
    body = plan_body(parts, chunk_limit=LIMIT, tag=tag)
    doc = add_document(db, person["id"], body, **kwargs)
    return doc["id"], delivery_messages(body, LIMIT)


def _abandon_reason(db, document_id: int) -> str | None:
    return document(db, document_id)["abandon_reason"]


def _one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ── priority ────────────────────────────────────────────────────────────


def test_a_requested_plan_goes_before_the_days_brief(db, sandbox, settings):
    """For one person a plan (asked for) goes before a daily brief generated earlier;
    the brief follows, whole."""
    person = add_person(db)
    _open_window(db, sandbox, person)
    today = dt.datetime.now(dt.UTC).date()
    brief, brief_parts = _plan(db, person, 3, "brief ", kind="daily_brief", for_date=today)
    plan, plan_parts = _plan(db, person, 3, "plan ")
    assert document(db, brief)["generated_at"] < document(db, plan)["generated_at"]

    _finish([_sweep(settings) for _ in range(2)])

    assert texts(sandbox.inbox(person["phone"])) == plan_parts + brief_parts
    assert document(db, brief)["delivered_at"] > document(db, plan)["delivered_at"]


def test_a_begun_brief_is_finished_before_a_plan(db, sandbox, settings):
    """A brief whose first parts went out before its sender died is finished whole
    before a plan that arrived meanwhile: never cut in half."""
    person = add_person(db)
    _open_window(db, sandbox, person)
    today = dt.datetime.now(dt.UTC).date()
    brief, brief_parts = _plan(db, person, 6, "brief ", kind="daily_brief", for_date=today)
    proc = _sweep(settings, DELIVERY_CHUNK_INTERVAL_SECONDS="0.5")
    try:
        wait_for(
            lambda: sum(c["state"] == "sent" for c in chunks(db, brief)) >= 2,
            what="two parts of the brief sent",
        )
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    sent_before = len(texts(sandbox.inbox(person["phone"])))
    assert 2 <= sent_before < 6
    plan, plan_parts = _plan(db, person, 3, "plan ")
    # The dead sender's claim lapses (as after DELIVERY_LEASE_SECONDS).
    db.execute(
        "UPDATE documents SET claimed_at = now() - interval '1 hour' WHERE id = %s", (brief,)
    )

    # A part in the air when it died is resent at once (the default policy, no grace).
    _finish([_sweep(settings, DELIVERY_UNKNOWN_GRACE_SECONDS="0") for _ in range(2)])

    got = texts(sandbox.inbox(person["phone"]))
    # Whatever part was in the air when the sender died may arrive twice (the
    # unknown-outcome policy), but the brief is whole before the plan begins.
    assert set(got[: got.index(plan_parts[0])]) == set(brief_parts)
    assert got[got.index(plan_parts[0]) :] == plan_parts


# ── supersede ───────────────────────────────────────────────────────────


@pytest.mark.slow
def test_supersede_racing_a_sender_in_flight(db, sandbox, settings):
    """Newer plans arrive while three sweep processes send the older ones: every older
    plan is either delivered whole (before the newer one) or never started and
    abandoned as superseded; the newer one is always delivered whole.

    Group "before": the newer plan is ready before any sweep starts, so the older
    is superseded. Group "after": the newer one arrives once the older one's first
    part is out, so the older is finished. Group "racing": in between, any moment."""
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0, latency_ms=60)
    groups: dict[str, list[dict[str, Any]]] = {"before": [], "after": [], "racing": []}
    for name, members in groups.items():
        for i in range(6):
            person = add_person(db)
            _open_window(db, sandbox, person)
            old, old_parts = _plan(db, person, 5, f"{name} {i} old ")
            members.append({"person": person, "old": old, "old_parts": old_parts})

    def newer(member: dict[str, Any], name: str) -> None:
        member["new"], member["new_parts"] = _plan(db, member["person"], 2, f"{name} new ")

    for member in groups["before"]:
        newer(member, "before")
    procs = [_sweep(settings, "--concurrency", "8") for _ in range(3)]
    try:
        for member in groups["racing"]:
            newer(member, "racing")
            time.sleep(0.05)
        for member in groups["after"]:
            # Three sweep processes start up first: on a loaded machine that
            # alone can take longer than wait_for's default.
            wait_for(
                lambda m=member: any(c["state"] == "sent" for c in chunks(db, m["old"])),
                timeout=90,
                what="the older plan's first part sent",
            )
            newer(member, "after")
    finally:
        _finish(procs)
    # The newer plans that arrived after a sweep had gone idle.
    _finish([_sweep(settings)])

    outcomes: dict[str, list[str]] = {}
    for name, members in groups.items():
        for m in members:
            got = texts(sandbox.inbox(m["person"]["phone"]))
            reason = _abandon_reason(db, m["old"])
            if reason == "superseded":
                assert got == m["new_parts"], name
                assert chunks(db, m["old"]) == [] or all(
                    c["state"] == "pending" for c in chunks(db, m["old"])
                )
                outcomes.setdefault(name, []).append("superseded")
            else:
                assert reason is None and document(db, m["old"])["delivered_at"], name
                assert got == m["old_parts"] + m["new_parts"], name
                outcomes.setdefault(name, []).append("whole")
            assert document(db, m["new"])["delivered_at"] is not None
    assert set(outcomes["before"]) == {"superseded"}
    assert set(outcomes["after"]) == {"whole"}


def test_a_plan_for_another_day_is_not_superseded(db, sandbox, settings):
    """Same kind, another day: two documents, both delivered."""
    person = add_person(db)
    _open_window(db, sandbox, person)
    today = dt.datetime.now(dt.UTC).date()
    first, first_parts = _plan(db, person, 2, "monday ", for_date=today)
    second, second_parts = _plan(db, person, 2, "tuesday ", for_date=today + dt.timedelta(1))
    _finish([_sweep(settings)])
    assert texts(sandbox.inbox(person["phone"])) == first_parts + second_parts


# ── cancel ──────────────────────────────────────────────────────────────


@pytest.mark.slow
def test_cancel_racing_sweeps(db, sandbox, settings):
    """Operators cancel documents while three sweep processes deliver them. Each cancel
    either wins (abandoned `cancelled`; the person got a prefix of its parts, at most
    the one in the air after the cancel) or finds it delivered whole (exit 1, one
    line naming the resend). The documents nobody cancelled arrive whole."""
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0, latency_ms=40)
    docs = []
    for i in range(24):
        person = add_person(db)
        _open_window(db, sandbox, person)
        doc, parts = _plan(db, person, 6, f"doc {i} ")
        docs.append({"id": doc, "parts": parts, "phone": person["phone"]})
    targets = docs[::2]
    results: dict[int, subprocess.CompletedProcess] = {}

    def cancel(doc: dict[str, Any]) -> None:
        results[doc["id"]] = _cli(settings, "documents", "cancel", str(doc["id"]), "--reason", "t")

    # A pause between parts: documents are mid-flight while the cancels arrive.
    procs = [
        _sweep(settings, "--concurrency", "6", DELIVERY_CHUNK_INTERVAL_SECONDS="0.3")
        for _ in range(3)
    ]
    try:
        threads = []
        for doc in targets:
            threads.append(threading.Thread(target=cancel, args=(doc,)))
            threads[-1].start()
            time.sleep(0.15)
        for thread in threads:
            thread.join()
    finally:
        _finish(procs)

    won = lost = 0
    for doc in docs:
        got = texts(sandbox.inbox(doc["phone"]))
        row = document(db, doc["id"])
        if doc not in targets:
            assert got == doc["parts"] and row["delivered_at"] is not None
            continue
        result = results[doc["id"]]
        if result.returncode == 0:
            won += 1
            assert row["abandon_reason"] == "cancelled" and row["delivered_at"] is None
            assert got == doc["parts"][: len(got)]
            action = db.execute(
                "SELECT parts_sent FROM document_actions WHERE document_id = %s", (doc["id"],)
            ).fetchone()
            # Nothing went out after the cancel but the part already fenced (in the
            # air), which the cancel counted.
            assert len(got) == action["parts_sent"]
            ledger_sent = sum(c["state"] == "sent" for c in chunks(db, doc["id"]))
            assert ledger_sent == len(got)
        else:
            lost += 1
            assert result.returncode == 1
            assert "already delivered" in _one_line(result)
            assert f"documents resend {doc['id']}" in result.stderr
            assert got == doc["parts"] and row["abandon_reason"] is None
    assert won > 0  # the race has both outcomes unless the machine is very fast or slow
    assert won + lost == len(targets)


def test_cancel_before_delivery_sends_nothing_and_is_recorded(db, sandbox, settings):
    person = add_person(db)
    _open_window(db, sandbox, person)
    doc, _ = _plan(db, person, 3, "never ")
    result = _cli(
        settings, "documents", "cancel", str(doc), "--operator", "ops-ana", "--reason", "wrong plan"
    )
    assert result.returncode == 0, result.stderr
    assert f"document {doc} cancelled (was undelivered)" in result.stdout
    _finish([_sweep(settings)])
    assert sandbox.inbox(person["phone"]) == []
    row = document(db, doc)
    assert row["abandon_reason"] == "cancelled"
    assert row["last_delivery_error"] == "cancelled by ops-ana: wrong plan"
    action = db.execute("SELECT * FROM document_actions WHERE document_id = %s", (doc,)).fetchone()
    assert (action["action"], action["operator"], action["reason"], action["from_state"]) == (
        "cancel",
        "ops-ana",
        "wrong plan",
        "undelivered",
    )


# ── resend ──────────────────────────────────────────────────────────────


@pytest.mark.slow
def test_resend_racing_sweeps(db, sandbox, settings):
    """Delivered documents are resent while three sweep processes deliver new ones (and
    pick up the resent ones): each resent document arrives a second time, every part,
    in order, once; the new ones arrive once; the first delivery's ledger is kept."""
    sandbox.faults(pair_rate_enabled=False, throughput_limit=0, latency_ms=30)
    first = []
    for i in range(10):
        person = add_person(db)
        _open_window(db, sandbox, person)
        doc, parts = _plan(db, person, 4, f"first {i} ")
        first.append({"id": doc, "parts": parts, "person": person})
    _finish([_sweep(settings)])
    wamids = {d["id"]: [c["wa_message_id"] for c in chunks(db, d["id"])] for d in first}
    fresh = []
    for i, d in enumerate(first):
        doc, parts = _plan(db, d["person"], 4, f"fresh {i} ", for_date=dt.date(2030, 1, 1))
        fresh.append({"id": doc, "parts": parts})
    results: dict[int, subprocess.CompletedProcess] = {}

    def resend(doc_id: int) -> None:
        results[doc_id] = _cli(settings, "documents", "resend", str(doc_id))

    procs = [_sweep(settings, "--concurrency", "6") for _ in range(3)]
    try:
        threads = [threading.Thread(target=resend, args=(d["id"],)) for d in first]
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join()
    finally:
        _finish(procs)
    _finish([_sweep(settings)])  # resends committed after the sweeps went idle

    for d, f in zip(first, fresh, strict=True):
        result = results[d["id"]]
        assert result.returncode == 0, result.stderr
        assert "queued to be sent again" in result.stdout
        got = texts(sandbox.inbox(d["person"]["phone"]))
        assert sorted(got) == sorted(d["parts"] * 2 + f["parts"])
        # The second copy in order, whole (never interleaved with the fresh plan).
        again = [k for k, t in enumerate(got) if t in d["parts"] and t in got[:k]]
        assert [got[k] for k in again] == d["parts"]
        assert again == list(range(again[0], again[0] + len(d["parts"])))
        assert all(c["state"] == "sent" for c in chunks(db, d["id"]))
        assert document(db, d["id"])["delivered_at"] is not None
        action = db.execute(
            "SELECT * FROM document_actions WHERE document_id = %s", (d["id"],)
        ).fetchone()
        assert action["action"] == "resend" and action["from_state"] == "delivered"
        assert [c["wa_message_id"] for c in action["ledger"]] == wamids[d["id"]]
        assert [c["wa_message_id"] for c in chunks(db, d["id"])] != wamids[d["id"]]


# ── expected failures: one line that says what to do ─────────────────────


def test_cli_expected_failures_are_one_line(db, sandbox, settings):
    person = add_person(db)
    _open_window(db, sandbox, person)
    doc, _ = _plan(db, person, 2, "x ")

    unknown = _cli(settings, "documents", "cancel", "999999")
    assert unknown.returncode == 2
    assert "no document 999999" in _one_line(unknown)
    assert _cli(settings, "documents", "resend", "999999").returncode == 2

    not_yet = _cli(settings, "documents", "resend", str(doc))
    assert not_yet.returncode == 1
    assert f"documents cancel {doc}" in _one_line(not_yet)

    # A sender holds a live claim: a resend never races it.
    db.execute(
        "UPDATE documents SET claim_token = gen_random_uuid(), claimed_at = now() WHERE id = %s",
        (doc,),
    )
    busy = _cli(settings, "documents", "resend", str(doc))
    assert busy.returncode == 1 and "being sent right now" in _one_line(busy)
    db.execute("UPDATE documents SET claim_token = NULL, claimed_at = NULL WHERE id = %s", (doc,))

    _finish([_sweep(settings)])
    delivered = _cli(settings, "documents", "cancel", str(doc))
    assert delivered.returncode == 1
    assert "already delivered" in _one_line(delivered)
    assert f"documents resend {doc}" in delivered.stderr
    assert db.execute("SELECT count(*) AS n FROM document_actions").fetchone()["n"] == 0

    other, _ = _plan(db, person, 2, "y ", for_date=dt.date(2030, 1, 2))
    assert _cli(settings, "documents", "cancel", str(other)).returncode == 0
    twice = _cli(settings, "documents", "cancel", str(other))
    assert twice.returncode == 1 and "already abandoned (cancelled" in _one_line(twice)


# ── the Dagster job ─────────────────────────────────────────────────────


def _operate(database_url: str, **config: Any):
    from dagster import DagsterInstance

    from delivery_pipeline.dagster_defs.jobs import operate_document_job
    from delivery_pipeline_tests.support.dagster_support import resources_for

    with DagsterInstance.ephemeral() as instance:
        return operate_document_job.execute_in_process(
            run_config={"ops": {"operate_document_op": {"config": config}}},
            resources=resources_for(database_url),
            instance=instance,
            raise_on_error=False,
        )


def test_the_dagster_job_cancels_and_resends(db, database_url, sandbox, settings):
    person = add_person(db)
    _open_window(db, sandbox, person)
    sent, parts = _plan(db, person, 2, "job ")
    doomed, _ = _plan(db, person, 2, "doomed ", for_date=dt.date(2030, 1, 3))

    cancelled = _operate(database_url, document_id=doomed, action="cancel", reason="no longer")
    assert cancelled.success
    output = cancelled.output_for_node("operate_document_op")
    assert (output["action"], output["operator"], output["from_state"]) == (
        "cancel",
        "dagster",
        "undelivered",
    )
    _finish([_sweep(settings)])
    assert texts(sandbox.inbox(person["phone"])) == parts

    late = _operate(database_url, document_id=doomed, action="cancel")
    assert not late.success
    told = [str(e.event_specific_data) for e in late.all_events if e.is_failure]
    assert any("already abandoned (cancelled" in t for t in told), told

    resent = _operate(database_url, document_id=sent, action="resend", operator="Rita")
    assert resent.success and resent.output_for_node("operate_document_op")["parts_sent"] == 2
    _finish([_sweep(settings)])
    assert texts(sandbox.inbox(person["phone"])) == parts + parts

    wrong = _operate(database_url, document_id=sent, action="delete")
    assert not wrong.success
