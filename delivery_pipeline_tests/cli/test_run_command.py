"""The run command for real: ``python -m delivery_pipeline.cli up`` starts the
sandbox, the webhook service and ``dg dev`` (webserver + daemon, Dagster
storage on Postgres); we ask Dagster's GraphQL API what it runs, watch the
heartbeat tick, and see a demo plan delivered after nothing but the person
writing. Then SIGINT stops all of it.

It runs in the night: the quiet hours are set so that every demo person is in
them now, as at 04:06 UTC every one of them was. The README's tour works all
the same (the demo people have no quiet hours of their own), readable in each
language, with the knock's buttons and the answers to them, while a person
anyone else adds waits for their morning; and Dagster's log says nothing a
newcomer cannot act on."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import httpx
import psycopg
import pytest
from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

from delivery_pipeline.cli.demo import DEMO_PEOPLE
from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.store.db import connect, ensure_database, with_database
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.files import flat, pdf_text
from delivery_pipeline.testing.sandbox import free_port
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.dagster_deployment import eventually, graphql
from delivery_pipeline_tests.support.inbox import knocks, texts

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def night_for_every_demo_person(now: dt.datetime) -> str:
    """Quiet hours (local HH:MM-HH:MM) that every demo person is in at ``now``, two
    hours or more from either end: the clock controlled through the setting, as the
    quiet-hours tests control it through the zone."""
    offsets = [now.astimezone(ZoneInfo(p.time_zone)).utcoffset() for p in DEMO_PEOPLE]
    assert all(offset is not None for offset in offsets)
    start = now + min(o for o in offsets if o is not None) - dt.timedelta(hours=2)
    end = now + max(o for o in offsets if o is not None) + dt.timedelta(hours=3)
    return f"{start:%H:%M}-{end:%H:%M}"


NIGHT = night_for_every_demo_person(dt.datetime.now(dt.UTC))


class RunCommand:
    def __init__(
        self,
        process: subprocess.Popen[str],
        ports: dict[str, int],
        database_url: str,
        data_dir: Path,
    ) -> None:
        self.process = process
        self.ports = ports
        self.database_url = database_url
        self.data_dir = data_dir
        self.output: list[str] = []
        self.banner = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            if "Ctrl-C stops everything" in line:
                self.banner.set()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def logs(self) -> str:
        parts = ["".join(self.output)]
        for log in sorted((self.data_dir / "logs").glob("*.log")):
            parts.append(f"--- {log.name} ---\n" + log.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        return graphql(self.url("dagster"), query, variables)


@pytest.fixture(scope="module")
def up(pg_admin_url: str, template_database: str, tmp_path_factory) -> Iterator[RunCommand]:
    app_db = f"dp_up_{uuid.uuid4().hex[:10]}"
    dagster_db = f"dp_up_dagster_{uuid.uuid4().hex[:10]}"
    ensure_database(pg_admin_url, app_db, template=template_database)
    database_url = with_database(pg_admin_url, app_db)
    root = tmp_path_factory.mktemp("up")
    ports = {"sandbox": free_port(), "service": free_port(), "dagster": free_port()}
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": database_url,
        "DELIVERY_DATA_DIR": str(root / "data"),
        "DELIVERY_HEARTBEAT_SECONDS": "3",
        "GENERATION_SENSOR_SECONDS": "3",
        "DELIVERY_QUIET_HOURS": NIGHT,
        # real-looking credentials in the environment must never reach a child
        "WHATSAPP_ACCESS_TOKEN": "EAAG-must-not-be-used",
        "WHATSAPP_API_BASE_URL": "http://127.0.0.1:9",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "delivery_pipeline.cli",
            "up",
            "--demo",
            "--sandbox-port",
            str(ports["sandbox"]),
            "--service-port",
            str(ports["service"]),
            "--dagster-port",
            str(ports["dagster"]),
            "--dagster-home",
            str(root / "dagster_home"),
            "--dagster-database",
            dagster_db,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    command = RunCommand(process, ports, database_url, root / "data")
    try:
        if not command.banner.wait(timeout=240):
            raise AssertionError("the run command did not come up:\n" + command.logs())
        yield command
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            for name in (app_db, dagster_db):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


REPOSITORY_QUERY = """
query Repository {
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes {
        name
        location { name }
        jobs { name }
        sensors {
          name
          minIntervalSeconds
          sensorState { status ticks(limit: 20) { status skipReason runIds } }
        }
        schedules { name cronSchedule scheduleState { status } }
        assetNodes {
          assetKey { path }
          assetChecksOrError { ... on AssetChecks { checks { name } } }
        }
      }
    }
    ... on PythonError { message }
  }
}
"""


def _repository(up: RunCommand) -> dict[str, Any]:
    [repo] = up.graphql(REPOSITORY_QUERY)["repositoriesOrError"]["nodes"]
    return repo


def test_dagster_graphql_shows_the_repository_and_the_heartbeat_ticks(up):
    repo = _repository(up)
    assert repo["location"]["name"] == "delivery_pipeline"
    assert {j["name"] for j in repo["jobs"]} >= {
        "deliver_documents",
        "generate_documents",
        "generate_and_deliver",
        "request_document",
        "enqueue_daily_briefs",
        "refresh_backlog",
    }
    sensors = {s["name"]: s for s in repo["sensors"]}
    assert sensors["delivery_heartbeat"]["sensorState"]["status"] == "RUNNING"
    assert sensors["delivery_heartbeat"]["minIntervalSeconds"] == 3
    assert sensors["pending_generation"]["sensorState"]["status"] == "RUNNING"
    schedules = {s["name"]: s for s in repo["schedules"]}
    assert schedules["daily_briefs"]["cronSchedule"] == "*/15 * * * *"
    assert schedules["daily_briefs"]["scheduleState"]["status"] == "RUNNING"
    assert schedules["backlog_every_5_minutes"]["scheduleState"]["status"] == "RUNNING"
    assert sensors["record_delivery_events"]["sensorState"]["status"] == "RUNNING"
    assets = {tuple(a["assetKey"]["path"]): a for a in repo["assetNodes"]}
    assert set(assets) == {
        ("generated_documents",),
        ("delivered_documents",),
        ("delivery_backlog",),
        ("delivery_report",),
    }
    checks = assets[("delivered_documents",)]["assetChecksOrError"]["checks"]
    assert "webhook_service_reachable" in {c["name"] for c in checks}

    def heartbeat_ticks() -> list[dict[str, Any]]:
        ticks = {s["name"]: s for s in _repository(up)["sensors"]}["delivery_heartbeat"]
        return ticks["sensorState"]["ticks"]

    ticks = eventually(heartbeat_ticks, "a heartbeat tick")
    assert {t["status"] for t in ticks} <= {"SKIPPED", "SUCCESS", "STARTED"}, ticks


def test_a_demo_plan_is_delivered_after_the_person_writes(up):
    ana = DEMO_PEOPLE[0]
    with connect(up.database_url) as conn:
        person = conn.execute(QUERIES.person_by_phone.sql, {"phone": ana.phone}).fetchone()
        assert person is not None, up.logs()

        def plan() -> dict[str, Any] | None:
            return conn.execute(
                "SELECT * FROM documents WHERE person_id = %(p)s AND kind = 'plan'",
                {"p": person["id"]},
            ).fetchone()

        # generated by the pending-generation sensor's run, knocked for (window closed)
        knocked = eventually(
            lambda: (d := plan()) and d["knock_sent_at"] and d,
            "the plan to be generated and knocked for",
        )
        sandbox = httpx.Client(base_url=up.url("sandbox"), timeout=10)
        inbox_path = f"/_sandbox/people/%2B{ana.phone[1:]}/inbox"
        assert len(knocks(sandbox.get(inbox_path).json())) == 1
        assert texts(sandbox.get(inbox_path).json()) == []

        # the only manual step: the person writes
        sandbox.post(f"/_sandbox/people/%2B{ana.phone[1:]}/messages", json={"text": "oi"})

        delivered = eventually(
            lambda: (d := plan()) and d["delivered_at"] and d, "the plan to be delivered"
        )
    chunks = delivery_messages(knocked["body"], 4096)
    assert len(chunks) >= 3 and delivered["body"] == knocked["body"]
    assert texts(sandbox.get(inbox_path).json()) == chunks
    # the delivery is on Dagster's timeline: posted by the service itself (up wires
    # DAGSTER_WEBSERVER_URL), or by the sensor, which may take a fresh row between
    # the service's commit and its push on a loaded machine (docs/design/timeline.md)
    with connect(up.database_url) as conn:
        recorded = eventually(
            lambda: conn.execute(
                "SELECT claimed_by FROM delivery_events WHERE document_id = %(d)s "
                "AND event = 'delivered' AND reported_at IS NOT NULL",
                {"d": delivered["id"]},
            ).fetchone(),
            "the delivery on Dagster's timeline",
        )
    assert recorded["claimed_by"] is not None
    assert "EAAG-must-not-be-used" not in up.logs()


def test_noah_who_never_writes_gets_his_plan_as_a_file(up):
    noah = next(p for p in DEMO_PEOPLE if p.outside_window == "file")
    with connect(up.database_url) as conn:
        delivered = eventually(
            lambda: conn.execute(
                "SELECT d.* FROM documents d JOIN people p ON p.id = d.person_id "
                "WHERE p.phone = %(phone)s AND d.kind = 'plan' AND d.delivered_at IS NOT NULL",
                {"phone": noah.phone},
            ).fetchone(),
            "Noah's plan delivered without a reply",
        )
    assert delivered["way"] == "file" and delivered["knock_sent_at"] is None
    sandbox = httpx.Client(base_url=up.url("sandbox"), timeout=10)
    [message] = sandbox.get(f"/_sandbox/people/%2B{noah.phone[1:]}/inbox").json()
    assert message["template"]["name"] == "document_attached"
    content = sandbox.get(f"/_sandbox/media/{message['document']['id']}").content
    assert flat(delivered["body"]) in flat(pdf_text(content))
    shown = run(
        up.database_url, "sandbox", "inbox", noah.phone, "--sandbox-url", up.url("sandbox")
    ).stdout
    assert f"/_sandbox/media/{message['document']['id']}" in shown, shown


def test_a_document_requested_through_graphql_runs(up):
    client = DagsterGraphQLClient("127.0.0.1", port_number=up.ports["dagster"])
    sam = DEMO_PEOPLE[2]
    run_id = client.submit_job_execution(
        "request_document",
        run_config={
            "ops": {"request_document_op": {"config": {"person": sam.phone, "kind": "plan"}}}
        },
    )

    def finished() -> str | None:
        try:
            status = client.get_run_status(run_id).value
        except DagsterGraphQLClientError:
            return None
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    assert eventually(finished, "the request_document run") == "SUCCESS", up.logs()
    with connect(up.database_url) as conn:
        plans = conn.execute(
            "SELECT d.* FROM documents d JOIN people p ON p.id = d.person_id "
            "WHERE p.phone = %(phone)s AND d.kind = 'plan'",
            {"phone": sam.phone},
        ).fetchall()
    assert len(plans) == 2


def _sandbox(up: RunCommand, *args: str) -> subprocess.CompletedProcess[str]:
    """``delivery-pipeline sandbox ARGS`` against up's sandbox, as the tour runs it."""
    done = run(up.database_url, "sandbox", *args, "--sandbox-url", up.url("sandbox"))
    assert done.returncode == 0, done.stderr
    return done


