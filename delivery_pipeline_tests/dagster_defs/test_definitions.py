"""The Dagster layer: definitions load and validate; sensors, schedules, jobs
and the backlog asset called directly against real Postgres (and the sandbox
where a send happens)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from dagster import (
    ConfigurableResource,
    DagsterInstance,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    InitResourceContext,
    RunRequest,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
    materialize,
)
from dagster._config import ConfigTypeKind

from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.dagster_defs.jobs import (
    SWEEP_TAG,
    deliver_documents,
    enqueue_daily_briefs,
    generate_and_deliver,
    generate_documents,
    request_document_job,
)
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    CloudApiResource,
    DeliveryResource,
    GeneratorResource,
    build_resources,
    engine_settings,
)
from delivery_pipeline.dagster_defs.schedules import build_schedules
from delivery_pipeline.dagster_defs.sensors import build_sensors
from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.model import WAITING_STATE_OWNERS, AbandonReason
from delivery_pipeline.settings import GenerationSettings, Settings, WhatsAppSettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.dagster_support import add_run, execute, resources_for
from delivery_pipeline_tests.support.data import (
    add_document,
    add_person,
    document,
    person_writes,
    plan_body,
)
from delivery_pipeline_tests.support.inbox import knocks, texts

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::dagster.BetaWarning")

DEFAULTS = Settings()
SENSORS = {s.name: s for s in build_sensors(DEFAULTS)}
delivery_heartbeat = SENSORS["delivery_heartbeat"]
pending_generation = SENSORS["pending_generation"]
SCHEDULES = {s.name: s for s in build_schedules(DEFAULTS.schedules)}
daily_briefs = SCHEDULES["daily_briefs"]
backlog_every_5_minutes = SCHEDULES["backlog_every_5_minutes"]


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def sensor_context(instance, database_url):
    return build_sensor_context(instance=instance, resources=resources_for(database_url))


def pending(db, person_id: int, kind: str = "plan", for_date=None) -> dict:
    return db.execute(
        QUERIES.insert_pending_document.sql,
        {"person_id": person_id, "kind": kind, "for_date": for_date},
    ).fetchone()


# ── definitions ─────────────────────────────────────────────────────────


def test_definitions_load_with_everything_running_by_default():
    from delivery_pipeline.dagster_defs.definitions import defs

    repo = defs().get_repository_def()
    assert {j.name for j in repo.get_all_jobs()} >= {
        "deliver_documents",
        "generate_documents",
        "generate_and_deliver",
        "request_document",
        "enqueue_daily_briefs",
        "refresh_backlog",
    }
    sensors = {s.name: s for s in repo.sensor_defs}
    assert set(sensors) >= {"delivery_heartbeat", "pending_generation"}
    assert sensors["delivery_heartbeat"].default_status == DefaultSensorStatus.RUNNING
    assert sensors["delivery_heartbeat"].minimum_interval_seconds == 30
    assert sensors["delivery_heartbeat"].job_name == "deliver_documents"
    schedules = {s.name: s for s in repo.schedule_defs}
    assert schedules["daily_briefs"].cron_schedule == "*/15 * * * *"
    assert schedules["daily_briefs"].default_status == DefaultScheduleStatus.RUNNING
    assert schedules["backlog_every_5_minutes"].cron_schedule == "*/5 * * * *"
    assert repo.assets_defs_by_key  # delivery_backlog
    assert deliver_documents.tags[SWEEP_TAG] == generate_and_deliver.tags[SWEEP_TAG]


def dg_check_defs(tmp_path: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """``dg check defs`` on the project ([tool.dg] in pyproject.toml), as CI would run it."""
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    # DAGSTER_HOME of its own: from the project root the CLI would otherwise load the
    # run command's dagster.yaml, whose Postgres storage needs DAGSTER_PG_URL.
    env = {**os.environ, "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home), **environ}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        [str(Path(sys.executable).parent / "dg"), "check", "defs", "--use-active-venv"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_dg_check_defs_passes_and_catches_bad_settings(tmp_path):
    ok = dg_check_defs(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "All definitions loaded successfully" in ok.stdout + ok.stderr

    bad = dg_check_defs(tmp_path, DELIVERY_LEASE_SECONDS="ten")
    assert bad.returncode != 0
    assert "DELIVERY_LEASE_SECONDS" in bad.stdout + bad.stderr


@pytest.mark.filterwarnings("ignore::dagster.BetaWarning")
def _reads_a_variable(config_type: Any, path: str = "") -> list[str]:
    """Where a run config schema takes ``{"env": NAME}`` (Dagster's *Source types)."""
    kind = config_type.kind
    if kind == ConfigTypeKind.SCALAR_UNION or "Source" in config_type.key:
        return [path]
    if ConfigTypeKind.has_fields(kind):
        return [
            found
            for name, field in config_type.fields.items()
            for found in _reads_a_variable(field.config_type, f"{path}.{name}")
        ]
    if kind in (ConfigTypeKind.ARRAY, ConfigTypeKind.NONEABLE, ConfigTypeKind.MAP):
        return _reads_a_variable(config_type.inner_type, f"{path}[]")
    return []


def test_no_run_config_reads_a_variable_or_configures_a_resource() -> None:
    """What the launchpad offers: no resource config (endpoints, secrets, thresholds are
    the processes' environment), and no field that reads a variable of the run."""
    from delivery_pipeline.dagster_defs.definitions import build_definitions

    repository = build_definitions(Settings()).get_repository_def()
    for job in repository.get_all_jobs():
        schema = job.run_config_schema.config_type
        assert _reads_a_variable(schema) == [], job.name
        resources = schema.fields["resources"].config_type.fields
        for name, resource in resources.items():
            assert resource.config_type.fields["config"].config_type.fields == {}, (job, name)


@pytest.mark.parametrize(
    ("setting", "executor"),
    [("multiprocess", "multiprocess_sweepers"), ("docker", "docker_sweepers"),
     ("k8s", "k8s_sweepers")],
)  # fmt: skip
def test_the_sweeping_jobs_executor_is_a_setting(setting: str, executor: str) -> None:
    """DELIVERY_EXECUTOR chooses where the sweepers run, with no code change; every
    sweeper of a run at once whichever it is; the small jobs stay in process."""
    from delivery_pipeline.dagster_defs.definitions import build_definitions
    from delivery_pipeline.settings import MAX_SWEEPERS

    settings = Settings.from_env({"DELIVERY_EXECUTOR": setting})
    repo = build_definitions(settings).get_repository_def()
    for name in ("deliver_documents", "generate_and_deliver"):
        chosen = repo.get_job(name).executor_def
        assert chosen.name == executor, name
        assert chosen.apply_config_mapping({}).value["config"]["max_concurrent"] == MAX_SWEEPERS
    for name in ("refresh_backlog", "delivery_checks", "prune_history", "enqueue_daily_briefs"):
        assert repo.get_job(name).executor_def.name == "in_process", name


def test_every_scheduled_run_has_a_maximum_runtime_below_its_period(instance) -> None:
    """Run monitoring fails a scheduled run past its bound (dagster/max_runtime), before
    the next one of the same schedule would start beside it."""
    from delivery_pipeline.dagster_defs.definitions import build_definitions
    from delivery_pipeline.dagster_defs.schedules import MAX_RUNTIME_TAG

    repository = build_definitions(Settings()).get_repository_def()
    schedules = {s.name: s for s in repository.schedule_defs}
    periods = {
        "daily_briefs": 15 * 60,
        "backlog_every_5_minutes": 5 * 60,
        "checks_every_5_minutes": 5 * 60,
        "daily_delivery_report": 24 * 3600,
        "prune_history_daily": 24 * 3600,
    }
    assert set(schedules) == set(periods)
    for name, schedule in schedules.items():
        context = build_schedule_context(
            instance=instance,
            scheduled_execution_time=dt.datetime(2030, 1, 2, 0, 15, tzinfo=dt.UTC),
            repository_def=repository,
        )
        (request,) = schedule.evaluate_tick(context).run_requests or []
        bound = int(request.tags[MAX_RUNTIME_TAG])
        assert 0 < bound < periods[name], name


def test_heartbeat_interval_comes_from_the_environment():
    env = {**os.environ, "PYTHONPATH": str(REPO), "DELIVERY_HEARTBEAT_SECONDS": "7"}
    out = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            "from delivery_pipeline.dagster_defs.definitions import defs; "
            "print(defs().get_sensor_def('delivery_heartbeat').minimum_interval_seconds)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "7"


# ── the generator holds no messaging credentials ────────────────────────

MESSAGING_SECRETS = {
    "WHATSAPP_ACCESS_TOKEN": "EAAG-real-looking-token",
    "WHATSAPP_APP_SECRET": "app-secret-value",
    "WHATSAPP_VERIFY_TOKEN": "verify-token-value",
    "WHATSAPP_PHONE_NUMBER_ID": "987654321098765",
}


def test_generator_resource_has_no_access_to_messaging_credentials(monkeypatch):
    for key, value in MESSAGING_SECRETS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-generator")
    settings = Settings.from_env()
    generator = GeneratorResource(settings.generation)

    # by construction: the generation section has no field that could carry one
    assert set(GenerationSettings.model_fields) == {
        "backend",
        "openai_base_url",
        "openai_model",
        "openai_api_key",
        "timeout_seconds",
        "max_retries",
        "lease_seconds",
        "max_attempts",
        "backoff_base_seconds",
        "backoff_max_seconds",
        "batch_size",
        "misconfigured_pause_seconds",
        "sensor_seconds",
    }
    # the resource and what it builds hold none of the values
    for text in (repr(generator), repr(vars(generator.build()))):
        assert not any(secret in text for secret in MESSAGING_SECRETS.values()), text
    # ...while the delivery resource gets the token it sends with, and no webhook secret
    resources = build_resources(settings)
    cloud_api = resources["cloud_api"].resource_fn(None)
    assert cloud_api.settings.access_token.get_secret_value() == "EAAG-real-looking-token"
    assert cloud_api.settings.app_secret is None and cloud_api.settings.verify_token is None
    # and a generation run is not given the Cloud API resource at all
    from delivery_pipeline.dagster_defs.definitions import defs

    definitions = defs()

    def required(name: str) -> set[str]:
        return set(definitions.resolve_job_def(name).get_required_resource_defs())

    # (delivery: which kinds await review; it holds no credential)
    assert required("generate_documents") == {
        "io_manager",
        "app_db",
        "generator",
        "delivery_service",
        "delivery",
    }
    for name in ("request_document", "enqueue_daily_briefs", "refresh_backlog"):
        assert "cloud_api" not in required(name) and "generator" not in required(name), name
    assert required("deliver_documents") == {"io_manager", "app_db", "cloud_api", "delivery"}


class Tripwire(ConfigurableResource):
    """A Cloud API resource that fails the run if anything initialises it."""

    def setup_for_execution(self, context: InitResourceContext) -> None:
        raise RuntimeError("the Cloud API resource was initialised")


def test_a_generation_run_never_initialises_the_cloud_api(db, database_url, instance):
    person = add_person(db)
    pending(db, person["id"])
    resources = {**resources_for(database_url), "cloud_api": Tripwire()}

    generated = execute(generate_documents, resources=resources, instance=instance)
    assert generated.success
    swept = execute(deliver_documents, resources=resources, instance=instance, raise_on_error=False)
    assert not swept.success, "the tripwire works: delivery does need the Cloud API"


# ── settings reach the runs ─────────────────────────────────────────────


def test_generator_timeout_and_retries_from_the_environment_reach_a_generation_run(
    db, database_url, instance, monkeypatch
):
    """GENERATOR_MAX_RETRIES and GENERATOR_TIMEOUT_SECONDS, set in the environment the code
    location loads with, govern the requests a generate_documents run makes."""
    from delivery_pipeline.dagster_defs.definitions import build_definitions
    from delivery_pipeline_tests.support.dagster_support import NOWHERE
    from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer, chat_completion

    person = add_person(db)
    doc = pending(db, person["id"])

    def run(fake_url: str, **environ: str) -> dict:
        for name, value in {
            "DATABASE_URL": database_url,
            "DELIVERY_SERVICE_URL": NOWHERE,
            "GENERATOR_BACKEND": "openai",
            "OPENAI_BASE_URL": fake_url,
            "OPENAI_API_KEY": "sk-test",
            "GENERATOR_MAX_RETRIES": "",
            "GENERATOR_TIMEOUT_SECONDS": "",
            **environ,
        }.items():
            monkeypatch.setenv(name, value)
        job = build_definitions(Settings.from_env()).resolve_job_def("generate_documents")
        result = job.execute_in_process(instance=instance)
        [materialization] = result.asset_materializations_for_node("generated_documents")
        db.execute("UPDATE documents SET next_generation_at = now() WHERE id = %(id)s", doc)
        return {k: v.value for k, v in materialization.metadata.items()}

    busy = Answer(503, {"error": "busy"}, headers=(("Retry-After", "0"),))
    with FakeHttpServer(busy) as fake:
        assert run(fake.url, GENERATOR_MAX_RETRIES="3")["retry_scheduled"] == 1
        assert len(fake.requests) == 4, "one request and three retries (the default is two)"

    slow = Answer(200, chat_completion("A plan."), delay_seconds=3.0)
    with FakeHttpServer(slow) as fake:
        outcome = run(fake.url, GENERATOR_TIMEOUT_SECONDS="0.5", GENERATOR_MAX_RETRIES="0")
        assert (outcome["succeeded"], outcome["retry_scheduled"]) == (0, 1), "timed out"
        assert len(fake.requests) == 1


# ── the heartbeat sensor ────────────────────────────────────────────────


def test_heartbeat_skips_when_nothing_is_eligible(db, database_url, instance):
    result = delivery_heartbeat(sensor_context(instance, database_url))
    assert isinstance(result, SkipReason)
    assert "Nothing eligible for delivery" in result.skip_message


def test_heartbeat_says_sending_is_paused_and_what_waits_behind_it(db, database_url, instance):
    for _ in range(2):
        person = add_person(db)
        add_document(db, person["id"], "A plan.")
    db.execute(
        "UPDATE sender_state SET paused_at = now() - interval '5 minutes', pause_code = 190, "
        "pause_reason = 'access token expired', next_probe_at = now() + interval '4 minutes' "
        "WHERE phone_number_id = '*'"
    )
    result = delivery_heartbeat(sensor_context(instance, database_url))
    assert isinstance(result, SkipReason)
    message = result.skip_message
    assert message.startswith("Sending is paused for every sender since ")
    assert "code 190: access token expired" in message
    assert "2 documents wait behind it" in message and "delivery-pipeline resume" in message
    assert "Nothing eligible" not in message


def test_heartbeat_says_which_documents_wait_and_for_what(db, database_url, instance):
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], "A plan.")
    db.execute(
        "UPDATE documents SET knock_held_since = now(), next_attempt_at = now() + interval "
        "'10 minutes' WHERE id = %(id)s",
        doc,
    )
    result = delivery_heartbeat(sensor_context(instance, database_url))
    assert isinstance(result, SkipReason)
    assert "1 documents wait, none due" in result.skip_message
    assert "1 hold their knock for a template" in result.skip_message


