"""The three ways to decide (CLI, Dagster job, review page), each a real entry point:
CLI subprocesses, the job executed into an instance, the webhook service as a process
with the sandbox and Postgres. Each approval pokes delivery, and the person receives
what was approved; a lost race is told who decided and when. The page's guard: no
token, no page; a signed session; a CSRF token in every form."""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from dagster import DagsterInstance

from delivery_pipeline.dagster_defs.jobs import review_document_job
from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep import sweep_sync
from delivery_pipeline.service.sessions import COOKIE_NAME
from delivery_pipeline.testing.service import INTERNAL_TOKEN, start_service
from delivery_pipeline_tests.support.dagster_support import resources_for
from delivery_pipeline_tests.support.data import add_person, document
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.review import awaiting, post_sign_in
from delivery_pipeline_tests.support.waiting import wait_for

REVIEW_TOKEN = "reviewers-only-" + "x" * 24


@pytest.fixture
def service(sandbox, database_url) -> Iterator[object]:
    with start_service(database_url, sandbox.url, REVIEW_TOKEN=REVIEW_TOKEN) as svc:
        yield svc


def reachable(db, sandbox):
    person = add_person(db)
    sandbox.set_window(person["phone"], 60)
    return person


# ── the command line ────────────────────────────────────────────────────


def cli(database_url: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "REVIEW_"))}
    return subprocess.run(
        [sys.executable, "-m", "delivery_pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "DATABASE_URL": database_url, **env},
    )


def test_cli_adds_lists_approves_with_an_edit_and_pokes_delivery(
    db, database_url, sandbox, service, tmp_path
):
    person = reachable(db, sandbox)
    (tmp_path / "generated.txt").write_text("Generated plan.\n\nPart two.")
    added = cli(
        database_url,
        *("documents", "add", "--person", str(person["id"]), "--kind", "plan"),
        *("--file", str(tmp_path / "generated.txt")),
        DELIVERY_REVIEW_KINDS="plan",
    )
    assert added.returncode == 0, added.stderr
    doc_id = int(re.match(r"document (\d+): plan .*, awaiting review$", added.stdout).group(1))
    listed = cli(database_url, "documents", "awaiting-review")
    assert re.search(rf"^{doc_id}\s+plan\s+{person['id']} Ana\s", listed.stdout, re.M), (
        listed.stdout
    )
    (tmp_path / "edit.txt").write_text("Edited plan.\r\n\r\nPart two, reviewed.")

    approved = cli(
        database_url,
        *("documents", "approve", str(doc_id), "--body-file", str(tmp_path / "edit.txt")),
        *("--reviewer", "Rita"),
        DELIVERY_SERVICE_URL=service.url,
        DELIVERY_INTERNAL_TOKEN=INTERNAL_TOKEN,
    )

    assert approved.returncode == 0, approved.stderr
    answer = approved.stdout.strip()
    assert answer.startswith(f"document {doc_id} approved by Rita; delivery poked; "), answer
    assert "delivered at" in answer or "being sent now" in answer, "what became of it"
    wait_for(lambda: document(db, doc_id)["delivered_at"], what="delivery after the poke")
    edited = "Edited plan.\n\nPart two, reviewed."
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(edited)
    assert document(db, doc_id)["body"] == "Generated plan.\n\nPart two."

    again = cli(database_url, "documents", "reject", str(doc_id), "--reason", "too late")
    assert again.returncode == 1
    assert re.match(
        rf"not applied: document {doc_id} was already approved by Rita at \d{{4}}-\d\d-\d\d ",
        again.stderr,
    ), again.stderr


def test_cli_rejects_with_a_reason_and_refuses_bad_input(db, database_url):
    doc_id = awaiting(db)
    no_reason = cli(database_url, "documents", "reject", str(doc_id))
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    blank = cli(database_url, "documents", "reject", str(doc_id), "--reason", "  ")
    assert blank.returncode == 2 and "needs a reason" in blank.stderr
    missing = cli(database_url, "documents", "approve", "999999")
    assert missing.returncode == 2 and "no document 999999" in missing.stderr
    assert document(db, doc_id)["review_decision"] is None

    rejected = cli(
        database_url,
        "documents",
        "reject",
        str(doc_id),
        "--reason",
        "wrong person",
        "--reviewer",
        "Bo",
    )

    assert rejected.returncode == 0, rejected.stderr
    assert rejected.stdout.strip() == f"document {doc_id} rejected by Bo"
    row = document(db, doc_id)
    assert (row["abandon_reason"], row["review_reason"]) == ("rejected", "wrong person")


def test_two_cli_reviewers_at_once_one_wins_the_other_is_told(db, database_url):
    doc_id = awaiting(db)
    commands = [
        ("approve", str(doc_id), "--reviewer", "Ann"),
        ("reject", str(doc_id), "--reason", "no", "--reviewer", "Bo"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "REVIEW_"))}
    env["DATABASE_URL"] = database_url
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "delivery_pipeline.cli", "documents", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for command in commands
    ]
    results = [(p.wait(timeout=60), *p.communicate()) for p in processes]

    assert sorted(code for code, _, _ in results) == [0, 1]
    winner = document(db, doc_id)["reviewed_by"]
    [(_, _, told)] = [r for r in results if r[0] == 1]
    decision = "approved" if winner == "Ann" else "rejected"
    assert f"was already {decision} by {winner} at " in told