def _knocked(up: RunCommand, phone: str) -> list[dict[str, Any]]:
    sandbox = httpx.Client(base_url=up.url("sandbox"), timeout=10)
    return eventually(
        lambda: knocks(inbox := sandbox.get(f"/_sandbox/people/{phone}/inbox").json()) and inbox,
        f"the knock to {phone}",
    )


def test_it_is_night_for_every_demo_person_and_anybody_else_waits_for_morning(up):
    with connect(up.database_url) as conn:
        for demo in DEMO_PEOPLE:
            asleep = conn.execute(
                "SELECT quiet_until(now(), %s, %s) IS NOT NULL AS asleep", (demo.time_zone, NIGHT)
            ).fetchone()
            assert asleep["asleep"], f"{demo.name} is not in the quiet hours {NIGHT}"
    # Somebody added as anyone is, where Ana lives: their plan waits, unknocked.
    phone = "+5511900000099"
    added = run(
        up.database_url,
        "people",
        "add",
        "--phone",
        phone,
        "--locale",
        "pt",
        "--time-zone",
        "America/Sao_Paulo",
    )
    assert added.returncode == 0, added.stderr
    run(up.database_url, "documents", "add", "--person", phone, stdin="Plano.\n")
    with connect(up.database_url) as conn:
        held = eventually(
            lambda: conn.execute(
                "SELECT d.quiet_until, d.knock_sent_at FROM documents d "
                "JOIN people p ON p.id = d.person_id WHERE p.phone = %s AND d.quiet_until > now()",
                (phone,),
            ).fetchone(),
            "their plan held for the night",
        )
    assert held["knock_sent_at"] is None
    assert httpx.get(f"{up.url('sandbox')}/_sandbox/people/{phone}/inbox").json() == []


