"""Review before delivery, the rule underneath every way to decide (``store/review.py``),
against real Postgres and the sandbox: a reviewed kind waits outside the queue; approved
(as generated or edited) it is delivered from what was approved; rejected it never is;
two reviewers in two processes at once: exactly one decision, the other told by whom."""

from __future__ import annotations

import datetime as dt
import multiprocessing

import pytest

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep import eligible_now, sweep_sync
from delivery_pipeline.generation.briefs import run_briefs
from delivery_pipeline.generation.offline import OfflineGenerator
from delivery_pipeline.generation.worker import generate_pending
from delivery_pipeline.model import AbandonReason, ReviewDecision
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.intake import InputError, add_ready_document, request_document
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.review import (
    AlreadyDecided,
    Decided,
    Decision,
    NotAwaitingReview,
    awaiting_review,
    decide,
)
from delivery_pipeline.watch.checks import evaluate
from delivery_pipeline_tests.support.data import add_person, document, plan_body
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.review import awaiting, reviewer_process

pytestmark = pytest.mark.engine

LEASE = dt.timedelta(minutes=10)


def state(db, document_id: int) -> str:
    row = db.execute("SELECT state FROM document_states WHERE id = %(id)s", {"id": document_id})
    return row.fetchone()["state"]


def in_queue(db, document_id: int) -> bool:
    row = db.execute("SELECT in_queue FROM documents WHERE id = %(id)s", {"id": document_id})
    return row.fetchone()["in_queue"]


def reachable(db, sandbox, **person):
    """A person whose window is open in the database and in the sandbox."""
    row = add_person(db, **person)
    sandbox.set_window(row["phone"], 60)
    return row


def test_a_reviewed_kind_waits_outside_the_queue_until_approved(db, sandbox, settings):
    person = reachable(db, sandbox)
    body = plan_body(2, chunk_limit=200)
    doc = add_ready_document(db, person["id"], body, "plan", review_kinds={"plan"})
    brief = add_ready_document(db, person["id"], "Today.", "daily_brief", review_kinds={"plan"})

    assert (state(db, doc.id), in_queue(db, doc.id)) == ("awaiting_review", False)
    assert state(db, brief.id) == "undelivered", "only the listed kinds wait"
    reviewing = settings.replace(delivery={"chunk_limit": 200})
    assert sweep_sync(reviewing, settings.database.database_url).delivered == 1  # the brief
    assert not eligible_now(db, reviewing), "the guard does not see a document under review"
    assert evaluate("undelivered_stranded", db, reviewing).metadata["count"] == 0
    assert [w.id for w in awaiting_review(db)] == [doc.id]

    outcome = decide(db, Decision.approve(doc.id, "Rita"))

    assert isinstance(outcome, Decided) and outcome.reviewer == "Rita"
    assert (state(db, doc.id), in_queue(db, doc.id)) == ("undelivered", True)
    assert eligible_now(db, reviewing)
    assert sweep_sync(reviewing, settings.database.database_url).delivered == 1
    assert texts(sandbox.inbox(person["phone"])) == ["Today.", *delivery_messages(body, 200)]
    row = document(db, doc.id)
    assert (row["review_decision"], row["reviewed_by"], row["approved_body"]) == (
        "approved",
        "Rita",
        None,
    )


def test_an_edit_is_kept_beside_the_original_and_is_what_is_delivered(db, sandbox, settings):
    person = reachable(db, sandbox)
    original = "Run 10 km every day.\n\nEat nothing after 6 pm."
    edited = "Walk 30 minutes a day.\r\n\r\nEat well; ask your doctor before big changes."
    doc_id = awaiting(db, original, person_id=person["id"])

    outcome = decide(db, Decision.approve(doc_id, "Rita", body=edited, note="safer advice"))

    assert isinstance(outcome, Decided)
    row = document(db, doc_id)
    approved = edited.replace("\r\n", "\n")
    assert (row["body"], row["approved_body"], row["review_reason"]) == (
        original,
        approved,
        "safer advice",
    )
    sweep_sync(settings.replace(delivery={"chunk_limit": 30}), settings.database.database_url)
    assert texts(sandbox.inbox(person["phone"])) == delivery_messages(approved, 30)
    assert not any("10 km" in text for text in texts(sandbox.inbox(person["phone"])))


