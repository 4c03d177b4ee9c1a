"""Who may do what, through real processes: the webhook service (its review page and
its API), the CLI as subprocesses, the sandbox and Postgres.

Reviewing and operating are two rights: a reviewer (``REVIEW_TOKEN``, shared, or a
token of their own in ``REVIEW_TOKENS``) approves and rejects; only an operator
(``OPERATOR_TOKENS``) cancels and resends. A token of one's own says whose name the
decisions are kept under. A document is resent at most ``DELIVERY_RESENDS_PER_DAY``
times within 24 hours, whoever asks: the page, the CLI, the API. An edited text is
held to the limit of any document.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.service.sessions import COOKIE_NAME
from delivery_pipeline.store.intake import BODY_MAX_CHARACTERS
from delivery_pipeline.testing.service import ServiceProcess, start_service
from delivery_pipeline_tests.support import cli
from delivery_pipeline_tests.support.api import AUTH, api_env, plan
from delivery_pipeline_tests.support.data import add_document, add_person, document
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.review import awaiting, post_sign_in
from delivery_pipeline_tests.support.waiting import wait_for

BODY = "Your plan.\n\nStep one."
SHARED = "the-shared-reviewer-token-0123"
ANA = "ana-own-reviewer-token-0123456"
OLGA = "olga-operator-token-0123456789"
RIGHTS = {
    "REVIEW_TOKEN": SHARED,
    "REVIEW_TOKENS": f"Ana={ANA}",
    "OPERATOR_TOKENS": f"Olga={OLGA}",
}


@pytest.fixture
def service(sandbox, database_url) -> Iterator[ServiceProcess]:
    env = {**RIGHTS, **api_env(), "DELIVERY_RESENDS_PER_DAY": "3"}
    with start_service(database_url, sandbox.url, **env) as svc:
        yield svc


def sign_in(service: ServiceProcess, token: str, name: str = "") -> httpx.Client:
    client = httpx.Client(base_url=service.url, timeout=30)
    response = post_sign_in(client, name, token)
    assert response.status_code == 303, response.text
    return client


def csrf(client: httpx.Client) -> str:
    page = client.get("/review")
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def operate(client: httpx.Client, document_id: int, action: str) -> httpx.Response:
    form = {"csrf": csrf(client), "document_id": str(document_id), "action": action}
    return client.post("/review/operate", data=form)


def notice(page: httpx.Response) -> str:
    found = re.search(r'<p class="notice [a-z]+" role="status">([^<]*)</p>', page.text)
    assert found is not None, page.text
    return html.unescape(found.group(1))


def test_a_reviewer_may_not_cancel_or_resend_an_operator_may(db, service):
    doomed = awaiting(db, "A plan nobody should get.")
    for token, name in ((SHARED, "Rita"), (ANA, "")):
        reviewer = sign_in(service, token, name)
        page = reviewer.get("/review")
        assert 'action="/review/operate"' not in page.text, "no form to cancel or resend"
        refused = operate(reviewer, doomed, "cancel")
        assert refused.status_code == 403
        assert notice(refused).startswith("Cancel and resend are an operator's: sign in")
    assert document(db, doomed)["abandoned_at"] is None
    assert db.execute("SELECT count(*) AS n FROM document_actions").fetchone()["n"] == 0

    olga = sign_in(service, OLGA)
    assert 'action="/review/operate"' in olga.get("/review").text
    done = operate(olga, doomed, "cancel")
    assert done.status_code == 200
    assert notice(done) == f"Document {doomed} cancelled (was awaiting_review)."
    action = db.execute("SELECT operator FROM document_actions").fetchone()
    assert action == {"operator": "Olga"}


def test_a_token_of_ones_own_says_who_signs_in(db, service):
    first, second = awaiting(db, "First."), awaiting(db, "Second.")
    # whatever name the form gives, Ana's token signs Ana in
    ana = sign_in(service, ANA, "Mallory")
    assert "Signed in as Ana</span>" in ana.get("/review").text
    approved = ana.post(f"/review/documents/{first}/approve", data={"csrf": csrf(ana)})
    assert approved.status_code == 303
    assert document(db, first)["reviewed_by"] == "Ana"
    # the shared token signs in whoever the form says, and needs that name
    with httpx.Client(base_url=service.url, timeout=30) as client:
        nameless = post_sign_in(client, " ", SHARED)
    assert nameless.status_code == 400 and COOKIE_NAME not in nameless.cookies
    assert "Say who you are" in nameless.text
    rita = sign_in(service, SHARED, "Rita")
    rejected = rita.post(
        f"/review/documents/{second}/reject", data={"csrf": csrf(rita), "reason": "no"}
    )
    assert rejected.status_code == 303
    assert document(db, second)["reviewed_by"] == "Rita"
    assert "Signed in as Olga · operator" in sign_in(service, OLGA, "Eve").get("/review").text


def test_an_edited_text_is_held_to_the_limit_of_any_document(db, service):
    doc_id = awaiting(db, "A plan.")
    ana = sign_in(service, ANA)
    over = "x" * (BODY_MAX_CHARACTERS + 1)
    refused = ana.post(
        f"/review/documents/{doc_id}/approve", data={"csrf": csrf(ana), "body": over}
    )
    assert refused.status_code == 400
    assert f"over the {BODY_MAX_CHARACTERS:,} a document may have" in notice(refused)
    assert document(db, doc_id)["review_decision"] is None
    # the CLI's approval with an edit, the same rule
    edited = cli.run(
        service.env["DATABASE_URL"],
        "documents",
        "approve",
        str(doc_id),
        "--body-file",
        "-",
        stdin=over,
    )
    assert edited.returncode != 0
    assert f"over the {BODY_MAX_CHARACTERS:,}" in edited.stderr
    assert len(edited.stderr.strip().splitlines()) == 1, edited.stderr
    assert document(db, doc_id)["review_decision"] is None


def _cli_env(service: ServiceProcess) -> dict[str, str]:
    """The service's settings, for a CLI beside it: its poke reaches this service."""
    return {**service.env, "DELIVERY_SERVICE_URL": service.url}