def test_heartbeat_requests_one_sweep_when_something_is_eligible(db, database_url, instance):
    person = add_person(db)
    add_document(db, person["id"], "A plan.")
    result = delivery_heartbeat(sensor_context(instance, database_url))
    assert isinstance(result, RunRequest)
    assert result.run_key.startswith("heartbeat-")
    assert not result.run_key.removeprefix("heartbeat-").startswith(str(person["id"]))


@pytest.mark.parametrize(
    "status",
    [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.NOT_STARTED,
    ],
)
def test_heartbeat_requests_nothing_while_a_sweep_is_in_flight(db, database_url, instance, status):
    person = add_person(db)
    add_document(db, person["id"], "A plan.")
    run = add_run(instance, "deliver_documents", status)
    add_run(instance, "generate_documents", DagsterRunStatus.SUCCESS)

    result = delivery_heartbeat(sensor_context(instance, database_url))

    assert isinstance(result, SkipReason) and run.run_id in result.skip_message


@pytest.mark.parametrize(
    "status", [DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]
)
def test_heartbeat_requests_again_after_the_sweep_ended(db, database_url, instance, status):
    person = add_person(db)
    add_document(db, person["id"], "A plan.")
    add_run(instance, "deliver_documents", status)
    add_run(instance, "generate_documents", DagsterRunStatus.STARTED)  # another job: irrelevant
    assert isinstance(delivery_heartbeat(sensor_context(instance, database_url)), RunRequest)


