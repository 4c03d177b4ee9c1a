"""The Dagster UI never shows a secret: every secret setting set to a unique value,
a real webserver and daemon, and everything its GraphQL API says searched for them.

What the UI reads is what GraphQL answers: the resources and their configured
values, every job's default run config (the launchpad) and presets, the assets
and their metadata, sensors and schedules with their ticks, the instance's own
configuration, runs with their config, event logs and captured output. The
selections are built from the server's schema (``support/graphql_walk.py``),
so a field nobody thought of is read too.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import psycopg
import pytest
import yaml

from delivery_pipeline.cli.children import prepare_dagster_home
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect, ensure_database, with_database
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.supervisor import Child
from delivery_pipeline.testing.sandbox import REPO_ROOT, WebhookReceiver, free_port
from delivery_pipeline.watch.alerts import Alert, AlertChannel, AlertSeverity, record_once
from delivery_pipeline_tests.support.data import add_person
from delivery_pipeline_tests.support.fake_http import Answer, FakeHttpServer, chat_completion
from delivery_pipeline_tests.support.graphql_walk import INTROSPECTION, Walker
from delivery_pipeline_tests.support.secret_values import (
    SECRET_VARIABLES,
    every_secret_variable_covered,
    needles,
    role_with_password,
    secret_environment,
    url_as,
)

pytestmark = pytest.mark.slow

LOCATION = "delivery_pipeline"
REPOSITORY = "__repository__"
# Depth of the selections: enough to reach a resource's configured values from
# the repository, and a run's events from the run.
DEPTH = 4


def _executable(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@dataclass
class Dagster:
    url: str
    env: dict[str, str]
    needles: dict[str, str]
    webserver: Child
    daemon: Child
    hooks: WebhookReceiver
    generator: FakeHttpServer
    app_db_url: str

    def ask(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole answer, errors included (an error's text may leak as well)."""
        response = httpx.post(
            f"{self.url}/graphql",
            json={"query": query, "variables": variables or {}},
            timeout=120,
        )
        # Dagster answers 500 when a field failed, with the rest of the data
        assert response.status_code in (200, 500), (query[:200], response.text[:2000])
        body: dict[str, Any] = response.json()
        return body

    def logs(self) -> str:
        return (
            f"--- webserver ---\n{self.webserver.tail(80)}\n--- daemon ---\n{self.daemon.tail(80)}"
        )


def _clean_environment() -> dict[str, str]:
    """This process's environment without any setting of the project or of Dagster."""
    ours = set(Settings.env_names()) | set(SECRET_VARIABLES)
    return {k: v for k, v in os.environ.items() if k not in ours and not k.startswith("DAGSTER_")}


