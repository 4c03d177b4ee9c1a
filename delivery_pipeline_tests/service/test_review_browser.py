"""The review page in a real browser: Debian's chromium driven by Playwright; the
webhook service, the sandbox and Postgres real. A reviewer signs in, approves one
document and rejects another, and the person's phone shows the approved document
only. A reviewer sees no way to cancel or resend; an operator, signed in with their
own token (which says their name), does: one document is cancelled before anyone
sees it; one delivered document is resent and arrives a second time, every part;
what does not apply (the day's resends used up included) is said on the page in
one line.

Never ``playwright install``: the system's chromium (``apt-get install -y chromium``,
which ``.ci/run`` does when it is missing)."""

from __future__ import annotations

from typing import Any

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.testing.service import start_service
from delivery_pipeline_tests.support.browser import NEEDS_CHROMIUM
from delivery_pipeline_tests.support.data import add_document, add_person, document, plan_body
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.review import awaiting
from delivery_pipeline_tests.support.waiting import wait_for

REVIEW_TOKEN = "browser-test-reviewer-token-0123456789"
OPERATOR_TOKEN = "browser-test-operator-token-0123456789"
CHUNK_LIMIT = 120

pytestmark = [
    pytest.mark.slow,
    NEEDS_CHROMIUM,
]


@pytest.fixture
def ana(db, sandbox) -> dict[str, Any]:
    """A person whose window is open."""
    person = add_person(db, name="Ana")
    sandbox.set_window(person["phone"], 60)
    return person


def sign_in(page: Any, name: str, token: str) -> None:
    """The sign-in form filled in and sent (the page shows it)."""
    page.fill("#name", name)
    page.fill("#token", token)
    page.click("button:has-text('Sign in')")


def operate(page: Any, action: str, document_id: int, reason: str = "") -> str:
    """The operator's form: ``action`` on the document (with ``reason``); the notice
    the page then shows."""
    page.fill("#operate-document", str(document_id))
    if reason:
        page.fill("#operate-reason", reason)
    page.click(f"button:has-text('{action}')")
    return page.inner_text(".notice")


def test_a_reviewer_approves_one_and_rejects_another_and_only_the_approved_arrives(
    db, database_url, sandbox, browser, ana
):
    person = ana
    approved_body = plan_body(3, chunk_limit=CHUNK_LIMIT, tag="Keep: ")
    rejected_body = "Drop: a plan nobody should get."
    first = awaiting(db, approved_body, person_id=person["id"], age_seconds=2 * 3600)
    second = awaiting(db, rejected_body, person_id=person["id"], age_seconds=600)

    with start_service(
        database_url, sandbox.url, REVIEW_TOKEN=REVIEW_TOKEN, DELIVERY_CHUNK_LIMIT=CHUNK_LIMIT
    ) as service:
        page = browser.new_page()
        page.goto(f"{service.url}/review")
        assert page.url.endswith("/review/sign-in")
        sign_in(page, "Rita", REVIEW_TOKEN)

        assert page.inner_text("h1") == "Awaiting review: 2"
        articles = page.locator("article")
        assert [articles.nth(i).get_attribute("data-document-id") for i in range(2)] == [
            str(first),
            str(second),
        ], "oldest first"
        shown = page.locator(f"#document-{first}")
        assert "waiting 2h 0m" in shown.inner_text()
        previewed = shown.locator("ol.messages li .text").all_inner_texts()
        assert previewed == delivery_messages(approved_body, CHUNK_LIMIT), "previewed as delivered"

        shown.locator("button:has-text('Approve and send')").click()
        assert page.inner_text(".notice") == (
            f"Document {first} approved by Rita. It is on its way."
        )
        other = page.locator(f"#document-{second}")
        other.locator("textarea[name=reason]").fill("Not for this person.")
        other.locator("button:has-text('Reject')").click()
        assert page.inner_text(".notice") == f"Document {second} rejected by Rita."
        assert page.inner_text("h1") == "Awaiting review: 0"

        wait_for(lambda: document(db, first)["delivered_at"], what="the approved document")

    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(approved_body, CHUNK_LIMIT)
    assert not any("Drop:" in text for text in texts(sandbox.inbox(person["phone"])))
    row = document(db, second)
    assert (row["abandon_reason"], row["review_reason"], row["reviewed_by"]) == (
        "rejected",
        "Not for this person.",
        "Rita",
    )


def test_an_operator_cancels_one_and_resends_another_from_the_review_page(
    db, database_url, sandbox, browser, ana
):
    person = ana
    body = plan_body(3, chunk_limit=CHUNK_LIMIT, tag="Again: ")
    parts = delivery_messages(body, CHUNK_LIMIT)
    doomed = awaiting(db, "Never: a plan nobody should get.", person_id=person["id"])

    with start_service(
        database_url,
        sandbox.url,
        REVIEW_TOKEN=REVIEW_TOKEN,
        OPERATOR_TOKENS=f"Olga={OPERATOR_TOKEN}",
        DELIVERY_RESENDS_PER_DAY=1,
        DELIVERY_CHUNK_LIMIT=CHUNK_LIMIT,
    ) as service:
        sent = add_document(db, person["id"], body)["id"]
        wait_for(lambda: document(db, sent)["delivered_at"], what="the first delivery")
        assert texts(sandbox.inbox(person["phone"])) == parts

        page = browser.new_page()
        page.goto(f"{service.url}/review")
        sign_in(page, "Olga", REVIEW_TOKEN)  # the reviewers' shared token: reviewing only
        assert page.inner_text("h1") == "Awaiting review: 1"
        assert page.locator("#operate").count() == 0
        page.click("button:has-text('Sign out')")

        sign_in(page, "Olga", OPERATOR_TOKEN)  # her own: the token says who she is
        assert page.inner_text("header .meta") == "Signed in as Olga · operator"

        told = operate(page, "Cancel it", doomed, "wrong person")
        assert told == f"Document {doomed} cancelled (was awaiting_review)."
        assert page.inner_text("h1") == "Awaiting review: 0"

        assert operate(page, "Resend it", sent) == (
            f"Document {sent} queued to be sent again, every part "
            "(was delivered, 3 of 3 parts sent before)."
        )
        wait_for(
            lambda: (
                len(texts(sandbox.inbox(person["phone"]))) == 2 * len(parts)
                and document(db, sent)["delivered_at"]
            ),
            what="the resend",
        )

        told = operate(page, "Cancel it", sent)
        assert told.startswith(f"Not applied: document {sent} was already delivered at ")
        assert f"documents resend {sent}" in told

        assert operate(page, "Resend it", sent).startswith(
            f"Not applied: document {sent} was resent 1 time in the last 24 hours, the most a "
            "day (DELIVERY_RESENDS_PER_DAY): it can be resent again at "
        )

        told = operate(page, "Resend it", 999999999)
        assert told.startswith("Not applied: no document 999999999")

    assert texts(sandbox.inbox(person["phone"])) == parts + parts
    row = document(db, doomed)
    assert (row["abandon_reason"], row["last_delivery_error"]) == (
        "cancelled",
        "cancelled by Olga: wrong person",
    )
    actions = db.execute(
        "SELECT document_id, action, operator FROM document_actions ORDER BY id"
    ).fetchall()
    assert [(a["document_id"], a["action"], a["operator"]) for a in actions] == [
        (doomed, "cancel", "Olga"),
        (sent, "resend", "Olga"),
    ]