# ── the Dagster job ─────────────────────────────────────────────────────


def run_review_job(database_url, service_url, **config):
    with DagsterInstance.ephemeral() as instance:
        return review_document_job.execute_in_process(
            run_config={"ops": {"review_document_op": {"config": config}}},
            resources=resources_for(
                database_url, service_url=service_url, internal_token=INTERNAL_TOKEN
            ),
            instance=instance,
            raise_on_error=False,
        )


def test_dagster_job_approves_with_an_edit_and_delivery_follows(db, database_url, sandbox, service):
    person = reachable(db, sandbox)
    doc_id = awaiting(db, "Generated.", person_id=person["id"])

    result = run_review_job(
        database_url,
        service.url,
        document_id=doc_id,
        decision="approve",
        body="Edited in the Dagster UI.",
        reviewer="Rita",
    )

    assert result.success
    output = result.output_for_node("review_document_op")
    assert (output["decision"], output["reviewer"], output["poked"]) == ("approved", "Rita", True)
    wait_for(lambda: document(db, doc_id)["delivered_at"], what="delivery after the poke")
    assert texts(sandbox.inbox(person["phone"])) == ["Edited in the Dagster UI."]


def test_dagster_job_rejects_and_a_lost_race_fails_the_run_saying_who_won(db, database_url):
    doc_id = awaiting(db)
    rejected = run_review_job(
        database_url, None, document_id=doc_id, decision="reject", reason="off-brand"
    )
    assert rejected.success
    assert document(db, doc_id)["abandon_reason"] == "rejected"
    assert document(db, doc_id)["reviewed_by"] == "dagster"

    late = run_review_job(database_url, None, document_id=doc_id, decision="approve")

    assert not late.success
    [failure] = [e for e in late.all_events if e.is_step_failure]
    assert f"document {doc_id} was already rejected by dagster at" in (
        failure.step_failure_data.user_failure_data.description
    )
    for bad, message in [
        ({"decision": "reject"}, "needs a reason"),
        ({"decision": "maybe"}, "decision must be approve or reject"),
        ({"decision": "reject", "reason": "x", "body": "y"}, "goes with an approval"),
    ]:
        other = awaiting(db)
        run = run_review_job(database_url, None, document_id=other, **bad)
        assert not run.success
        [failure] = [e for e in run.all_events if e.is_step_failure]
        assert message in failure.step_failure_data.user_failure_data.description
        assert document(db, other)["review_decision"] is None


# ── the review page over HTTP ───────────────────────────────────────────


def sign_in(service, name: str = "Rita", token: str = REVIEW_TOKEN) -> httpx.Client:
    client = httpx.Client(base_url=service.url, timeout=10)
    response = post_sign_in(client, name, token)
    assert response.status_code == 303, response.text
    return client


def csrf(client: httpx.Client) -> str:
    page = client.get("/review")
    assert page.status_code == 200
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def test_without_a_review_token_there_is_no_page(sandbox, database_url, db):
    doc_id = awaiting(db)
    with start_service(database_url, sandbox.url) as svc:
        for method, path in [
            ("GET", "/review"),
            ("GET", "/review/sign-in"),
            ("POST", "/review/sign-in"),
            ("POST", f"/review/documents/{doc_id}/approve"),
        ]:
            response = svc.http.request(method, path, data={"token": ""})
            assert response.status_code == 404, (method, path)
            assert "no token is set (REVIEW_TOKEN, REVIEW_TOKENS, OPERATOR_TOKENS)" in response.text
    assert document(db, doc_id)["review_decision"] is None