def test_an_edit_identical_to_the_original_is_approval_as_generated(db):
    doc_id = awaiting(db, "Same text.")
    decide(db, Decision.approve(doc_id, "Rita", body="Same text."))
    assert document(db, doc_id)["approved_body"] is None


def test_a_rejected_document_is_abandoned_never_sent_and_not_an_ops_problem(db, sandbox, settings):
    person = reachable(db, sandbox)
    doc_id = awaiting(db, person_id=person["id"])

    outcome = decide(db, Decision.reject(doc_id, "Rita", "  medical claim, not allowed  "))

    assert isinstance(outcome, Decided) and outcome.decision == ReviewDecision.REJECTED
    row = document(db, doc_id)
    assert (row["abandon_reason"], row["review_reason"]) == (
        "rejected",
        "medical claim, not allowed",
    )
    assert state(db, doc_id) == "abandoned" and not in_queue(db, doc_id)
    assert sweep_sync(settings, settings.database.database_url).claimed == 0
    assert sandbox.inbox(person["phone"]) == []
    assert AbandonReason.REJECTED == row["abandon_reason"]
    assert evaluate("abandoned_or_failed", db, Settings()).passed, "a rejection is expected"


def test_the_second_decision_is_told_who_decided_and_when(db):
    doc_id = awaiting(db)
    first = decide(db, Decision.reject(doc_id, "Rita", "off-topic"))
    assert isinstance(first, Decided)

    second = decide(db, Decision.approve(doc_id, "Sam"))

    assert isinstance(second, AlreadyDecided)
    assert (second.decision, second.reviewer, second.at) == ("rejected", "Rita", first.at)
    assert str(second).startswith(f"document {doc_id} was already rejected by Rita at ")
    row = document(db, doc_id)
    assert (row["reviewed_by"], row["abandon_reason"]) == ("Rita", "rejected")


def test_what_does_not_await_review_says_why(db):
    person = add_person(db)
    ready = add_ready_document(db, person["id"], "No review for plans here.", "plan")
    pending = request_document(db, person["id"], "plan")

    missing = decide(db, Decision.approve(999_999, "Rita"))
    assert isinstance(missing, NotAwaitingReview) and not missing.exists
    not_reviewed = decide(db, Decision.approve(ready.id, "Rita"))
    assert isinstance(not_reviewed, NotAwaitingReview) and not_reviewed.exists
    assert "DELIVERY_REVIEW_KINDS" in str(not_reviewed)
    not_generated = decide(db, Decision.reject(pending.id, "Rita", "no"))
    assert "not generated yet (pending)" in str(not_generated)
    assert document(db, ready.id)["review_decision"] is None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Decision.reject(1, "Rita", " \n "), "needs a reason"),
        (lambda: Decision.approve(1, "Rita", body="\r\n  "), "edited text is empty"),
        (lambda: Decision.approve(1, "   "), "who is reviewing"),
    ],
)
def test_bad_decisions_are_refused_before_the_database(make, message):
    with pytest.raises(InputError, match=message):
        make()


def test_generation_of_a_reviewed_kind_waits_for_review_and_pokes_nothing(db, database_url):
    person = add_person(db)
    plan = request_document(db, person["id"], "plan")
    brief = request_document(db, person["id"], "daily_brief")
    pokes: list[int] = []

    result = generate_pending(
        database_url, OfflineGenerator(), poke=pokes.append, review_kinds={"plan"}
    )

    assert (result.succeeded, result.awaiting_review) == (2, 1)
    assert state(db, plan.id) == "awaiting_review"
    assert state(db, brief.id) == "undelivered"
    assert pokes == [brief.id], "only what delivery can send is poked"