def test_heartbeat_is_quiet_for_a_document_awaiting_a_knock_reply(
    db, database_url, instance, sandbox
):
    person = add_person(db, inbound_age_seconds=None)  # never wrote: window closed
    doc = add_document(db, person["id"], plan_body(3))
    assert isinstance(delivery_heartbeat(sensor_context(instance, database_url)), RunRequest)

    run = execute(
        deliver_documents, resources=resources_for(database_url, sandbox.url), instance=instance
    )
    [materialization] = run.asset_materializations_for_node("delivered_documents")
    assert materialization.metadata["knocked"].value == 1
    assert len(knocks(sandbox.inbox(person["phone"]))) == 1
    assert document(db, doc["id"])["awaiting_reply_since"] is not None

    result = delivery_heartbeat(sensor_context(instance, database_url))
    assert isinstance(result, SkipReason) and "Nothing eligible" in result.skip_message


# ── the pending-generation sensor ───────────────────────────────────────


def test_generation_sensor(db, database_url, instance):
    assert isinstance(pending_generation(sensor_context(instance, database_url)), SkipReason)
    person = add_person(db)
    pending(db, person["id"])
    request = pending_generation(sensor_context(instance, database_url))
    assert isinstance(request, RunRequest) and request.run_key.startswith("pending_generation-")
    run = add_run(instance, "generate_documents", DagsterRunStatus.STARTED)
    skip = pending_generation(sensor_context(instance, database_url))
    assert isinstance(skip, SkipReason) and run.run_id in skip.skip_message


