"""Documents awaiting review, and a reviewer running in a process of its own."""

from __future__ import annotations

import re
from typing import Any

import httpx
import psycopg

from delivery_pipeline.model import ReviewDecision
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.review import AlreadyDecided, Decided, Decision, decide
from delivery_pipeline_tests.support.data import add_document, add_person


def awaiting(
    conn: psycopg.Connection,
    body: str = "Your plan.\n\nStep one.",
    *,
    person_id: int | None = None,
    age_seconds: float = 0,
    kind: str = "plan",
    for_date: Any = None,
) -> int:
    """A generated document awaiting review for ``age_seconds``."""
    if person_id is None:
        person_id = add_person(conn)["id"]
    doc = add_document(conn, person_id, body, kind=kind, for_date=for_date, needs_review=True)
    conn.execute(
        "UPDATE documents SET awaiting_review_since = now() - make_interval(secs => %(a)s), "
        "generated_at = now() - make_interval(secs => %(a)s) WHERE id = %(id)s",
        {"a": float(age_seconds), "id": doc["id"]},
    )
    return int(doc["id"])


def reviewer_process(
    database_url: str,
    verdict: str,
    reviewer: str,
    document_ids: list[int],
    barrier: Any,
    results: Any,
) -> None:
    """One reviewer deciding every document in order, started together with the others.
    Puts (document id, "decided"|"already"|other, decision, reviewer, at) per document."""
    with connect(database_url) as conn:
        decisions = [
            Decision.approve(i, reviewer)
            if verdict == ReviewDecision.APPROVED
            else Decision.reject(i, reviewer, f"no, says {reviewer}")
            for i in document_ids
        ]
        barrier.wait(timeout=60)
        for decision in decisions:
            outcome = decide(conn, decision)
            if isinstance(outcome, Decided | AlreadyDecided):
                what = "decided" if isinstance(outcome, Decided) else "already"
                results.put(
                    (
                        decision.document_id,
                        what,
                        str(outcome.decision),
                        outcome.reviewer,
                        outcome.at.isoformat(),
                    )
                )
            else:
                results.put((decision.document_id, str(outcome), None, None, None))


def sign_in_form(client: httpx.Client, headers: dict[str, str] | None = None) -> dict[str, str]:
    """The sign-in form's hidden fields, as a browser gets them (``client`` keeps the
    form's cookie)."""
    page = client.get("/review/sign-in", headers=headers)
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, (page.status_code, page.text[:300])
    return {"csrf": found.group(1)}


def post_sign_in(
    client: httpx.Client, name: str, token: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """Sign in through the form, as a browser does: the form first, then the POST."""
    fields = {**sign_in_form(client, headers), "name": name, "token": token}
    return client.post("/review/sign-in", data=fields, headers=headers)
