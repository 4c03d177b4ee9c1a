"""The ops checks (plain Python) against real Postgres: one stranded item per
waiting state fails its check with the right severity and metadata; healthy
and expected waiting does not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from delivery_pipeline.settings import CheckSettings, Settings
from delivery_pipeline.watch.checks import CHECK_NAMES, Severity, evaluate, evaluate_all
from delivery_pipeline_tests.support import ops
from delivery_pipeline_tests.support.data import add_person
from delivery_pipeline_tests.support.ops import HOUR, STRANDINGS

T = Settings().replace(delivery={"quiet_hours": ""})  # the outcome must not hang on the hour


def failing(results):
    return {r.name: r for r in results if not r.passed}


def test_empty_database_passes_every_check(db):
    results = evaluate_all(db, T)
    assert [r.name for r in results] == list(CHECK_NAMES)
    assert failing(results) == {}
    for result in results:
        assert result.metadata["owner"] == result.owner
        assert result.metadata["runbook"]
        assert result.metadata["count"] == 0


@pytest.mark.parametrize("name", sorted(STRANDINGS))
def test_each_stranded_state_fails_its_check_only(db, name):
    stranding = STRANDINGS[name]
    stranding.strand(db)
    results = failing(evaluate_all(db, stranding.settings()))
    assert set(results) == {name}
    result = results[name]
    assert result.severity == Severity(stranding.severity)
    assert result.metadata["count"] >= 1
    assert result.metadata["oldest_ids"]
    assert "oldest_age_seconds" in result.metadata and result.metadata["runbook"]


@pytest.mark.parametrize("name", sorted(STRANDINGS))
def test_fixing_each_stranded_state_passes_again(db, name):
    stranding = STRANDINGS[name]
    stranding.fix(db, stranding.strand(db))
    assert failing(evaluate_all(db, stranding.settings())) == {}


def test_pending_warns_then_errs_with_the_oldest_ids(db):
    young = ops.pending(db, 60)
    assert evaluate("pending_too_long", db, T).passed
    old = ops.pending(db, 20 * 60)
    result = evaluate("pending_too_long", db, T)
    assert (result.passed, result.severity) == (False, Severity.WARNING)
    assert result.metadata["count"] == 2
    assert result.metadata["over_warn"] == 1
    assert result.metadata["oldest_ids"] == [old, young]
    assert result.metadata["oldest_age_seconds"] == pytest.approx(20 * 60, abs=5)
    assert str(old) in result.summary
    ancient = ops.pending(db, 2 * HOUR)
    result = evaluate("pending_too_long", db, T)
    assert result.severity == Severity.ERROR
    assert result.metadata["oldest_ids"][0] == ancient
    assert result.metadata["owner"] == "generator"


def test_generating_too_long_lists_the_rows(db):
    fresh = ops.generating(db, 60)
    assert evaluate("generating_too_long", db, T).passed
    dead = ops.generating(db, 20 * 60)
    result = evaluate("generating_too_long", db, T)
    assert result.severity == Severity.WARNING
    assert [row["id"] for row in result.metadata["rows"]] == [dead, fresh]
    assert result.metadata["rows"][0]["attempts"] == 1


def test_undelivered_eligible_is_stranded_warn_then_error(db):
    ops.undelivered(db, 60)
    assert evaluate("undelivered_stranded", db, T).passed
    warn = ops.undelivered(db, 40 * 60)
    result = evaluate("undelivered_stranded", db, T)
    assert result.severity == Severity.WARNING
    assert result.metadata["stranded_over_warn"] == 1
    assert result.metadata["oldest_ids"][0] == warn
    assert "stranded" in result.summary
    ops.undelivered(db, 3 * HOUR)
    result = evaluate("undelivered_stranded", db, T)
    assert result.severity == Severity.ERROR
    assert result.metadata["stranded_over_error"] == 1
    assert result.metadata["owner"] == "delivery"


def test_window_closed_document_not_yet_knocked_is_still_eligible(db):
    """The sweep would knock for it now: if nothing does, it is stranded."""
    doc = ops.undelivered(db, 40 * 60, inbound_age_seconds=3 * 86400)
    result = evaluate("undelivered_stranded", db, T)
    assert result.severity == Severity.WARNING
    assert result.metadata["rows"][0]["action"] == "knock"
    assert result.metadata["oldest_ids"] == [doc]


def test_backoff_is_not_stranded_but_hours_of_retrying_warn(db):
    ops.undelivered(db, 40 * 60, backoff_seconds=600)
    result = evaluate("undelivered_stranded", db, T)
    assert result.passed, result.summary
    assert result.metadata["eligible"] == 0
    slow = ops.undelivered(db, 3 * HOUR, backoff_seconds=600)
    result = evaluate("undelivered_stranded", db, T)
    assert result.severity == Severity.WARNING
    assert result.metadata["stranded_over_warn"] == 0
    assert result.metadata["slow"] == 1
    assert result.metadata["oldest_ids"][0] == slow
    assert "retrying" in result.summary


def test_due_since_counts_from_the_end_of_the_backoff(db):
    """Generated 3 h ago, its backoff ended 5 minutes ago: due for 5 minutes, slow, not stranded."""
    doc = ops.undelivered(db, 3 * HOUR)
    db.execute(
        "UPDATE documents SET next_attempt_at = now() - interval '5 minutes' WHERE id = %(id)s",
        {"id": doc},
    )
    result = evaluate("undelivered_stranded", db, T)
    assert result.severity == Severity.WARNING
    assert result.metadata["stranded_over_warn"] == 0 and result.metadata["slow"] == 1


def test_live_claim_is_not_stranded_but_an_expired_one_is(db):
    doc = ops.undelivered(db, 40 * 60)
    db.execute(
        "UPDATE documents SET claim_token = gen_random_uuid(), claimed_at = now() "
        "WHERE id = %(id)s",
        {"id": doc},
    )
    assert evaluate("undelivered_stranded", db, T).passed
    db.execute(
        "UPDATE documents SET claimed_at = now() - interval '50 minutes' WHERE id = %(id)s",
        {"id": doc},
    )
    result = evaluate("undelivered_stranded", db, T)
    # the lease (10 min) expired 40 minutes ago: due, and nothing took it over
    assert result.severity == Severity.WARNING
    assert result.metadata["longest_stranded_seconds"] == pytest.approx(40 * 60, abs=5)


def test_waiting_for_the_persons_older_document_is_not_stranded(db):
    """Two plans of one person, both an hour old: the older is being sent (live
    claim), the younger waits its turn: neither is stranded, nothing is lost."""
    older = ops.undelivered(db, HOUR)
    person = db.execute("SELECT person_id FROM documents WHERE id = %s", (older,)).fetchone()
    younger = db.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, next_attempt_at) "
        "VALUES (%s, 'plan', 'succeeded', 'Next plan.', now() - interval '59 minutes', "
        "now() - interval '59 minutes') RETURNING id",
        (person["person_id"],),
    ).fetchone()["id"]
    db.execute(
        "UPDATE documents SET claim_token = gen_random_uuid(), claimed_at = now() WHERE id = %s",
        (older,),
    )
    result = evaluate("undelivered_stranded", db, T)
    assert result.passed, result.summary
    assert result.metadata["eligible"] == 0
    # The older one was delivered a minute ago: the younger is due since then, not
    # since it was generated.
    db.execute(
        "UPDATE documents SET delivered_at = now() - interval '1 minute', claim_token = NULL, "
        "claimed_at = NULL WHERE id = %s",
        (older,),
    )
    result = evaluate("undelivered_stranded", db, T)
    assert result.passed, result.summary
    assert result.metadata["eligible"] == 1
    assert result.metadata["rows"][0]["id"] == younger
    assert result.metadata["stranded_over_warn"] == 0


def test_awaiting_reply_is_counted_not_alerted_when_knocks_work(db):
    for _ in range(6):
        ops.knocked(db, 3 * HOUR, read=True, answered=True)
    oldest = ops.knocked(db, 5 * HOUR, delivered=True)  # one ignores us: normal
    result = evaluate("awaiting_reply", db, T)
    assert result.passed, result.summary
    assert result.metadata["count"] == 7
    assert result.metadata["oldest_ids"][0] == oldest
    assert result.metadata["knocks_unanswered"] == 1
    assert result.metadata["owner"] == "the person"


def test_knocks_never_delivered_err_as_a_broken_template(db):
    docs = [ops.knocked(db, HOUR) for _ in range(5)]
    ops.knocked(db, 60)  # too young to judge
    result = evaluate("awaiting_reply", db, T)
    assert result.severity == Severity.ERROR
    assert result.metadata["knocks_not_delivered"] == 5
    assert result.metadata["knocks_not_delivered_ids"] == docs
    assert "template" in result.summary


def test_knocks_failed_count_as_not_delivered(db):
    for _ in range(5):
        doc = ops.knocked(db, HOUR, delivered=True)
        ops.add_status(db, f"wamid.knock.{doc}", "failed", 30)
    result = evaluate("awaiting_reply", db, T)
    assert result.severity == Severity.ERROR
    assert result.metadata["knocks_failed"] == 5


def test_most_knocks_unanswered_warns(db):
    for _ in range(5):
        ops.knocked(db, 2 * HOUR, delivered=True)
    ops.knocked(db, 2 * HOUR, delivered=True, answered=True)
    result = evaluate("awaiting_reply", db, T)
    assert result.severity == Severity.WARNING
    assert result.metadata["knocks_unanswered_share"] == pytest.approx(5 / 6, abs=0.001)


def test_knocks_past_their_time_to_live_that_nothing_ended_err(db):
    """The owner of a knock's deadline is the sweep: one past it, its grace and a settle
    period, still open, means no sweep runs; one it ended is only counted."""
    person = add_person(db, inbound_age_seconds=None)

    def knock(expires_ago: float, expired: bool) -> None:
        db.execute(
            "INSERT INTO knocks (person_id, template, language, state, sent_at, expires_at, "
            "expired_at) VALUES (%(p)s, 'documents_ready', 'en', 'sent', "
            "now() - make_interval(secs => %(a)s::float8) - interval '12 hours', "
            "now() - make_interval(secs => %(a)s::float8), "
            "CASE WHEN %(e)s THEN now() END)",
            {"p": person["id"], "a": expires_ago, "e": expired},
        )

    knock(2 * HOUR, expired=True)
    knock(60, expired=False)  # within its grace: a late delivered may still come
    result = evaluate("awaiting_reply", db, T)
    assert result.passed
    assert (result.metadata["knocks_expired"], result.metadata["knocks_overdue"]) == (1, 0)

    knock(2 * HOUR, expired=False)
    result = evaluate("awaiting_reply", db, T)
    assert result.severity == Severity.ERROR
    assert result.metadata["knocks_overdue"] == 1
    assert "delivery_heartbeat" in result.summary


def test_few_knocks_never_alert(db):
    ops.knocked(db, HOUR)
    assert evaluate("awaiting_reply", db, T).passed


def test_abandoned_by_reason_expected_reasons_only_counted(db):
    ops.abandoned(db, "stale")
    ops.abandoned(db, "opted_out")
    result = evaluate("abandoned_or_failed", db, T)
    assert result.passed
    assert result.metadata["by_reason"] == {"stale": 1, "opted_out": 1}
    lost = ops.abandoned(db, "max_attempts", age_seconds=2 * HOUR)
    failed = ops.generation_failed(db)
    result = evaluate("abandoned_or_failed", db, T)
    assert result.severity == Severity.WARNING
    assert result.metadata["count"] == 2
    assert result.metadata["by_reason"] == {
        "stale": 1,
        "opted_out": 1,
        "max_attempts": 1,
        "generation_failed": 1,
    }
    assert result.metadata["oldest_ids"] == sorted([lost, failed])
    assert result.metadata["oldest_age_seconds"] == pytest.approx(2 * HOUR, abs=5)
    old = ops.abandoned(db, "undeliverable", age_seconds=30 * HOUR)  # not in the last day
    result = evaluate("abandoned_or_failed", db, T)
    assert old not in result.metadata["oldest_ids"]
    for _ in range(8):
        ops.abandoned(db, "unreachable")
    assert evaluate("abandoned_or_failed", db, T).severity == Severity.ERROR


def test_generation_failed_at_is_set_by_the_database(db):
    doc = ops.generation_failed(db)
    row = db.execute(
        "SELECT generation_failed_at FROM documents WHERE id = %(id)s", {"id": doc}
    ).fetchone()
    assert row["generation_failed_at"] is not None


def test_tier_headroom_warns_at_80_percent_and_errs_at_the_limit(db):
    # the smallest real tier (250 unique people); the counts are 70 %, 80 %, 100 % of it
    t = Settings().replace(checks={"messaging_tier": "250"})
    assert t.checks.tier_limit == 250
    ops.knocked_people(db, 175)
    ops.knocked_people(db, 75, age_seconds=25 * HOUR)  # left the rolling 24 h
    result = evaluate("messaging_tier_headroom", db, t)
    assert result.passed and result.metadata["count"] == 175
    first = ops.knocked_people(db, 1, age_seconds=20 * HOUR)
    ops.knocked_people(db, 24)
    result = evaluate("messaging_tier_headroom", db, t)
    assert result.severity == Severity.WARNING
    assert result.metadata["share"] == 0.8
    assert result.metadata["oldest_ids"][0] == first[0]
    ops.knocked_people(db, 50)
    assert evaluate("messaging_tier_headroom", db, t).severity == Severity.ERROR
    unlimited = Settings(checks=CheckSettings(messaging_tier="unlimited"))
    assert evaluate("messaging_tier_headroom", db, unlimited).passed


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        (None, 250),
        ("", 250),
        ("250", 250),
        ("2000", 2000),
        ("2k", 2000),
        ("TIER_10K", 10000),
        ("100,000", 100000),
        ("unlimited", None),
        ("TIER_UNLIMITED", None),
    ],
)
def test_parse_tier(raw, limit):
    env = {} if raw is None else {"WHATSAPP_MESSAGING_TIER": raw}
    assert Settings.from_env(env).checks.tier_limit == limit
    if raw:
        assert CheckSettings(messaging_tier=raw).tier_limit == limit


def test_parse_tier_rejects_nonsense():
    with pytest.raises(ValueError, match="WHATSAPP_MESSAGING_TIER"):
        Settings.from_env({"WHATSAPP_MESSAGING_TIER": "lots"})
    with pytest.raises(ValidationError, match="messaging_tier"):
        CheckSettings(messaging_tier="lots")


def test_sender_paused_is_an_error_at_once(db):
    doc = ops.pause_sender(db)
    result = evaluate("sender_paused", db, T)
    assert result.severity == Severity.ERROR
    assert result.metadata["pause_code"] == 190
    assert result.metadata["count"] == 1 and result.metadata["oldest_ids"] == [doc]
    assert "access token expired" in result.summary


def test_thresholds_from_env():
    s = Settings.from_env(
        {
            "CHECK_UNDELIVERED_WARN_SECONDS": "60",
            "CHECK_KNOCK_MIN_SAMPLE": "2",
            "WHATSAPP_MESSAGING_TIER": "2k",
            "DELIVERY_LEASE_SECONDS": "30",
        }
    )
    assert (
        s.checks.undelivered_warn_seconds,
        s.checks.knock_min_sample,
        s.checks.tier_limit,
        s.delivery.lease_seconds,
    ) == (60.0, 2, 2000, 30)
    with pytest.raises(ValueError, match="CHECK_KNOCK_MIN_SAMPLE"):
        Settings.from_env({"CHECK_KNOCK_MIN_SAMPLE": "many"})


def test_awaiting_review_warns_then_errs_with_a_link_to_the_review_page(db):
    from delivery_pipeline_tests.support.review import awaiting

    custom = Settings.from_env(
        {
            "REVIEW_WARN_SECONDS": "600",
            "REVIEW_ERROR_SECONDS": "3600",
            "DELIVERY_SERVICE_URL": "https://delivery.internal/",
        }
    )
    young = awaiting(db, age_seconds=60)
    result = evaluate("awaiting_review_too_long", db, custom)
    assert result.passed and result.metadata["count"] == 1
    old = awaiting(db, age_seconds=20 * 60)
    result = evaluate("awaiting_review_too_long", db, custom)
    assert (result.passed, result.severity, result.owner) == (False, Severity.WARNING, "reviewers")
    assert result.metadata["oldest_ids"] == [old, young]
    assert result.metadata["review_page"] == "https://delivery.internal/review"
    assert result.summary.startswith("1 documents awaiting review for over 10m 0s (of 2)")
    assert result.summary.endswith("Review them at https://delivery.internal/review")
    awaiting(db, age_seconds=3 * HOUR)
    result = evaluate("awaiting_review_too_long", db, custom)
    assert result.severity == Severity.ERROR and result.metadata["over_error"] == 1
    assert (
        evaluate("awaiting_review_too_long", db, T).severity == Severity.ERROR
    )  # default ERROR: 2 h