# ── schedules ───────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("schedule", "job_name"),
    [(daily_briefs, "enqueue_daily_briefs"), (backlog_every_5_minutes, "refresh_backlog")],
)
def test_schedules_request_their_job(instance, schedule, job_name):
    at = dt.datetime(2031, 6, 1, 7, 15, tzinfo=dt.UTC)
    context = build_schedule_context(instance=instance, scheduled_execution_time=at)
    [request] = schedule.evaluate_tick(context).run_requests
    assert schedule.job_name == job_name
    assert isinstance(request, RunRequest)


# ── jobs ────────────────────────────────────────────────────────────────


def test_enqueue_daily_briefs_job_is_idempotent_and_abandons_stale(db, database_url, instance):
    person = add_person(
        db,
        time_zone="Asia/Tokyo",
        brief_opt_in=True,
        brief_local_time="00:00",
        inbound_age_seconds=None,
    )
    old = pending(db, person["id"], "daily_brief", dt.date(2020, 1, 1))
    resources = resources_for(database_url)

    first = execute(enqueue_daily_briefs, resources=resources, instance=instance)
    second = execute(enqueue_daily_briefs, resources=resources, instance=instance)

    assert first.output_for_node("enqueue_briefs_op") == {
        "enqueued": 1,
        "abandoned_stale": 1,
        "abandoned_by_state": {"pending": 1},
    }
    assert second.output_for_node("enqueue_briefs_op")["enqueued"] == 0
    assert document(db, old["id"])["abandon_reason"] == "stale"
    local_today = db.execute("SELECT (now() AT TIME ZONE 'Asia/Tokyo')::date AS d").fetchone()["d"]
    briefs = db.execute(
        "SELECT for_date FROM documents WHERE person_id = %(p)s AND abandoned_at IS NULL",
        {"p": person["id"]},
    ).fetchall()
    assert briefs == [{"for_date": local_today}]
    [materialization] = [e for e in first.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    assert materialization.event_specific_data.metadata["enqueued"].value == 1


def test_request_document_job(db, database_url, instance):
    person = add_person(db)
    ok = request_document_job.execute_in_process(
        run_config={
            "ops": {"request_document_op": {"config": {"person": person["phone"], "kind": "plan"}}}
        },
        resources=resources_for(database_url),
        instance=instance,
    )
    doc = document(db, ok.output_for_node("request_document_op"))
    assert (doc["person_id"], doc["kind"], doc["status"]) == (person["id"], "plan", "pending")

    bad = request_document_job.execute_in_process(
        run_config={"ops": {"request_document_op": {"config": {"person": "+15550000000"}}}},
        resources=resources_for(database_url),
        instance=instance,
        raise_on_error=False,
    )
    assert not bad.success
    [failure] = [e for e in bad.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "no person" in str(failure.event_specific_data.error.message)


def test_generation_job_fails_visibly_when_the_generator_is_misconfigured(
    db, database_url, instance
):
    from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer

    person = add_person(db)
    doc = pending(db, person["id"])
    with FakeHttpServer(Answer(401, {"error": "bad key"})) as fake:
        resources = {
            **resources_for(database_url),
            "generator": GeneratorResource(
                GenerationSettings(
                    backend="openai", openai_base_url=fake.url, openai_api_key="sk-wrong"
                )
            ),
        }
        result = execute(
            generate_documents, resources=resources, instance=instance, raise_on_error=False
        )
    assert not result.success
    assert document(db, doc["id"])["status"] == "pending"


@pytest.mark.slow
def test_a_job_generates_and_delivers_a_plan_end_to_end(db, database_url, instance, sandbox):
    person = add_person(db, name="Marta", locale="es", time_zone="America/Mexico_City")
    person_writes(database_url, sandbox, person, "hola")  # the window is open
    requested = request_document_job.execute_in_process(
        run_config={"ops": {"request_document_op": {"config": {"person": str(person["id"])}}}},
        resources=resources_for(database_url),
        instance=instance,
    )
    doc_id = requested.output_for_node("request_document_op")
    request = pending_generation(sensor_context(instance, database_url))
    assert isinstance(request, RunRequest)

    result = execute(
        generate_and_deliver,
        resources=resources_for(database_url, sandbox.url),
        instance=instance,
    )

    assert result.success
    [generated] = result.asset_materializations_for_node("generated_documents")
    [swept] = result.asset_materializations_for_node("delivered_documents")
    assert generated.metadata["succeeded"].value == 1
    assert generated.metadata["poke_failed"].value == 1  # no service: the heartbeat backstops
    [row] = generated.metadata["by_kind_and_locale"].value.records
    assert row.data == {"kind": "plan", "locale": "es", "generated": 1, "failed": 0, "retrying": 0}
    doc = document(db, doc_id)
    chunks = delivery_messages(doc["body"], 4096)
    assert doc["body"].startswith("Marta, tu plan") and len(chunks) >= 3
    assert swept.metadata["delivered"].value == 1
    assert swept.metadata["chunks_delivered"].value == len(chunks)
    assert swept.metadata["sweep"].value["chunks_sent"] == len(chunks)
    assert texts(sandbox.inbox(person["phone"])) == chunks
    assert doc["delivered_at"] is not None
    assert isinstance(delivery_heartbeat(sensor_context(instance, database_url)), SkipReason)
    assert isinstance(pending_generation(sensor_context(instance, database_url)), SkipReason)


def test_deliver_documents_records_the_sweep_as_metadata(db, database_url, instance, sandbox):
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], plan_body(2))
    result = execute(
        deliver_documents, resources=resources_for(database_url, sandbox.url), instance=instance
    )
    [materialization] = result.asset_materializations_for_node("delivered_documents")
    metadata = materialization.metadata
    assert metadata["delivered"].value == 1 and metadata["chunks_delivered"].value == 2
    assert metadata["abandoned"].value == 0 and metadata["knocked"].value == 0
    assert metadata["sweep"].value["chunks_sent"] == 2
    assert metadata["sweep"].value["sweepers"] == 2  # DELIVERY_SWEEPERS, all in one event
    assert metadata["source"].value == f"dagster-run:{result.run_id}"
    [listed] = metadata["documents"].value
    assert (listed["document"], listed["event"], listed["chunks"]) == (doc["id"], "delivered", 2)
    # the run reported its own outbox row: the sensor finds nothing of it to record
    outbox = db.execute("SELECT claimed_by, reported_at FROM delivery_events").fetchall()
    assert [r["claimed_by"] for r in outbox] == [f"run:{result.run_id}"]


