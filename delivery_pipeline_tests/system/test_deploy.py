"""What docs/how-to/deploy.md promises and can be checked on one machine: two webhook
services and two sweep runs at once deliver every chunk exactly once; the
container file refers to files that exist. (The example ``dagster.yaml``
loads: ``dagster_defs/test_definitions.py``.)"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance

from delivery_pipeline.dagster_defs.jobs import deliver_documents
from delivery_pipeline.dagster_defs.launcher import forwarded
from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.generation.worker import SweepPoke
from delivery_pipeline.settings import Settings
from delivery_pipeline.supervisor import NotReady
from delivery_pipeline.testing.processes import free_port, harness_child
from delivery_pipeline_tests.support.dagster_support import execute, resources_for
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body
from delivery_pipeline_tests.support.inbox import texts

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-internal-token"


class Service:
    """A webhook service of the deployment's own environment (not the harness's)."""

    def __init__(self, database_url: str, sandbox_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WHATSAPP_", "DELIVERY_"))}
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "DATABASE_URL": database_url,
                "WHATSAPP_API_BASE_URL": sandbox_url,
                "WHATSAPP_APP_SECRET": "s",
                "DELIVERY_INTERNAL_TOKEN": TOKEN,
                "WHATSAPP_THROUGHPUT_LIMIT": "1000",
            }
        )
        args = ["-m", "delivery_pipeline.service", "--host", "127.0.0.1", "--port", str(self.port)]
        self.child = harness_child("service", args, env, f"{self.url}/healthz")

    def wait_ready(self) -> None:
        try:
            self.child.wait_ready(60)
        except NotReady as exc:
            raise AssertionError(f"service did not start:\n{self.child.output()}") from exc

    def stop(self) -> None:
        self.child.stop(timeout=15)
        self.child.log_path.unlink(missing_ok=True)


@pytest.fixture
def two_services(database_url, sandbox) -> Iterator[list[Service]]:
    services = [Service(database_url, sandbox.url) for _ in range(2)]
    try:
        for service in services:
            service.wait_ready()
        yield services
    finally:
        for service in services:
            service.stop()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::dagster.BetaWarning")
def test_two_services_and_two_sweep_runs_deliver_every_chunk_once(
    db, database_url, sandbox, two_services
):
    sandbox.faults(throughput_limit=None)
    people = [add_person(db) for _ in range(10)]
    docs = []
    for i, person in enumerate(people):
        sandbox.say(person["phone"], "hi")
        for j in range(2):
            # Two days' plans: a newer one for the same day would supersede (sql/migrations/025).
            day = dt.date(2030, 1, 1) + dt.timedelta(days=j)
            docs.append(add_document(db, person["id"], plan_body(4, tag=f"{i}.{j} "), for_date=day))
    resources = resources_for(database_url, sandbox.url)
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def guarded(fn) -> None:
        try:
            start.wait()
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    def poke_all(service: Service) -> None:
        poke = SweepPoke(service.url, TOKEN, timeout_seconds=5)
        for doc in docs:
            assert poke(doc["id"])

    def sweep_run() -> None:
        with DagsterInstance.ephemeral() as instance:
            assert execute(deliver_documents, resources=resources, instance=instance).success

    threads = [
        threading.Thread(target=guarded, args=(fn,))
        for fn in (
            lambda: poke_all(two_services[0]),
            lambda: poke_all(two_services[1]),
            sweep_run,
            sweep_run,
        )
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    def undelivered() -> int:
        return db.execute(
            "SELECT count(*) AS n FROM documents WHERE delivered_at IS NULL"
        ).fetchone()["n"]

    deadline = time.monotonic() + 60
    while undelivered() and time.monotonic() < deadline:
        time.sleep(0.2)  # targeted sweeps still running in the services
    if undelivered():  # a throttled or backed-off one: what the heartbeat would do
        with DagsterInstance.ephemeral() as instance:
            execute(deliver_documents, resources=resources, instance=instance)
    assert undelivered() == 0

    for i, person in enumerate(people):
        expected = Counter(
            c for doc in docs[2 * i : 2 * i + 2] for c in delivery_messages(doc["body"])
        )
        assert Counter(texts(sandbox.inbox(person["phone"]))) == expected, person["phone"]
    attempts = db.execute(
        "SELECT state, send_attempts, count(*) AS n FROM delivery_chunks "
        "GROUP BY state, send_attempts"
    ).fetchall()
    assert attempts == [{"state": "sent", "send_attempts": 1, "n": 80}]


def test_container_file_copies_what_exists():
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    copied = [
        src
        for line in re.findall(r"^COPY (?!--from=)(.+)$", dockerfile, re.MULTILINE)
        for src in line.split()[:-1]
    ]
    assert copied, "the Dockerfile copies the project"
    missing = [src for src in copied if not (REPO / src).exists()]
    assert missing == []
    assert "delivery_pipeline.dagster_defs.definitions" in dockerfile


def test_run_containers_get_the_settings_the_deployment_set() -> None:
    """The production run launcher forwards, by name, every setting set in the daemon's
    environment and not empty (empty is the default) but the secrets no run reads, and
    the storage's variables that are set; nothing unset, so a minimal environment file
    launches runs (``test_deploy_run_launcher_gets_past_its_environment`` launches one)."""
    config = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    assert config["run_launcher"]["class"] == "SettingsDockerRunLauncher"
    assert not config["run_launcher"]["config"].get("env_vars")
    environ = {
        "DATABASE_URL": "postgresql://delivery@db/delivery",
        "WHATSAPP_ACCESS_TOKEN": "token",
        "WHATSAPP_APP_SECRET": "the service's: no run checks a signature",
        "REVIEW_TOKEN": "the review page's: no run signs anyone in",
        "OPS_WEBHOOK_URL": "https://hooks.example/the-sensors-post-alerts",
        "DAGSTER_WEBSERVER_URL": "https://ops:a-password@dagster.example",  # the service's
        "GENERATOR_BACKEND": "openai",  # an older name still read
        "OPENAI_BASE_URL": "https://gw:a-key@llm.example/v1",  # a secret a run reads
        "DELIVERY_SWEEPERS": "",  # empty: the default, in the run too
        "SANDBOX_LATENCY_MS": "5",  # the sandbox's: no run reads it
        "DAGSTER_PG_HOST": "",  # empty on purpose: a Unix socket (PGHOST)
        "PGHOST": "/run/postgresql",
        "UNRELATED": "x",
    }
    assert forwarded(environ, ["EXTRA=1", "DATABASE_URL"]) == [
        "EXTRA=1",
        "DATABASE_URL",
        "WHATSAPP_ACCESS_TOKEN",
        "OPENAI_BASE_URL",
        "GENERATOR_BACKEND",
        "DAGSTER_PG_HOST",
        "PGHOST",
    ]
    # Every setting set: the secrets a run reads, and every setting that is no secret.
    every = {name: "x" for name in Settings.env_names()}
    runs_get = set(forwarded(every))
    assert runs_get == {
        n for n in every if not n.startswith("SANDBOX_") and n not in Settings.secret_env_names()
    } | {"DATABASE_URL", "WHATSAPP_ACCESS_TOKEN", "OPENAI_API_KEY", "DELIVERY_INTERNAL_TOKEN"}
    for secret in (
        "WHATSAPP_APP_SECRET",
        "WHATSAPP_VERIFY_TOKEN",
        "REVIEW_TOKEN",
        "REVIEW_TOKENS",
        "OPERATOR_TOKENS",
        "OPS_WEBHOOK_URL",
        "REVIEW_WEBHOOK_URL",
        "DELIVERY_API_TOKENS",
        "DELIVERY_API_WEBHOOKS",
        "DELIVERY_API_WEBHOOK_SECRETS",
    ):
        assert secret not in runs_get, secret


@pytest.mark.slow
def test_deliver_documents_fans_out_on_the_multiprocess_executor(
    db, database_url, sandbox, tmp_path
):
    """The job as Dagster runs it (its own executor, not execute_in_process): three
    sweeper ops, each its own process, share the work; every chunk arrives once."""
    sandbox.faults(latency_ms=50, pair_rate_enabled=False, throughput_limit=0)
    people = [add_person(db) for _ in range(40)]
    bodies = {}
    for i, person in enumerate(people):
        sandbox.say(person["phone"], "hi")
        bodies[person["phone"]] = plan_body(3, chunk_limit=300, tag=f"F{i} ")
        add_document(db, person["id"], bodies[person["phone"]])
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHATSAPP_", "DELIVERY_"))}
    env.update(
        {
            "DAGSTER_HOME": str(home),
            "DATABASE_URL": database_url,
            "WHATSAPP_API_BASE_URL": sandbox.url,
            "WHATSAPP_THROUGHPUT_LIMIT": "1000",
            "DELIVERY_CHUNK_LIMIT": "300",
            "DELIVERY_SWEEPERS": "3",
        }
    )
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "job",
            "execute",
            "-m",
            "delivery_pipeline.dagster_defs.definitions",
            "-j",
            "deliver_documents",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert "multiprocess" in log.lower()
    for sweeper in range(3):
        assert f"sweep_documents[sweeper_{sweeper}]" in log, log[-3000:]
    inboxes = sandbox.inboxes()
    for phone, body in bodies.items():
        assert texts(inboxes.get(phone, [])) == delivery_messages(body, 300), phone