@pytest.fixture(scope="module")
def dagster(pg_admin_url: str, template_database: str) -> Iterator[Dagster]:
    suffix = uuid.uuid4().hex[:10]
    app_db, dagster_db = f"dp_secret_{suffix}", f"dp_secret_dagster_{suffix}"
    root = Path(tempfile.mkdtemp(prefix="dp-secrets-"))
    generator_answers = Answer(200, chat_completion("A plan, from the generator."))
    with (
        role_with_password(pg_admin_url) as role,
        WebhookReceiver() as hooks,
        FakeHttpServer(generator_answers) as generator,
    ):
        ensure_database(pg_admin_url, app_db, template=template_database)
        ensure_database(pg_admin_url, dagster_db)
        # Alerts waiting for both channels: the alert sensor posts them (to nowhere) and
        # says how that went, in its tick.
        with connect(with_database(pg_admin_url, app_db)) as conn:
            for channel in AlertChannel:
                record_once(
                    conn,
                    Alert(f"test:secrets:{channel}", AlertSeverity.ERROR, "a test", {}, channel),
                )
        secrets = secret_environment(
            url_as(pg_admin_url, app_db, role),
            url_as(pg_admin_url, dagster_db, role, scheme="postgresql+psycopg2"),
            hooks.url,
            generator.url.removeprefix("http://"),
        )
        env = {
            **_clean_environment(),
            **secrets,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            ),
            "PYTHONUNBUFFERED": "1",
            "DAGSTER_HOME": str(prepare_dagster_home(root / "home")),
            "DELIVERY_QUIET_HOURS": "off",
            # generation asks the listener above, with OPENAI_API_KEY and nothing else
            "GENERATION_BACKEND": "openai",
        }
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        workspace = str(REPO_ROOT / "workspace.yaml")
        webserver = Child(
            "webserver",
            [_executable("dagster-webserver"), "-w", workspace, "-h", "127.0.0.1", "-p", str(port)],
            env,
            f"{url}/server_info",
            root / "webserver.log",
        )
        daemon = Child(
            "daemon",
            [_executable("dagster-daemon"), "run", "-w", workspace],
            env,
            None,
            root / "daemon.log",
        )
        deployment = Dagster(
            url,
            env,
            needles(secrets, role),
            webserver,
            daemon,
            hooks,
            generator,
            secrets["DATABASE_URL"],
        )
        try:
            webserver.start(REPO_ROOT, stream=False)
            daemon.start(REPO_ROOT, stream=False)
            deadline = time.monotonic() + 180
            while not webserver.ready():
                assert webserver.alive(), deployment.logs()
                assert time.monotonic() < deadline, deployment.logs()
                time.sleep(0.5)
            yield deployment
        finally:
            daemon.stop()
            webserver.stop()
            with psycopg.connect(pg_admin_url, autocommit=True) as conn:
                for name in (app_db, dagster_db):
                    conn.execute(
                        psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            psycopg.sql.Identifier(name)
                        )
                    )
            shutil.rmtree(root, ignore_errors=True)


def _leaks(dagster: Dagster, answer: Any) -> list[str]:
    text = json.dumps(answer)
    return sorted(name for name, value in dagster.needles.items() if value in text)


def _repository() -> dict[str, str]:
    return {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}


def _job(name: str) -> dict[str, str]:
    return {**_repository(), "pipelineName": name}


def test_every_secret_setting_of_the_model_is_in_the_test() -> None:
    assert every_secret_variable_covered() == set()