# ── the backlog asset ───────────────────────────────────────────────────


def _set(db, doc: dict[str, Any], assignments: str) -> None:
    """The document's columns as ``assignments`` (SQL) says."""
    db.execute(f"UPDATE documents SET {assignments} WHERE id = %(id)s", {"id": doc["id"]})


def test_backlog_asset_counts_and_ages_per_state(db, database_url, instance):
    person = add_person(db)
    pending(db, person["id"])
    _set(db, pending(db, person["id"]), "created_at = now() - interval '2 hours'")
    _set(db, add_document(db, person["id"], "x"), "generated_at = now() - interval '45 minutes'")
    _set(db, add_document(db, person["id"], "y"), "awaiting_reply_since = now()")
    _set(db, add_document(db, person["id"], "z"), "delivered_at = now()")
    stale = add_document(db, person["id"], "w", kind="daily_brief", for_date=dt.date(2020, 1, 1))
    _set(db, stale, "abandoned_at = now(), abandon_reason = 'stale'")
    _set(db, add_document(db, person["id"], "v"), "delivered_at = now() - interval '2 days'")

    result = materialize(
        [delivery_backlog], resources=resources_for(database_url), instance=instance
    )

    frame: pd.DataFrame = result.output_for_node("delivery_backlog")
    counts = {(r.state, r.reason): r.count for r in frame.itertuples()}
    assert counts[("pending", "")] == 2 and counts[("generating", "")] == 0
    assert counts[("undelivered", "")] == 1 and counts[("awaiting_reply", "")] == 1
    assert counts[("delivered_today", "")] == 1, "yesterday's delivery is not today's"
    assert counts[("abandoned_today", "stale")] == 1
    assert counts[("abandoned_today", "max_attempts")] == 0
    [materialization] = result.asset_materializations_for_node("delivery_backlog")
    md = materialization.metadata
    assert md["pending_count"].value == 2
    assert 7190 <= md["pending_oldest_age_seconds"].value <= 7300
    assert 2690 <= md["undelivered_oldest_age_seconds"].value <= 2800
    assert md["waiting_total"].value == 4
    assert md["abandoned_today_stale_count"].value == 1
    table = md["backlog"].value
    assert [c.name for c in table.schema.columns] == [
        "state",
        "reason",
        "owner",
        "count",
        "oldest_age_seconds",
    ]
    rows = {(r.data["state"], r.data["reason"]): r.data for r in table.records}
    assert rows[("awaiting_reply", "")]["owner"] == "the person"
    assert rows[("awaiting_reply", "")]["count"] == 1
    assert rows[("delivered_today", "")]["oldest_age_seconds"] is None  # no age, no NaN
    assert md["dagster/row_count"].value == len(frame)
    # the asset itself declares the schema (the UI's Overview shows the columns)
    assert (
        delivery_backlog.specs_by_key[delivery_backlog.key].metadata["dagster/column_schema"]
        == table.schema
    )


