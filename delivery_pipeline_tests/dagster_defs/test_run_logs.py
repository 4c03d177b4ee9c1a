"""The engine's own log lines reach each run's event log (``python_logs:
managed_python_loggers: [delivery_pipeline]``, deploy/dagster.yaml), and no
secret does: the code location scrubs our records before Dagster's handler sees
them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import dagster as dg
import pytest
import yaml

from delivery_pipeline.logs import CAPTURED_LOGGER, Scrubbing, ready_for_capture
from delivery_pipeline.settings import Settings
from delivery_pipeline_tests.system.test_deploy import REPO

HOOK = "https://hooks.example.test/services/T000/B000/secret-part-123"
log = logging.getLogger("delivery_pipeline.delivery.sweep")


@dg.op
def sweep_like() -> None:
    log.info("sender paused; alert posted to %s", HOOK)
    log.debug("too fine for the event log")


@dg.job(executor_def=dg.in_process_executor)
def logs_like_the_engine() -> None:
    sweep_like()


@pytest.fixture
def deploy_python_logs() -> Iterator[dict[str, object]]:
    settings = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())["python_logs"]
    package = logging.getLogger(CAPTURED_LOGGER)
    handlers, level = list(package.handlers), package.level
    yield settings
    package.handlers, package.level = handlers, level


def _captured(python_logs: dict[str, object]) -> list[str]:
    with dg.DagsterInstance.ephemeral(settings={"python_logs": python_logs}) as instance:
        result = logs_like_the_engine.execute_in_process(instance=instance)
        return [
            entry.user_message
            for entry in instance.all_logs(result.run_id)
            if entry.dagster_event is None
        ]


def test_engine_lines_reach_the_event_log_without_secrets(deploy_python_logs) -> None:
    ready_for_capture(Settings.from_env({"OPS_WEBHOOK_URL": HOOK}))
    messages = _captured(deploy_python_logs)
    assert ["sender paused; alert posted to <OPS_WEBHOOK_URL>"] == [
        m for m in messages if "sender paused" in m
    ]
    assert not any(HOOK in m or "secret-part" in m for m in messages)
    assert not any("too fine" in m for m in messages)  # INFO and up, not DEBUG


def test_without_the_scrubber_dagster_would_store_the_secret(deploy_python_logs) -> None:
    ready_for_capture(Settings.from_env({"OPS_WEBHOOK_URL": HOOK}))
    package = logging.getLogger(CAPTURED_LOGGER)
    package.handlers = [h for h in package.handlers if not isinstance(h, Scrubbing)]
    assert any(HOOK in m for m in _captured(deploy_python_logs))
