"""The image's health check asks each role the way it answers (deploy/healthcheck.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("healthcheck", REPO / "deploy" / "healthcheck.py")
assert _spec is not None and _spec.loader is not None
healthcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(healthcheck)

pytestmark = pytest.mark.unit


def _commands() -> dict[str, list[str]]:
    """Each role's command line as deploy/docker-compose.yml starts it (the image's CMD
    for the code location), behind the init compose puts first."""
    services = yaml.safe_load((REPO / "deploy" / "docker-compose.yml").read_text())["services"]
    return {
        name: ["/sbin/docker-init", "--", *service["command"]]
        for name, service in services.items()
        if "command" in service
    }


def test_each_role_is_asked_its_own_way() -> None:
    commands = _commands()
    assert healthcheck.probe(commands["code"]) == [
        "dagster", "api", "grpc-health-check", "-p", "4000",
    ]  # fmt: skip
    assert healthcheck.probe(commands["webserver"]) == "http://127.0.0.1:3000/server_info"
    assert healthcheck.probe(commands["daemon"]) == ["dagster-daemon", "liveness-check"]
    assert healthcheck.probe(commands["webhook-1"]) == "http://127.0.0.1:8766/healthz"
    assert healthcheck.probe(commands["migrate"]) is None


def test_the_images_default_command_is_the_code_location() -> None:
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    (cmd,) = re.findall(r"^CMD (\[.+\])$", dockerfile, re.M)
    assert healthcheck.probe(yaml.safe_load(cmd))[:3] == ["dagster", "api", "grpc-health-check"]


def test_a_run_or_another_port_is_read_from_the_command_line() -> None:
    run = ["dagster", "api", "execute_run", '{"__class__": "ExecuteRunArgs"}']
    assert healthcheck.probe(run) is None
    service = ["python", "-m", "delivery_pipeline.service", "--host", "0.0.0.0", "--port=9000"]
    assert healthcheck.probe(service) == "http://127.0.0.1:9000/healthz"
    webserver = ["/usr/local/bin/dagster-webserver", "-h", "0.0.0.0", "--port", "3100"]
    assert healthcheck.probe(webserver) == "http://127.0.0.1:3100/server_info"


def test_unhealthy_when_nobody_answers() -> None:
    assert healthcheck.healthy(None)
    assert not healthcheck.healthy("http://127.0.0.1:9/healthz")  # the discard port