def _delivered_again(db, document_id: int, times: int) -> None:
    def delivered() -> bool:
        row = db.execute(
            "SELECT d.delivered_at IS NOT NULL AS done, (SELECT count(*) FROM document_actions a"
            " WHERE a.document_id = d.id AND a.action = 'resend') AS resends"
            " FROM documents d WHERE d.id = %s",
            (document_id,),
        ).fetchone()
        return bool(row["done"]) and row["resends"] == times

    wait_for(delivered, what=f"delivery after resend {times}")


def test_resends_are_capped_per_document_and_day_whoever_asks(db, sandbox, service):
    phone = add_person(db)["phone"]  # who wrote a minute ago: their window is open
    sandbox.set_window(phone, 60)
    handed = service.http.post("/v1/documents", json=plan(phone, BODY), headers=AUTH)
    assert handed.status_code == 201, handed.text
    doc_id = handed.json()["id"]
    wait_for(lambda: document(db, doc_id)["delivered_at"], what="the first delivery")
    env = _cli_env(service)

    olga = sign_in(service, OLGA)
    assert operate(olga, doc_id, "resend").status_code == 200  # the page
    _delivered_again(db, doc_id, 1)
    by_cli = cli.run(env["DATABASE_URL"], "documents", "resend", str(doc_id), **env)
    assert by_cli.returncode == 0, by_cli.stderr  # the CLI
    _delivered_again(db, doc_id, 2)
    by_api = service.http.post(f"/v1/documents/{doc_id}/resend", headers=AUTH)
    assert by_api.status_code == 200, by_api.text  # the API
    _delivered_again(db, doc_id, 3)

    limit = f"document {doc_id} was resent 3 times in the last 24 hours, the most a day"
    refused = cli.run(env["DATABASE_URL"], "documents", "resend", str(doc_id), **env)
    assert refused.returncode == 1
    assert limit in refused.stderr and "DELIVERY_RESENDS_PER_DAY" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    answer = service.http.post(f"/v1/documents/{doc_id}/resend", headers=AUTH)
    assert answer.status_code == 409 and answer.json()["type"].endswith("resend-limit")
    assert limit in answer.json()["detail"]
    assert 23 * 3600 < int(answer.headers["retry-after"]) <= 24 * 3600
    page = operate(olga, doc_id, "resend")
    assert notice(page).startswith(f"Not applied: {limit}")
    resends = db.execute(
        "SELECT count(*) AS n FROM document_actions WHERE action = 'resend'"
    ).fetchone()
    assert resends["n"] == 3
    assert texts(sandbox.inbox(phone)) == delivery_messages(BODY, 4096) * 4, "four copies"


@pytest.mark.slow
def test_racing_resends_from_many_processes_never_pass_the_cap(db, sandbox, service):
    """Eight CLI processes resend one delivered document at once, with one resend left
    of the day's: one is taken, seven refused; delivered again, the next is refused by
    the cap. The row lock every action takes first orders them, on any process."""
    person = add_person(db)
    sandbox.set_window(person["phone"], 60)
    doc_id = add_document(db, person["id"], "One short plan.")["id"]
    wait_for(lambda: document(db, doc_id)["delivered_at"], what="the first delivery")
    env = {**_cli_env(service), "DELIVERY_RESENDS_PER_DAY": "1"}
    command = [sys.executable, "-m", "delivery_pipeline.cli", "documents", "resend", str(doc_id)]
    racers = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(8)
    ]
    codes = [racer.wait(timeout=120) for racer in racers]
    assert sorted(codes) == [0] + [1] * 7, codes
    _delivered_again(db, doc_id, 1)
    last = cli.run(env["DATABASE_URL"], "documents", "resend", str(doc_id), **env)
    assert last.returncode == 1 and "was resent 1 time in the last 24 hours" in last.stderr