def test_backlog_of_an_empty_database_is_all_zeros(database_url, instance):
    result = materialize(
        [delivery_backlog], resources=resources_for(database_url), instance=instance
    )
    frame = result.output_for_node("delivery_backlog")
    # a row per waiting state, delivered today, and abandoned today per reason
    waiting, reasons = len(WAITING_STATE_OWNERS), len(AbandonReason)
    assert frame["count"].sum() == 0 and len(frame) == waiting + 1 + reasons


# ── instance configuration ──────────────────────────────────────────────


def _load_instance(
    tmp_path: Path, config: Path, env: dict[str, str], monkeypatch
) -> DagsterInstance:
    home = tmp_path / f"home-{uuid.uuid4().hex[:6]}"
    home.mkdir()
    (home / "dagster.yaml").write_text(config.read_text())
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return DagsterInstance.from_config(str(home))


@pytest.fixture
def dagster_storage_url(pg_admin_url):
    import psycopg

    from delivery_pipeline.store.db import ensure_database, sqlalchemy_url, with_database

    name = f"dp_dagster_{uuid.uuid4().hex[:10]}"
    ensure_database(pg_admin_url, name)
    yield sqlalchemy_url(with_database(pg_admin_url, name)), with_database(pg_admin_url, name)
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _assert_queue_and_storage(instance: DagsterInstance) -> None:
    from dagster._core.run_coordinator import QueuedRunCoordinator

    assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
    limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits or []
    # Sweeps may overlap: the claim and the shared pacer make them safe together.
    assert SWEEP_TAG not in [dict(limit)["key"] for limit in limits]
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    run = add_run(instance, "deliver_documents", DagsterRunStatus.QUEUED)
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.QUEUED
    instance.report_engine_event("storage works", run)  # an event-log write (NOTIFY path)


