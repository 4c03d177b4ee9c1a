"""What `up` gives its children: the service pushes its deliveries to the
webserver `up` starts, and nothing of the shell's channel settings leaks in."""

from __future__ import annotations

from pathlib import Path

import pytest

from delivery_pipeline.cli.children import Ports, child_environment
from delivery_pipeline.cli.provision import Databases

pytestmark = pytest.mark.unit


def test_the_service_pushes_to_the_webserver_up_starts(tmp_path: Path) -> None:
    ports = Ports(sandbox=18765, service=18766, dagster=13000)
    env = child_environment(
        {"DAGSTER_WEBSERVER_URL": "http://elsewhere:3000", "WHATSAPP_ACCESS_TOKEN": "EAAG-real"},
        Databases("postgresql://app", "postgresql://dagster"),
        {},
        ports,
        tmp_path / "data",
        tmp_path / "home",
    )
    assert env["DAGSTER_WEBSERVER_URL"] == "http://127.0.0.1:13000"
    assert env["DELIVERY_SERVICE_URL"] == "http://127.0.0.1:18766"
    assert env["WHATSAPP_ACCESS_TOKEN"] != "EAAG-real"