def test_the_dagster_ui_shows_no_secret(dagster: Dagster) -> None:
    # The sensors that use the secrets have run: the alert sensor has tried both channels.
    for sensor in ("ops_check_alerts", "delivery_heartbeat", "record_delivery_events"):
        _wait_for_tick(dagster, sensor)
    posted = dagster.hooks.wait_for(lambda got: len(got) >= 2, timeout=60)
    assert {hook.path.split("/")[-2] for hook in posted} >= {"B0", "B1"}, posted
    walker = Walker(
        dagster.ask(INTROSPECTION)["data"],
        # the asset graph's neighbours and a job's every op: the same nodes again, deeper
        skip=(
            # the asset graph's neighbours: the same nodes again, deeper
            "AssetNode.depended*",
            "AssetNode.dependencies",
            "AssetNode.assetsDependedBy",
            # fail for an asset without partitions (and would null the whole answer)
            "AssetNode.*ByPartition",
            # their resolvers need the argument the schema calls optional
            "SolidHandle.stepStats",
            "DaemonHealth.daemonStatus",
            "Instance.concurrencyLimit",
            # null (a tick without logs, a runless event), though declared non-null
            "InstigationEventConnection.cursor",
            "AssetMaterializationPlannedEvent.pipelineName",
        ),
    )

    def everything(root: str, type_name: str, args: str = "", depth: int = DEPTH) -> Any:
        query = walker.query(root, args, depth)
        answer = dagster.ask(query)
        assert answer.get("data") and answer["data"].get(root), (root, answer)
        return answer

    repo = json.dumps(_repository()).replace('"repositoryLocationName"', "repositoryLocationName")
    repo = repo.replace('"repositoryName"', "repositoryName")
    answers: dict[str, Any] = {}
    answers["resources"] = everything(
        "allTopLevelResourceDetailsOrError",
        "ResourceDetailsListOrError",
        f"(repositorySelector: {repo})",
    )
    # The test reads the resources: no config field, and each secret in force as "(set)".
    listed = answers["resources"]["data"]["allTopLevelResourceDetailsOrError"]
    listed = listed["ResourceDetailsList__results"]
    assert len(listed) >= 9, listed
    for resource in listed:
        assert resource["configFields"] == [] and resource["configuredValues"] == [], resource
    resources_text = json.dumps(answers["resources"])
    for shown in ("DATABASE_URL", "WHATSAPP_ACCESS_TOKEN", "OPS_WEBHOOK_URL", "OPENAI_API_KEY"):
        assert f"`{shown}`: (set)" in resources_text, shown
    answers["env vars"] = everything(
        "utilizedEnvVarsOrError", "EnvVarWithConsumersOrError", f"(repositorySelector: {repo})"
    )
    answers["repository"] = everything(
        "repositoryOrError", "RepositoryOrError", f"(repositorySelector: {repo})", depth=3
    )
    jobs = [
        job["name"]
        for job in dagster.ask(
            "query($s: RepositorySelector!) { repositoryOrError(repositorySelector: $s) "
            "{ ... on Repository { jobs { name } } } }",
            {"s": _repository()},
        )["data"]["repositoryOrError"]["jobs"]
    ]
    assert len(jobs) >= 10, jobs  # the nine jobs and the assets' own
    defaults: dict[str, str] = {}
    for job in jobs:
        selector = json.dumps(_job(job))
        for key in _job(job):
            selector = selector.replace(f'"{key}"', key)
        answers[f"{job}: launchpad"] = answer = everything(
            "runConfigSchemaOrError", "RunConfigSchemaOrError", f"(selector: {selector})", 2
        )
        defaults[job] = answer["data"]["runConfigSchemaOrError"]["RunConfigSchema__rootDefaultYaml"]
        answers[f"{job}: job"] = everything(
            "pipelineOrError", "PipelineOrError", f"(params: {selector})", depth=3
        )
        answers[f"{job}: resources"] = everything(
            "resourcesOrError", "ResourcesOrError", f"(pipelineSelector: {selector})"
        )
    # the launchpad offers no resource to configure, so no variable to pick
    for job, default in defaults.items():
        assert not (yaml.safe_load(default) or {}).get("resources"), (job, default)
    answers["sensors"] = everything(
        "sensorsOrError", "SensorsOrError", f"(repositorySelector: {repo})"
    )
    answers["schedules"] = everything(
        "schedulesOrError", "SchedulesOrError", f"(repositorySelector: {repo})"
    )
    answers["assets"] = everything("assetNodes", "AssetNode", depth=3)
    answers["instance"] = everything("instance", "Instance", depth=3)

    # A run launched from the launchpad with its defaults: its config, events and output.
    run_id = _launch(dagster, "refresh_backlog", defaults["refresh_backlog"])
    status = _wait_for_run(dagster, run_id)
    assert status == "SUCCESS", (status, _run_events(dagster, run_id), dagster.logs())
    answers["runs"] = everything("runsOrError", "RunsOrError", depth=3)
    answers["run"] = everything("runOrError", "RunOrError", f'(runId: "{run_id}")', depth=3)
    answers["run events"] = everything(
        "logsForRun", "EventConnectionOrError", f'(runId: "{run_id}")', depth=3
    )
    answers["run output"] = _captured_logs(dagster, run_id)

    # and the processes' own output (the webserver, the daemon, their code servers)
    answers["webserver log"] = dagster.webserver.log_path.read_text(errors="replace")
    answers["daemon log"] = dagster.daemon.log_path.read_text(errors="replace")
    leaks = {
        where: found for where, answer in answers.items() if (found := _leaks(dagster, answer))
    }
    assert leaks == {}, "\n".join(f"{where}: {', '.join(found)}" for where, found in leaks.items())