def test_project_dagster_yaml_loads_on_postgres(tmp_path, monkeypatch, dagster_storage_url):
    url, _ = dagster_storage_url
    instance = _load_instance(tmp_path, REPO / "dagster.yaml", {"DAGSTER_PG_URL": url}, monkeypatch)
    with instance:
        _assert_queue_and_storage(instance)
        assert instance.get_settings("retention")["sensor"]["purge_after_days"]["skipped"] == 1


def _deploy_storage_env(libpq_url: str) -> dict[str, str]:
    """The environment ``deploy/dagster.yaml`` reads its storage from, for the
    server of ``libpq_url``, the way docs/how-to/deploy.md tells an operator to set it.

    Dagster writes the host into the URL's authority (``user@host:port/db``),
    where a Unix-socket directory cannot go: for a socket the host stays empty
    and libpq finds the directory in its own ``PGHOST``."""
    import psycopg

    info = psycopg.conninfo.conninfo_to_dict(libpq_url)
    host = str(info.get("host") or "127.0.0.1")
    socket = host.startswith("/")
    env = {
        "DAGSTER_PG_HOST": "" if socket else host,
        "DAGSTER_PG_PORT": str(info.get("port") or 5432),
        "DAGSTER_PG_USER": str(info.get("user") or "postgres"),
        "DAGSTER_PG_PASSWORD": str(info.get("password") or "unused-with-trust-auth"),
        "DAGSTER_PG_DB": str(info["dbname"]),
    }
    if socket:
        env["PGHOST"] = host
    return env


