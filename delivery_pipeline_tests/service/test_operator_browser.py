"""Cancel and resend on the review page in a real browser: Debian's chromium driven by
Playwright, the webhook service, the sandbox and Postgres real. A reviewer sees no
way to cancel or resend; an operator, signed in with their own token (which says
their name), does. One document is cancelled before anyone sees it; one delivered
document is resent and arrives a second time, every part; what does not apply (the
day's resends used up included) is said on the page in one line.

Never ``playwright install``: the system's chromium (``apt-get install -y chromium``)."""

from __future__ import annotations

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


def test_an_operator_cancels_one_and_resends_another_from_the_review_page(
    db, database_url, sandbox, browser
):
    person = add_person(db, name="Ana")
    sandbox.set_window(person["phone"], 60)
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
        page.fill("#name", "Olga")
        page.fill("#token", REVIEW_TOKEN)  # the reviewers' shared token: reviewing only
        page.click("button:has-text('Sign in')")
        assert page.inner_text("h1") == "Awaiting review: 1"
        assert page.locator("#operate").count() == 0
        page.click("button:has-text('Sign out')")

        page.fill("#token", OPERATOR_TOKEN)  # her own: the token says who she is
        page.click("button:has-text('Sign in')")
        assert page.inner_text("header .meta") == "Signed in as Olga · operator"

        page.fill("#operate-document", str(doomed))
        page.fill("#operate-reason", "wrong person")
        page.click("button:has-text('Cancel it')")
        assert page.inner_text(".notice") == f"Document {doomed} cancelled (was awaiting_review)."
        assert page.inner_text("h1") == "Awaiting review: 0"

        page.fill("#operate-document", str(sent))
        page.click("button:has-text('Resend it')")
        assert page.inner_text(".notice") == (
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

        page.fill("#operate-document", str(sent))
        page.click("button:has-text('Cancel it')")
        told = page.inner_text(".notice")
        assert told.startswith(f"Not applied: document {sent} was already delivered at ")
        assert f"documents resend {sent}" in told

        page.fill("#operate-document", str(sent))
        page.click("button:has-text('Resend it')")
        assert page.inner_text(".notice").startswith(
            f"Not applied: document {sent} was resent 1 time in the last 24 hours, the most a "
            "day (DELIVERY_RESENDS_PER_DAY): it can be resent again at "
        )

        page.fill("#operate-document", "999999999")
        page.click("button:has-text('Resend it')")
        assert page.inner_text(".notice").startswith("Not applied: no document 999999999")

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
