"""Checks executed into a Dagster instance, then the alert sensors: one post
when a check starts failing, none on the next tick, a resolved message when it
passes again; one post per failed run; a healthy day posts nothing."""

from __future__ import annotations

import pytest
from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    DagsterInstance,
    Definitions,
    Failure,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
    job,
    op,
)

from delivery_pipeline.dagster_defs.alert_sensors import build_alert_sensors
from delivery_pipeline.dagster_defs.asset_checks import (
    STATE_CHECKS,
    check_keys,
    delivery_checks,
)
from delivery_pipeline.dagster_defs.assets import (
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.jobs import refresh_backlog
from delivery_pipeline.dagster_defs.resources import (
    DeliveryServiceResource,
    OpsChannelResource,
    ReviewResource,
)
from delivery_pipeline.dagster_defs.schedules import build_schedules
from delivery_pipeline.delivery.sweep import sweep_sync
from delivery_pipeline.settings import OpsSettings, ReviewSettings, ServiceSettings, Settings
from delivery_pipeline.testing.sandbox import WebhookReceiver
from delivery_pipeline_tests.support import ops
from delivery_pipeline_tests.support.dagster_support import resources_for
from delivery_pipeline_tests.support.data import add_document, add_person
from delivery_pipeline_tests.support.ops import HOUR, STRANDINGS, approve
from delivery_pipeline_tests.support.review import awaiting

pytestmark = pytest.mark.filterwarnings("ignore::dagster.BetaWarning")

DEFAULTS = Settings()
STATE_KEYS = check_keys(STATE_CHECKS)
ALERT_SENSORS = {s.name: s for s in build_alert_sensors(DEFAULTS.ops, STATE_KEYS)}
ops_check_alerts = ALERT_SENSORS["ops_check_alerts"]
ops_run_failures = ALERT_SENSORS["ops_run_failures"]
ops_run_successes = ALERT_SENSORS["ops_run_successes"]
checks_every_5_minutes = next(
    s for s in build_schedules(DEFAULTS.schedules) if s.name == "checks_every_5_minutes"
)


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def resources(database_url, ops_url, settings=DEFAULTS):
    return {
        **resources_for(database_url, settings=settings),
        "ops_channel": OpsChannelResource(OpsSettings(webhook_url=ops_url)),
    }


def definitions(database_url, ops_url=None, settings=DEFAULTS):
    return Definitions(
        assets=[generated_documents, delivered_documents, delivery_backlog],
        asset_checks=STATE_CHECKS,
        jobs=[delivery_checks, refresh_backlog],
        schedules=[checks_every_5_minutes],
        sensors=[ops_check_alerts, ops_run_failures],
        resources=resources(database_url, ops_url, settings),
    )


def run_checks(defs, instance):
    result = defs.resolve_job_def("delivery_checks").execute_in_process(
        instance=instance, raise_on_error=False
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    at_error = [
        n for n, e in evaluations.items() if not e.passed and e.severity == AssetCheckSeverity.ERROR
    ]
    # Blocking checks: the run is red while a check is at ERROR (a WARN fails nothing),
    # and its failure names them.
    assert result.success == (not at_error), at_error
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            assert error.cls_name == "DagsterAssetCheckFailedError", error.message
            assert any(name in error.message for name in at_error)
    return evaluations


def tick(instance, database_url, ops_url):
    context = build_sensor_context(instance=instance, resources=resources(database_url, ops_url))
    outcome = ops_check_alerts(context)
    assert isinstance(outcome, SkipReason)
    return outcome


def ops_url(sandbox):
    return f"{sandbox.url}/_sandbox/ops"


# Which asset each check judges: Dagster keys users rely on, pinned here apart from the
# registry they are built from.
JUDGES = {
    "pending_too_long": generated_documents,
    "generating_too_long": generated_documents,
    "awaiting_review_too_long": generated_documents,
    "undelivered_stranded": delivered_documents,
    "awaiting_reply": delivered_documents,
    "messaging_tier_headroom": delivered_documents,
    "sender_paused": delivered_documents,
    "delivery_events_unrecorded": delivered_documents,
    "abandoned_or_failed": delivery_backlog,
}


def test_checks_job_evaluates_every_check_and_the_backlog_job_runs_them_too(database_url, instance):
    defs = definitions(database_url)
    evaluations = run_checks(defs, instance)
    assert set(evaluations) == {key.name for key in STATE_KEYS}
    assert all(e.passed for e in evaluations.values())
    # each check hangs on the asset it judges
    assert {n: e.asset_key for n, e in evaluations.items()} == {
        name: asset.key for name, asset in JUDGES.items()
    }
    result = defs.resolve_job_def("refresh_backlog").execute_in_process(instance=instance)
    assert {e.check_name for e in result.get_asset_check_evaluations()} == {
        name for name, asset in JUDGES.items() if asset is delivery_backlog
    }
    Definitions.validate_loadable(defs)


def test_checks_carry_owner_and_runbook_metadata():
    for check in STATE_CHECKS:
        spec = next(iter(check.check_specs))
        assert spec.metadata["owner"] and spec.metadata["runbook"]
        assert "Owner:" in spec.description
        assert spec.blocking, "an ERROR fails the checks' run: red on the Overview"


@pytest.mark.parametrize("name", sorted(STRANDINGS))
def test_stranded_state_posts_once_then_resolves(db, database_url, instance, sandbox, name):
    stranding = STRANDINGS[name]
    defs = definitions(database_url, ops_url(sandbox), stranding.settings())
    handle = stranding.strand(db)

    evaluation = run_checks(defs, instance)[name]
    assert not evaluation.passed
    expected = {"warning": AssetCheckSeverity.WARN, "error": AssetCheckSeverity.ERROR}
    assert evaluation.severity == expected[stranding.severity]
    assert evaluation.metadata["count"].value >= 1
    assert evaluation.metadata["oldest_ids"].value
    assert evaluation.metadata["owner"].value and evaluation.metadata["runbook"].value

    tick(instance, database_url, ops_url(sandbox))
    posts = sandbox.ops_alerts()
    assert len(posts) == 1
    assert name in posts[0]["text"] and posts[0]["blocks"]
    assert ("ERROR" if stranding.severity == "error" else "WARN") in posts[0]["text"]

    run_checks(defs, instance)
    tick(instance, database_url, ops_url(sandbox))
    assert len(sandbox.ops_alerts()) == 1, "still failing: no duplicate before the reminder"

    stranding.fix(db, handle)
    assert run_checks(defs, instance)[name].passed
    tick(instance, database_url, ops_url(sandbox))
    posts = sandbox.ops_alerts()
    assert len(posts) == 2
    assert "resolved" in posts[1]["text"] and name in posts[1]["text"]
    tick(instance, database_url, ops_url(sandbox))
    assert len(sandbox.ops_alerts()) == 2

    rows = db.execute("SELECT kind, severity, sent_at FROM ops_alerts ORDER BY id").fetchall()
    assert [(r["kind"], r["sent_at"] is not None) for r in rows] == [
        ("alert", True),
        ("resolved", True),
    ]


def test_reminder_after_the_interval_and_escalation_from_warn_to_error(
    db, database_url, instance, sandbox
):
    defs = definitions(database_url, ops_url(sandbox))
    doc = ops.pending(db, 20 * 60)  # WARN
    run_checks(defs, instance)
    tick(instance, database_url, ops_url(sandbox))
    db.execute("UPDATE ops_alerts SET created_at = created_at - interval '5 hours'")
    run_checks(defs, instance)
    tick(instance, database_url, ops_url(sandbox))
    posts = sandbox.ops_alerts()
    assert len(posts) == 2 and "still failing" in posts[1]["text"]
    db.execute(
        "UPDATE documents SET created_at = now() - interval '3 hours' WHERE id = %(id)s",
        {"id": doc},
    )
    run_checks(defs, instance)
    tick(instance, database_url, ops_url(sandbox))
    posts = sandbox.ops_alerts()
    assert len(posts) == 3 and "ERROR" in posts[2]["text"]


def test_a_healthy_day_raises_no_alert(db, database_url, instance, sandbox, settings):
    """Documents flowing all day, delivered within minutes, knocks delivered and answered."""
    for hour in range(1, 23):
        person = add_person(db)
        doc = add_document(db, person["id"], f"Plan of hour {hour}.")
        db.execute(
            "UPDATE documents SET created_at = now() - make_interval(hours => %(h)s), "
            "generated_at = now() - make_interval(hours => %(h)s), "
            "delivered_at = now() - make_interval(hours => %(h)s) + interval '3 minutes' "
            "WHERE id = %(id)s",
            {"h": hour, "id": doc["id"]},
        )
        if hour % 3 == 0:
            ops.knocked(db, hour * HOUR, read=True, answered=True)
    ops.abandoned(db, "stale", age_seconds=5 * HOUR)  # a brief nobody asked for in time
    ops.pending(db, 60)  # just requested
    ops.knocked(db, 30 * 60)  # knocked half an hour ago, no reply yet
    fresh = []
    for _ in range(3):
        person = add_person(db)
        sandbox.set_window(person["phone"], 60)
        fresh.append(add_document(db, person["id"], "Fresh.")["id"])
    assert sweep_sync(settings, database_url).delivered == len(fresh)

    defs = definitions(database_url, ops_url(sandbox))
    evaluations = run_checks(defs, instance)
    assert {n: e.description for n, e in evaluations.items() if not e.passed} == {}
    tick(instance, database_url, ops_url(sandbox))
    assert sandbox.ops_alerts() == []
    assert db.execute("SELECT count(*) AS n FROM ops_alerts").fetchone()["n"] == 0


def test_ops_webhook_down_records_unsent_and_retries_next_tick(db, database_url, instance, sandbox):
    defs = definitions(database_url)
    ops.pause_sender(db)
    run_checks(defs, instance)
    down = "http://127.0.0.1:9/ops"  # nothing listens on the discard port
    outcome = tick(instance, database_url, down)
    assert "failed" in outcome.skip_message
    row = db.execute("SELECT * FROM ops_alerts").fetchone()
    assert row["sent_at"] is None and row["send_attempts"] == 1 and row["last_send_error"]
    tick(instance, database_url, down)
    assert db.execute("SELECT send_attempts FROM ops_alerts").fetchone()["send_attempts"] == 2

    tick(instance, database_url, ops_url(sandbox))
    posts = sandbox.ops_alerts()
    assert len(posts) == 1 and "sender_paused" in posts[0]["text"]
    row = db.execute("SELECT * FROM ops_alerts").fetchone()
    assert row["sent_at"] is not None and row["last_send_error"] is None


def test_no_webhook_url_logs_and_records_only(db, database_url, instance):
    defs = definitions(database_url)
    ops.pause_sender(db)
    run_checks(defs, instance)
    outcome = tick(instance, database_url, None)
    assert "no OPS_WEBHOOK_URL" in outcome.skip_message
    row = db.execute("SELECT * FROM ops_alerts").fetchone()
    assert row["kind"] == "alert" and row["severity"] == "error" and row["sent_at"] is None


def test_sensor_also_sends_the_engines_alerts(db, database_url, instance, sandbox):
    db.execute(
        "INSERT INTO ops_alerts (dedup_key, severity, message) "
        "VALUES ('recipient:1', 'warning', 'Person 1 cannot receive WhatsApp messages')"
    )
    tick(instance, database_url, ops_url(sandbox))
    assert [p["text"] for p in sandbox.ops_alerts()] == [
        ":warning: *WARN* Person 1 cannot receive WhatsApp messages\n"
        "Runbook: http://127.0.0.1:8000/how-to/alerts/delivery.html#recipient-unreachable"
    ]


def test_unevaluated_checks_raise_nothing(database_url, instance, sandbox):
    outcome = tick(instance, database_url, ops_url(sandbox))
    assert "nothing new" in outcome.skip_message
    assert sandbox.ops_alerts() == []
    key = AssetCheckKey(generated_documents.key, "pending_too_long")
    assert instance.get_latest_asset_check_evaluation_record(key) is None


@op
def explode() -> None:
    raise Failure(description="the generator is on fire")


@job
def doomed() -> None:
    explode()


@op
def fine() -> None:
    pass


@job(name="doomed")
def doomed_recovered() -> None:
    fine()


def run_sensor(sensor, instance, result, database_url, sandbox):
    context = build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        dagster_event=(
            result.get_run_failure_event() if not result.success else result.get_run_success_event()
        ),
        resources=resources(database_url, ops_url(sandbox)),
    )
    sensor(context)


def test_failing_runs_of_a_job_post_once_and_resolve_when_one_succeeds(
    database_url, instance, sandbox, db
):
    failed = [doomed.execute_in_process(instance=instance, raise_on_error=False) for _ in "ab"]
    assert not any(result.success for result in failed)
    for result in failed:
        run_sensor(ops_run_failures, instance, result, database_url, sandbox)
        run_sensor(ops_run_failures, instance, result, database_url, sandbox)
    posts = sandbox.ops_alerts()
    assert len(posts) == 1, "one alert for the job, however many of its runs fail"
    assert "doomed" in posts[0]["text"] and failed[0].run_id in posts[0]["text"]
    assert "the generator is on fire" in posts[0]["text"]
    row = db.execute("SELECT dedup_key, sent_at FROM ops_alerts").fetchone()
    assert row["dedup_key"] == "run_failure:doomed" and row["sent_at"] is not None

    succeeded = doomed_recovered.execute_in_process(instance=instance)
    run_sensor(ops_run_successes, instance, succeeded, database_url, sandbox)
    run_sensor(ops_run_successes, instance, succeeded, database_url, sandbox)
    tick(instance, database_url, ops_url(sandbox))
    texts = [post["text"] for post in sandbox.ops_alerts()]
    assert len(texts) == 2 and "resolved" in texts[1] and "doomed" in texts[1]


def test_a_checks_run_failed_by_its_checks_is_the_checks_alert_not_a_run_failure(
    db, database_url, instance, sandbox
):
    defs = definitions(database_url, ops_url(sandbox))
    ops.pause_sender(db)
    result = defs.resolve_job_def("delivery_checks").execute_in_process(
        instance=instance, raise_on_error=False
    )
    assert not result.success
    run_sensor(ops_run_failures, instance, result, database_url, sandbox)
    assert sandbox.ops_alerts() == []
    tick(instance, database_url, ops_url(sandbox))
    [post] = sandbox.ops_alerts()
    assert "sender_paused" in post["text"]


# ── the reverse watch: Dagster checks the webhook service ───────────────


def test_dagster_alerts_when_the_webhook_service_is_unreachable(
    db, database_url, instance, sandbox
):
    from delivery_pipeline.dagster_defs.asset_checks import webhook_service_reachable
    from delivery_pipeline.testing.service import start_service

    keys = check_keys([webhook_service_reachable])
    [sensor] = [s for s in build_alert_sensors(DEFAULTS.ops, keys) if s.name == "ops_check_alerts"]

    def evaluate(service_url: str) -> AssetCheckSeverity | None:
        defs = Definitions(
            assets=[delivered_documents],
            asset_checks=[webhook_service_reachable],
            jobs=[delivery_checks],
            resources={
                **resources(database_url, ops_url(sandbox)),
                "delivery_service": DeliveryServiceResource(
                    ServiceSettings(service_url=service_url)
                ),
            },
        )
        [evaluation] = run_checks(defs, instance).values()
        sensor(
            build_sensor_context(
                instance=instance, resources=resources(database_url, ops_url(sandbox))
            )
        )
        return None if evaluation.passed else evaluation.severity

    with start_service(database_url, sandbox.url) as service:
        assert evaluate(service.url) is None
    assert evaluate(service.url) == AssetCheckSeverity.ERROR  # the same service, stopped
    [alert] = sandbox.ops_alerts()
    assert "webhook_service_reachable" in alert["text"] and "ERROR" in alert["text"]
    with start_service(database_url, sandbox.url) as service:
        assert evaluate(service.url) is None
    assert "resolved" in sandbox.ops_alerts()[-1]["text"]


# ── the reviewers' channel ──────────────────────────────────────────────


def review_resources(database_url, ops_url_, reviewers_url):
    return {
        **resources(database_url, ops_url_),
        "review": ReviewResource(ReviewSettings(webhook_url=reviewers_url)),
        "delivery_service": DeliveryServiceResource(
            ServiceSettings(service_url="http://127.0.0.1:8766")
        ),
    }


def review_tick(instance, res):
    outcome = ops_check_alerts(build_sensor_context(instance=instance, resources=res))
    assert isinstance(outcome, SkipReason)
    return outcome


def review_checks(instance, res):
    defs = Definitions(
        assets=[generated_documents, delivered_documents, delivery_backlog],
        asset_checks=STATE_CHECKS,
        jobs=[delivery_checks],
        resources=res,
    )
    return run_checks(defs, instance)["awaiting_review_too_long"]


def test_review_dwell_tells_the_reviewers_reminds_them_and_escalates_to_ops_at_error(
    db, database_url, instance, sandbox
):
    with WebhookReceiver() as reviewers:
        res = review_resources(database_url, ops_url(sandbox), reviewers.url)
        doc = awaiting(db, age_seconds=40 * 60)

        assert review_checks(instance, res).severity == AssetCheckSeverity.WARN
        review_tick(instance, res)
        [first] = [w.payload["text"] for w in reviewers.received]
        assert first.startswith(":warning: *WARN*") and "awaiting_review_too_long" in first
        assert "1 documents awaiting review" in first and "oldest 40m" in first
        assert "http://127.0.0.1:8766/review" in first, "a link to the page"
        assert sandbox.ops_alerts() == [], "ops is not told at WARN"
        review_checks(instance, res)
        review_tick(instance, res)
        assert len(reviewers.received) == 1

        db.execute("UPDATE ops_alerts SET created_at = created_at - interval '31 minutes'")
        review_checks(instance, res)
        review_tick(instance, res)
        assert len(reviewers.received) == 2, "reminded every REVIEW_REMINDER_SECONDS (30 min)"
        assert "still failing (WARN)" in reviewers.received[1].payload["text"]
        assert sandbox.ops_alerts() == []

        db.execute(
            "UPDATE documents SET awaiting_review_since = now() - interval '3 hours' "
            "WHERE id = %(id)s",
            {"id": doc},
        )
        assert review_checks(instance, res).severity == AssetCheckSeverity.ERROR
        review_tick(instance, res)
        assert reviewers.received[2].payload["text"].startswith(":red_circle: *ERROR*")
        [escalated] = sandbox.ops_alerts()
        assert escalated["text"].startswith(":red_circle: *ERROR* Escalated to ops")
        assert "awaiting_review_too_long" in escalated["text"] and "/review" in escalated["text"]

        approve(db, doc)
        assert review_checks(instance, res).passed
        review_tick(instance, res)
        assert "resolved" in reviewers.received[3].payload["text"]
        assert len(reviewers.received) == 4
        assert [p["text"].split("*")[1] for p in sandbox.ops_alerts()] == ["ERROR", "resolved"]
        channels = db.execute(
            "SELECT channel, kind, count(*) AS n FROM ops_alerts WHERE sent_at IS NOT NULL "
            "GROUP BY channel, kind ORDER BY channel, kind"
        ).fetchall()
        assert [(r["channel"], r["kind"], r["n"]) for r in channels] == [
            ("ops", "alert", 1),
            ("ops", "resolved", 1),
            ("reviewers", "alert", 2),
            ("reviewers", "reminder", 1),
            ("reviewers", "resolved", 1),
        ]


def test_without_a_reviewers_webhook_their_alert_goes_to_the_ops_channel(
    db, database_url, instance, sandbox
):
    res = review_resources(database_url, ops_url(sandbox), None)
    awaiting(db, age_seconds=40 * 60)
    review_checks(instance, res)
    review_tick(instance, res)
    [post] = sandbox.ops_alerts()
    assert "awaiting_review_too_long" in post["text"] and "/review" in post["text"]
    row = db.execute("SELECT channel, sent_at FROM ops_alerts").fetchone()
    assert row["channel"] == "reviewers" and row["sent_at"] is not None


def test_a_down_reviewers_webhook_does_not_hold_up_ops_alerts(db, database_url, instance, sandbox):
    with WebhookReceiver() as reviewers:
        reviewers.answer_always(503)
        res = review_resources(database_url, ops_url(sandbox), reviewers.url)
        awaiting(db, age_seconds=40 * 60)
        ops.pause_sender(db)
        run_checks(definitions(database_url, ops_url(sandbox)), instance)

        outcome = review_tick(instance, res)

        assert "failed" in outcome.skip_message
        assert ["sender_paused" in p["text"] for p in sandbox.ops_alerts()] == [True]
        unsent = db.execute("SELECT channel, send_attempts FROM ops_alerts WHERE sent_at IS NULL")
        assert [(r["channel"], r["send_attempts"]) for r in unsent] == [("reviewers", 1)]
        reviewers.answer_always(200)
        review_tick(instance, res)
        assert reviewers.received[-1].answered == 200
        assert (
            db.execute("SELECT count(*) AS n FROM ops_alerts WHERE sent_at IS NULL").fetchone()["n"]
            == 0
        )