def test_deploy_dagster_yaml_loads_on_postgres(tmp_path, monkeypatch, dagster_storage_url):
    from dagster._core.instance.config import dagster_instance_config

    from delivery_pipeline.dagster_defs.launcher import SettingsDockerRunLauncher

    _, libpq = dagster_storage_url
    env = _deploy_storage_env(libpq)
    deploy = REPO / "deploy" / "dagster.yaml"
    # the whole file against Dagster's instance schema, run launcher included
    config, _ = dagster_instance_config(str(deploy.parent), "dagster.yaml")
    assert config["run_launcher"]["class"] == "SettingsDockerRunLauncher"
    instance = _load_instance(tmp_path, deploy, env, monkeypatch)
    with instance:
        _assert_queue_and_storage(instance)
        assert instance.get_settings("run_monitoring")["max_runtime_seconds"] == 7200
        assert isinstance(instance.run_launcher, SettingsDockerRunLauncher)
        assert instance.managed_python_loggers == ["delivery_pipeline"]
        assert type(instance.compute_log_manager).__name__ == "LocalComputeLogManager"


def _env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines, as docker compose's env_file reads them (comments skipped)."""
    pairs = (
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {key.strip(): value for key, value in pairs}


def _launch(instance: DagsterInstance) -> tuple[Exception, dict[str, str]]:
    """Launch a run with the instance's run launcher; what stopped it, and the
    environment its container was to get."""
    from dagster._core.code_pointer import ModuleCodePointer
    from dagster._core.launcher import LaunchRunContext
    from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.utils import parse_env_var

    origin = JobPythonOrigin(
        "deliver_documents",
        RepositoryPythonOrigin(
            executable_path=sys.executable,
            code_pointer=ModuleCodePointer(
                "delivery_pipeline.dagster_defs.definitions", "defs", working_directory=None
            ),
            container_image="delivery-pipeline:test",
        ),
    )
    run = instance.add_run(
        DagsterRun(job_name="deliver_documents", run_id=str(uuid.uuid4()), job_code_origin=origin)
    )
    launcher = instance.run_launcher
    context = launcher.get_container_context(run)  # type: ignore[attr-defined]
    environment = dict(parse_env_var(name) for name in context.env_vars)
    with pytest.raises(Exception) as stopped:
        launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
    return stopped.value, environment


@pytest.mark.parametrize("env_file", ["minimal", "every variable"])
def test_deploy_run_launcher_gets_past_its_environment(
    tmp_path, monkeypatch, dagster_storage_url, env_file
):
    """deploy/dagster.yaml's run launcher, built by Dagster from the file, launches
    from the environment file a deployment has: only the required values (the
    example's filled-in lines), or every variable with most of them empty. The
    launch stops at the Docker engine this machine does not run, not before it at
    the environment (Dagster's own launcher raised "Tried to load environment
    variable DELIVERY_DATA_DIR, but it was not set" for the first unset name)."""
    import docker.errors

    from delivery_pipeline.dagster_defs.launcher import (
        STORAGE_VARIABLES,
        setting_variables,
        withheld,
    )

    example = _env_file(REPO / "deploy" / "delivery.env.example")
    daemon_env = {k: v for k, v in example.items() if v} if env_file == "minimal" else example
    for name in {*setting_variables(), *STORAGE_VARIABLES, *example}:
        monkeypatch.delenv(name, raising=False)
    for name, value in daemon_env.items():
        monkeypatch.setenv(name, value)
    # no engine here, and none found by accident: an address nobody serves
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    _, libpq = dagster_storage_url
    instance = _load_instance(
        tmp_path, REPO / "deploy" / "dagster.yaml", _deploy_storage_env(libpq), monkeypatch
    )
    with instance:
        stopped, environment = _launch(instance)
    assert "Tried to load environment variable" not in str(stopped)
    assert isinstance(stopped, docker.errors.DockerException), repr(stopped)
    # the run gets every value the deployment set but the secrets no run reads, and no
    # name it left unset or empty
    settings_set = {
        k for k, v in daemon_env.items() if v and k in setting_variables() and not withheld(k, v)
    }
    assert set(environment) == settings_set | set(_deploy_storage_env(libpq))
    assert environment["DATABASE_URL"] == example["DATABASE_URL"]
    assert environment["WHATSAPP_ACCESS_TOKEN"] == example["WHATSAPP_ACCESS_TOKEN"]
    assert "DELIVERY_DATA_DIR" not in environment
    for service_only in ("WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"):
        assert example[service_only] and service_only not in environment, service_only


def test_cloud_api_resource_settings_use_its_endpoint():
    whatsapp = WhatsAppSettings(api_base_url="http://127.0.0.1:1/", access_token="tok")
    settings = engine_settings(
        AppDatabase(), CloudApiResource(whatsapp), DeliveryResource()
    ).whatsapp
    assert settings.api_base_url == "http://127.0.0.1:1"
    assert settings.access_token.get_secret_value() == "tok"