def test_sign_in_gives_a_strict_http_only_session_and_a_wrong_token_nothing(service, db):
    awaiting(db, "Hello <script>alert(1)</script>", age_seconds=3600)
    anonymous = service.http.get("/review")
    assert anonymous.status_code == 303 and anonymous.headers["location"] == "/review/sign-in"
    refused = post_sign_in(service.http, "Eve", "guess" * 5)
    assert refused.status_code == 401 and COOKIE_NAME not in refused.cookies
    assert "not a reviewer token" in refused.text

    response = post_sign_in(service.http, "Rita", REVIEW_TOKEN)

    assert response.status_code == 303
    cookie = response.headers["set-cookie"]
    for flag in ("HttpOnly", "SameSite=strict", "Path=/review"):
        assert flag.lower() in cookie.lower(), cookie
    client = httpx.Client(base_url=service.url, cookies=response.cookies, timeout=10)
    page = client.get("/review")
    assert page.status_code == 200 and "Awaiting review: 1" in page.text
    assert "waiting <strong>1h 0m</strong>" in page.text
    assert "Hello &lt;script&gt;alert(1)&lt;/script&gt;" in page.text, "the body is escaped"
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none'
    assert "default-src 'none'" in page.headers["content-security-policy"]

    value = response.cookies[COOKIE_NAME]
    payload, signature = value.split(".")
    forged = httpx.Client(
        base_url=service.url, cookies={COOKIE_NAME: payload + "." + "0" * len(signature)}
    )
    assert forged.get("/review").status_code == 303, "a forged session is no session"


def test_a_form_without_the_sessions_csrf_token_decides_nothing(service, db):
    doc_id = awaiting(db)
    client = sign_in(service)
    for data in ({}, {"csrf": "not-the-token"}):
        response = client.post(f"/review/documents/{doc_id}/approve", data=data)
        assert response.status_code == 403
    other = sign_in(service, "Sam")
    stolen = client.post(f"/review/documents/{doc_id}/approve", data={"csrf": csrf(other)})
    assert stolen.status_code == 403, "a token is good for its own session only"
    assert document(db, doc_id)["review_decision"] is None


def test_two_reviewers_on_the_page_at_once_one_wins_and_the_other_sees_who(
    service, db, sandbox, settings
):
    person = reachable(db, sandbox)
    doc_id = awaiting(db, "One plan.", person_id=person["id"])
    rita, sam = sign_in(service, "Rita"), sign_in(service, "Sam")
    forms = [
        (rita, f"/review/documents/{doc_id}/approve", {"csrf": csrf(rita)}),
        (sam, f"/review/documents/{doc_id}/reject", {"csrf": csrf(sam), "reason": "no"}),
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        posted = list(pool.map(lambda f: f[0].post(f[1], data=f[2]), forms))

    assert all(r.status_code == 303 for r in posted)
    results = sorted(r.headers["location"].split("result=")[1] for r in posted)
    assert results == ["already", "decided"]
    row = document(db, doc_id)
    loser = sam if row["reviewed_by"] == "Rita" else rita
    loser_response = posted[0] if loser is rita else posted[1]
    notice = loser.get(loser_response.headers["location"]).text
    assert f"Someone else decided first: document {doc_id} was already" in notice
    assert f"by {row['reviewed_by']} at " in notice
    if row["review_decision"] == "approved":
        # The loser's UPDATE holds the row for an instant after the winner's commit, and
        # the page's targeted sweep skips a locked row: then the heartbeat delivers it.
        sweep_sync(settings, settings.database.database_url)
        wait_for(lambda: document(db, doc_id)["delivered_at"], what="the approved document")
        assert texts(sandbox.inbox(person["phone"])) == ["One plan."]
    else:
        assert row["abandon_reason"] == "rejected"


def test_the_page_approves_an_edit_typed_in_the_browser(service, db, sandbox):
    person = reachable(db, sandbox)
    doc_id = awaiting(db, "Generated.", person_id=person["id"])
    client = sign_in(service)
    edit = "Line one.\r\n\r\nLine two."
    response = client.post(
        f"/review/documents/{doc_id}/approve",
        data={"csrf": csrf(client), "body": edit, "note": "tone"},
    )
    assert response.status_code == 303
    assert f"Document {doc_id} approved by Rita." in client.get(response.headers["location"]).text
    wait_for(lambda: document(db, doc_id)["delivered_at"], what="delivery of the edit")
    assert texts(sandbox.inbox(person["phone"])) == ["Line one.\n\nLine two."]
    empty = awaiting(db)
    refused = client.post(
        f"/review/documents/{empty}/approve", data={"csrf": csrf(client), "body": " \r\n"}
    )
    assert refused.status_code == 400 and "edited text is empty" in refused.text


@pytest.mark.parametrize(
    "document", ["²", "١٢", "12a", "-1", "", "99999999999999999999", "1e3", "%00"]
)
def test_a_notice_for_a_document_id_the_page_never_wrote_is_ignored(service, db, document):
    """?document= is the page's own redirect; anything but an id it could have written
    (a non-ASCII digit, a number past bigint, garbage) shows the list without a notice."""
    doc_id = awaiting(db, "Still waiting.")
    client = sign_in(service)

    page = client.get("/review", params={"document": document, "result": "decided"})

    assert page.status_code == 200
    assert f"Document {doc_id}" in page.text and 'role="status"' not in page.text
