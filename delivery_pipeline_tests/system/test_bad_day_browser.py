"""The bad day in Dagster's UI, in a real browser: Debian's chromium driven by
Playwright over the whole deployment as processes (the sandbox, the webhook
service, ``dagster-webserver``, ``dagster-daemon run``, Postgres).

A knock template is paused (its knock held: no other template for English),
then WhatsApp refuses the token (190): sending pauses. The ``delivery_checks``
run is red on the Overview timeline and in the Runs list, its failure naming
the checks at ERROR; the heartbeat sensor's tick says "Sending is paused", not
"Nothing eligible"; the ops channel is told once per cause and not of the red
run. Screenshots of the Overview, the run and the tick: ``docs/screenshots/``
when ``DELIVERY_SAVE_SCREENSHOTS=1`` (how the committed ones were taken), else
the test's temporary folder.

Never ``playwright install``: the system's chromium (``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from delivery_pipeline.store.db import connect
from delivery_pipeline_tests.support.browser import NEEDS_CHROMIUM
from delivery_pipeline_tests.support.dagster_deployment import (
    Deployment,
    dagster_deployment,
    eventually,
)
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body

pytestmark = [
    pytest.mark.slow,
    NEEDS_CHROMIUM,
]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
REPOSITORY = {"repositoryLocationName": "delivery_pipeline", "repositoryName": "__repository__"}
LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  }
}"""
RUN = """
query Run($id: ID!) {
  runOrError(runId: $id) { ... on Run { status pipelineName } }
}"""
TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { ticks(limit: 5) { timestamp status skipReason } } }
  }
}"""


@pytest.fixture
def deployment(pg_admin_url: str, template_database: str) -> Iterator[Deployment]:
    with dagster_deployment(
        pg_admin_url,
        template_database,
        DELIVERY_HEARTBEAT_SECONDS="2",
        OPS_ALERT_SENSOR_SECONDS="2",
        DELIVERY_QUIET_HOURS="off",
    ) as running:
        yield running


def shots_folder(tmp_path: Path) -> Path:
    return SCREENSHOTS if os.environ.get("DELIVERY_SAVE_SCREENSHOTS") == "1" else tmp_path


def launch(deployment: Deployment, job: str) -> str:
    params = {"selector": {**REPOSITORY, "jobName": job}, "executionMetadata": {"tags": []}}
    answer = deployment.graphql(LAUNCH, {"params": params})["launchRun"]
    assert answer["__typename"] == "LaunchRunSuccess", answer
    return str(answer["run"]["runId"])


def finished(deployment: Deployment, run_id: str) -> str | None:
    status = deployment.graphql(RUN, {"id": run_id})["runOrError"]["status"]
    return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None


def ticks(deployment: Deployment, sensor: str) -> list[dict[str, Any]]:
    selector = {**REPOSITORY, "sensorName": sensor}
    state = deployment.graphql(TICKS, {"selector": selector})["sensorOrError"]["sensorState"]
    return list(state["ticks"])


def skip_reasons(deployment: Deployment, sensor: str) -> list[str]:
    return [t["skipReason"] or "" for t in ticks(deployment, sensor) if t["status"] == "SKIPPED"]


def ticked_after(deployment: Deployment, sensor: str, at: float) -> list[dict[str, Any]]:
    return [
        t for t in ticks(deployment, sensor) if t["timestamp"] > at and t["status"] != "STARTED"
    ]


def open_page(browser: Any, url: str) -> Any:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(url, wait_until="networkidle")
    page.wait_for_timeout(2500)  # the first-visit community dialog comes a moment later
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.first.click()
        page.wait_for_timeout(500)
    return page


def test_a_paused_sender_and_a_held_knock_are_red_on_the_overview_and_said_by_the_heartbeat(
    deployment, browser, tmp_path
):
    sandbox = deployment.sandbox
    with connect(deployment.database_url) as db:
        eventually(lambda: db.execute("SELECT 1 FROM dagster_heartbeats").fetchone(), "the daemon")
        # 1. The English knock template is paused: a person outside the window waits.
        sandbox.template("document_ready", "en", status="PAUSED", reason="LOW_QUALITY")
        eventually(
            lambda: db.execute(
                "SELECT 1 FROM message_templates WHERE status = 'PAUSED'"
            ).fetchone(),
            "the pause webhook applied",
        )
        waiting = add_person(db, inbound_age_seconds=None)
        held = add_document(db, waiting["id"], plan_body(2))
        eventually(
            lambda: db.execute(
                "SELECT 1 FROM documents WHERE id = %(id)s AND knock_held_since IS NOT NULL", held
            ).fetchone(),
            "the knock held by the service's sweep",
        )
        # 2. WhatsApp refuses the token: the next send pauses every sender.
        sandbox.refuse(190)
        for _ in range(2):
            person = add_person(db)
            sandbox.set_window(person["phone"], 60)
            add_document(db, person["id"], plan_body(2))
        eventually(
            lambda: db.execute(
                "SELECT 1 FROM sender_state WHERE phone_number_id = '*' AND pause_code = 190"
            ).fetchone(),
            "sending paused",
        )

    backlog = launch(deployment, "refresh_backlog")  # as its schedule does: fresh
    assert eventually(lambda: finished(deployment, backlog), "the backlog") == "SUCCESS"
    run_id = launch(deployment, "delivery_checks")
    assert eventually(lambda: finished(deployment, run_id), "the checks run") == "FAILURE"
    reason = eventually(
        lambda: next(
            (r for r in skip_reasons(deployment, "delivery_heartbeat") if "paused" in r), None
        ),
        "the heartbeat's tick",
    )
    assert reason.startswith("Sending is paused for every sender since ")
    assert "Nothing eligible" not in reason and "delivery-pipeline resume" in reason
    # The ops channel: one alert per cause (the pause, the template with its held
    # knock), and none for the red checks run, which is theirs to tell.
    eventually(lambda: len(sandbox.ops_alerts()) >= 2, "the ops alerts")
    again = launch(deployment, "delivery_checks")  # the checks again, red again
    assert eventually(lambda: finished(deployment, again), "the second checks run") == "FAILURE"
    ended = time.time()
    for sensor in ("ops_check_alerts", "ops_run_failures"):
        eventually(
            lambda sensor=sensor: len(ticked_after(deployment, sensor, ended)) >= 2,
            f"{sensor} ticking after the second run",
        )
    posts = [post["text"] for post in sandbox.ops_alerts()]
    assert len(posts) == 2, posts
    assert any(p.startswith(":red_circle: *ERROR* Sending is paused") for p in posts), posts
    assert any("document_ready (en) is PAUSED" in p for p in posts), posts
    assert not any("Runs of `delivery_checks`" in p for p in posts)

    folder = shots_folder(tmp_path)
    url = deployment.webserver_url

    # The Overview's timeline: the checks' runs are red.
    page = open_page(browser, f"{url}/overview/activity/timeline")
    page.get_by_role("button", name="1hr").click()
    page.wait_for_timeout(2500)
    assert page.get_by_text("delivery_checks", exact=True).count()
    page.screenshot(path=str(folder / "bad_day_overview.png"))

    # The Runs list: failed, and the run names the checks at ERROR.
    page = open_page(browser, f"{url}/runs")
    page.get_by_text(run_id[:8]).first.wait_for(timeout=30_000)
    listed = page.inner_text("body")
    row = listed[listed.index(run_id[:8]) :][:200]
    assert "delivery_checks" in row and "Failure" in row, row
    page.screenshot(path=str(folder / "bad_day_runs.png"))
    page = open_page(browser, f"{url}/runs/{run_id}")
    page.get_by_text("failed with ERROR severity").first.wait_for(timeout=30_000)
    body = page.inner_text("body")
    for check in ("sender_paused", "knock_held", "knock_template_document_ready_en"):
        assert check in body, check
    page.screenshot(path=str(folder / "bad_day_run.png"))

    # The heartbeat sensor's tick says why nothing goes out.
    page = open_page(browser, f"{url}/locations/delivery_pipeline/sensors/delivery_heartbeat")
    page.wait_for_timeout(1500)
    page.get_by_text("0 runs requested").nth(2).click()  # the newest tick's result
    page.get_by_text("Skip reason:").wait_for(timeout=30_000)
    assert "Sending is paused for every sender" in page.inner_text("body")
    page.screenshot(path=str(folder / "bad_day_heartbeat.png"))
    for name in ("overview", "runs", "run", "heartbeat"):
        name = f"bad_day_{name}.png"
        assert (folder / name).stat().st_size > 10_000