def _wait_for_tick(dagster: Dagster, sensor: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    selector = {**_repository(), "sensorName": sensor}
    while True:
        state = dagster.ask(
            "query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor "
            "{ sensorState { ticks(limit: 1) { status } } } } }",
            {"s": selector},
        )["data"]["sensorOrError"]["sensorState"]
        if any(t["status"] != "STARTED" for t in state["ticks"]):
            return
        assert time.monotonic() < deadline, (sensor, state, dagster.logs())
        time.sleep(1.0)


def _launch(dagster: Dagster, job: str, default_yaml: str) -> str:
    answer = dagster.ask(
        """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
             __typename ... on LaunchRunSuccess { run { runId } }
             ... on PythonError { message } ... on RunConfigValidationInvalid { errors { message } }
           } }""",
        {
            "p": {
                "selector": {**_repository(), "jobName": job},
                "runConfigData": yaml.safe_load(default_yaml) or {},
                "mode": "default",
            }
        },
    )
    launched = answer["data"]["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id: str = launched["run"]["runId"]
    return run_id


def _wait_for_run(dagster: Dagster, run_id: str, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while True:
        run = dagster.ask(
            "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }", {"id": run_id}
        )["data"]["runOrError"]
        if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            return str(run["status"])
        assert time.monotonic() < deadline, (run, dagster.logs())
        time.sleep(0.5)


def _run_events(dagster: Dagster, run_id: str) -> Any:
    return dagster.ask(
        "query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { "
        "__typename ... on MessageEvent { message } } } } }",
        {"id": run_id},
    )


def _captured_logs(dagster: Dagster, run_id: str) -> list[Any]:
    """The stdout and stderr the UI shows for each of the run's steps."""
    keys = dagster.ask(
        "query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { "
        "__typename ... on LogsCapturedEvent { fileKey stepKeys externalStdoutUrl } } } } }",
        {"id": run_id},
    )
    captured = [keys]
    for event in keys["data"]["logsForRun"]["events"]:
        if event["__typename"] != "LogsCapturedEvent":
            continue
        captured.append(
            dagster.ask(
                "query($k: [String!]!) { capturedLogs(logKey: $k) { stdout stderr cursor } }",
                {"k": [run_id, "compute_logs", event["fileKey"]]},
            )
        )
    # the run's output was read (Dagster's own lines at least)
    assert any((c["data"]["capturedLogs"] or {}).get("stderr") for c in captured[1:]), captured
    return captured


# ── what a launchpad user may tell a run ────────────────────────────────


def _launch_answer(dagster: Dagster, job: str, run_config: dict[str, Any]) -> dict[str, Any]:
    """What the webserver answers a launch of ``job`` with ``run_config`` (the launchpad's
    own mutation)."""
    answer = dagster.ask(
        """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
             __typename ... on LaunchRunSuccess { run { runId } }
             ... on PythonError { message }
             ... on RunConfigValidationInvalid { errors { message } }
           } }""",
        {"p": {"selector": {**_repository(), "jobName": job}, "runConfigData": run_config}},
    )
    launched: dict[str, Any] = answer["data"]["launchRun"]
    return launched


def _run_count(dagster: Dagster) -> int:
    runs = dagster.ask("{ runsOrError { ... on Runs { count } } }")["data"]["runsOrError"]
    return int(runs["count"])


def test_the_launchpad_refuses_endpoints_secrets_and_variables(dagster: Dagster) -> None:
    """The review's attack (a generation run with the generator's URL pointed at a
    listener and its key read from REVIEW_TOKEN) and its cousins are refused when the
    config is validated: no run starts, the listener hears nothing."""
    listener = "http://127.0.0.1:9/v1"
    review_token = {"env": "REVIEW_TOKEN"}
    attempts = {
        "generator's URL and key": (
            "generate_documents",
            {
                "resources": {
                    "generator": {
                        "config": {"openai_base_url": listener, "openai_api_key": review_token}
                    }
                }
            },
        ),
        "Cloud API's URL": (
            "deliver_documents",
            {"resources": {"cloud_api": {"config": {"api_base_url": listener}}}},
        ),
        "database URL": (
            "refresh_backlog",
            {"resources": {"app_db": {"config": {"database_url": {"env": "DAGSTER_PG_URL"}}}}},
        ),
        "IO manager's directory": (
            "prune_history",
            {"resources": {"io_manager": {"config": {"base_dir": review_token}}}},
        ),
        "an edited body read from a variable": (
            "review_document",
            {
                "ops": {
                    "review_document_op": {
                        "config": {
                            "document_id": 1,
                            "decision": "approve",
                            "body": {"env": "WHATSAPP_ACCESS_TOKEN"},
                        }
                    }
                }
            },
        ),
        "a person read from a variable": (
            "request_document",
            {"ops": {"request_document_op": {"config": {"person": {"env": "DATABASE_URL"}}}}},
        ),
        "a document id read from a variable": (
            "generate_documents",
            {"ops": {"generated_documents": {"config": {"document_id": {"env": "PGPORT"}}}}},
        ),
    }
    runs_before = _run_count(dagster)
    for what, (job, run_config) in attempts.items():
        answer = _launch_answer(dagster, job, run_config)
        assert answer["__typename"] == "RunConfigValidationInvalid", (what, answer)
        assert answer["errors"], (what, answer)
        assert not _leaks(dagster, answer), (what, _leaks(dagster, answer))
    assert _run_count(dagster) == runs_before
    # what a launch may still say: an op's own plain values
    answer = _launch_answer(
        dagster,
        "generate_documents",
        {"ops": {"generated_documents": {"config": {"limit": 1}}}},
    )
    assert answer["__typename"] == "LaunchRunSuccess", answer
    assert _wait_for_run(dagster, answer["run"]["runId"]) == "SUCCESS"


def test_a_generation_run_sends_the_generator_its_key_and_nothing_else(dagster: Dagster) -> None:
    """A generate_documents run, its generator a listener on loopback: each request the
    listener gets carries OPENAI_API_KEY, and no other secret of the deployment (the
    review token above all) anywhere in its path, headers or body."""
    with connect(dagster.app_db_url) as conn:
        person = add_person(conn)
        conn.execute(
            QUERIES.insert_pending_document.sql,
            {"person_id": person["id"], "kind": "plan", "for_date": None},
        )
    answer = _launch_answer(dagster, "generate_documents", {})
    assert answer["__typename"] == "LaunchRunSuccess", answer
    status = _wait_for_run(dagster, answer["run"]["runId"])
    assert status == "SUCCESS", (status, _run_events(dagster, answer["run"]["runId"]))
    asked = [r for r in dagster.generator.requests if r.path.endswith("/chat/completions")]
    assert asked, dagster.generator.requests
    # the key, or the gateway's own password when the base URL carries one (as here)
    userinfo = urlsplit(dagster.env["OPENAI_BASE_URL"]).netloc.rpartition("@")[0]
    credentials = {
        f"Bearer {dagster.env['OPENAI_API_KEY']}",
        f"Basic {base64.b64encode(unquote(userinfo).encode()).decode()}",
    }
    for request in asked:
        assert request.headers["authorization"] in credentials, request.headers
        heard = json.dumps([request.path, request.headers, request.body.decode(errors="replace")])
        others = {
            name: value
            for name, value in dagster.needles.items()
            if not name.startswith(("OPENAI_API_KEY", "OPENAI_BASE_URL"))
        }
        assert [name for name, value in others.items() if value in heard] == []
        assert dagster.env["REVIEW_TOKEN"] not in heard
