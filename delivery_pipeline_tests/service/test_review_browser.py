"""The review page in a real browser: Debian's chromium driven by Playwright signs in,
approves one document and rejects another; the webhook service, the sandbox and
Postgres are real, and the person's phone shows the approved document only.

Never ``playwright install``: the system's chromium (``apt-get install -y chromium``,
which ``.ci/run`` does when it is missing)."""

from __future__ import annotations

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.testing.service import start_service
from delivery_pipeline_tests.support.browser import NEEDS_CHROMIUM
from delivery_pipeline_tests.support.data import add_person, document, plan_body
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.review import awaiting
from delivery_pipeline_tests.support.waiting import wait_for

REVIEW_TOKEN = "browser-test-reviewer-token-0123456789"
CHUNK_LIMIT = 120

pytestmark = [
    pytest.mark.slow,
    NEEDS_CHROMIUM,
]


def test_a_reviewer_approves_one_and_rejects_another_and_only_the_approved_arrives(
    db, database_url, sandbox, browser
):
    person = add_person(db, name="Ana")
    sandbox.set_window(person["phone"], 60)
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
        page.fill("#name", "Rita")
        page.fill("#token", REVIEW_TOKEN)
        page.click("button:has-text('Sign in')")

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