def test_the_tour_at_night_knocks_with_buttons_readable_in_each_language(up):
    buttons = {"pt": "[Enviar] [Mais tarde] [Parar]", "es": "[Enviar] [Más tarde] [Parar]"}
    greeting = {
        "pt": "Olá Ana Souza, seu documento está pronto.",
        "es": "Hola Lucía Gómez, tu documento está listo.",
        "en": "Hi Sam Taylor, your document is ready.",
    }
    # Noah's own choice is a file: he is never knocked (his own test above).
    for demo in (d for d in DEMO_PEOPLE if d.outside_window != "file"):
        _knocked(up, demo.phone)
        shown = _sandbox(up, "inbox", demo.phone).stdout
        assert greeting[demo.locale] in shown, shown
        assert buttons.get(demo.locale, "[Send it] [Later] [Stop]") in shown, shown
        assert "\\u" not in shown


def test_the_tour_at_night_answers_later_and_stop(up):
    lucia, sam = DEMO_PEOPLE[1], DEMO_PEOPLE[2]
    for demo, button in ((lucia, "Más tarde"), (sam, "Stop")):
        _knocked(up, demo.phone)
        assert f"pressed {button!r}" in _sandbox(up, "press", demo.phone, button).stdout

    def answered(phone: str, words: str) -> str | None:
        shown = _sandbox(up, "inbox", phone).stdout
        return shown if words in shown else None

    later = eventually(
        lambda: answered(lucia.phone, "De acuerdo, más tarde: lo recibirás"), "Later answered"
    )
    assert re.search(r"(hoy|mañana) a las 08:00", later), later
    assert "→ pressed [Más tarde]" in later
    eventually(
        lambda: answered(sam.phone, "Done: you will get no more of these messages."),
        "Stop answered",
    )


def test_the_dagster_ui_opens_on_its_first_page_without_a_modal(up):
    assert up.graphql("{ shouldShowNux }") == {"shouldShowNux": False}


def test_dagster_logs_nothing_a_newcomer_cannot_act_on(up):
    log = (up.data_dir / "logs" / "dagster.log").read_text(errors="replace")
    assert "Launching Dagster services" in log
    warnings = [line for line in log.splitlines() if re.search(r"WARNING|Warning\b", line)]
    assert warnings == [], "\n".join(warnings)


def test_sigint_stops_everything(up):
    up.process.send_signal(signal.SIGINT)
    assert up.process.wait(timeout=90) == 0, up.logs()
    for name in ("sandbox", "service", "dagster"):
        with pytest.raises(httpx.TransportError):
            httpx.get(up.url(name), timeout=2)