def test_a_brief_still_under_review_when_its_day_ends_is_abandoned_stale(db, sandbox, settings):
    person = reachable(db, sandbox, time_zone="America/Sao_Paulo")
    day = dt.date(2031, 5, 20)
    doc_id = awaiting(db, "Your brief.", person_id=person["id"], kind="daily_brief", for_date=day)
    # 23:59 on that day in São Paulo: late, not stale
    assert (
        run_briefs(db, lease=LEASE, at=dt.datetime(2031, 5, 21, 2, 59, tzinfo=dt.UTC)).abandoned
        == []
    )

    result = run_briefs(db, lease=LEASE, at=dt.datetime(2031, 5, 21, 3, 0, tzinfo=dt.UTC))

    assert [r.id for r in result.abandoned] == [doc_id]
    assert document(db, doc_id)["abandon_reason"] == "stale"
    assert awaiting_review(db) == []
    late = decide(db, Decision.approve(doc_id, "Rita"))
    assert isinstance(late, NotAwaitingReview) and "abandoned (stale)" in str(late)
    assert sweep_sync(settings, settings.database.database_url).claimed == 0
    assert sandbox.inbox(person["phone"]) == []


def test_a_brief_approved_after_its_day_ended_is_never_sent_late(db, sandbox, settings):
    """Approved before the schedule's stale pass came round: eligibility abandons it."""
    person = reachable(db, sandbox, time_zone="UTC")
    yesterday = db.execute("SELECT (now() AT TIME ZONE 'UTC')::date - 1 AS d").fetchone()["d"]
    doc_id = awaiting(db, "Brief.", person_id=person["id"], kind="daily_brief", for_date=yesterday)

    assert isinstance(decide(db, Decision.approve(doc_id, "Rita")), Decided)
    result = sweep_sync(settings, settings.database.database_url)

    assert result.claimed == 1 and sandbox.inbox(person["phone"]) == []
    assert document(db, doc_id)["abandon_reason"] == "stale"


def test_two_reviewers_in_two_processes_exactly_one_decision_each(db, database_url):
    ids = [awaiting(db, f"Plan {i}.") for i in range(40)]
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    reviewers = [
        context.Process(
            target=reviewer_process,
            args=(database_url, verdict, name, ids, barrier, results),
        )
        for verdict, name in ((ReviewDecision.APPROVED, "Ann"), (ReviewDecision.REJECTED, "Bo"))
    ]
    for process in reviewers:
        process.start()
    outcomes = [results.get(timeout=120) for _ in range(2 * len(ids))]
    for process in reviewers:
        process.join(timeout=60)
        assert process.exitcode == 0

    rows = {
        r["id"]: r
        for r in db.execute(
            "SELECT id, review_decision, reviewed_by, reviewed_at, abandon_reason "
            "FROM documents WHERE id = ANY(%(ids)s)",
            {"ids": ids},
        )
    }
    for doc_id in ids:
        mine = [o for o in outcomes if o[0] == doc_id]
        assert sorted(o[1] for o in mine) == ["already", "decided"], mine
        winner = next(o for o in mine if o[1] == "decided")
        loser = next(o for o in mine if o[1] == "already")
        row = rows[doc_id]
        assert (
            loser[2:]
            == winner[2:]
            == (
                row["review_decision"],
                row["reviewed_by"],
                row["reviewed_at"].isoformat(),
            )
        ), "the loser is told exactly who decided and when"
        assert (row["abandon_reason"] == "rejected") == (row["reviewed_by"] == "Bo")


def test_the_backlog_and_status_count_documents_awaiting_review(db):
    from delivery_pipeline.watch.backlog import backlog_frame, backlog_numbers

    awaiting(db, age_seconds=600)
    awaiting(db, age_seconds=60)
    rejected = awaiting(db)
    decide(db, Decision.reject(rejected, "Rita", "no"))

    frame = backlog_frame(db)
    row = frame[frame["state"] == "awaiting_review"].iloc[0]
    assert (row["owner"], row["count"]) == ("reviewers", 2)
    assert 600 <= row["oldest_age_seconds"] < 660
    numbers = backlog_numbers(frame)
    assert numbers["awaiting_review_count"] == 2 and numbers["waiting_total"] == 2
    assert numbers["abandoned_today_rejected_count"] == 1
    status = {(r["state"], r["reason"]): r["count"] for r in db.execute(QUERIES.state_summary.sql)}
    assert status[("awaiting_review", "")] == 2 and status[("abandoned", "rejected")] == 1
