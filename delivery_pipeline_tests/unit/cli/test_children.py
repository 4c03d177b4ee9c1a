"""What `up` gives its children: the service pushes its deliveries to the
webserver `up` starts, and nothing of the shell's channel settings leaks in."""

from __future__ import annotations

from pathlib import Path

import pytest

from delivery_pipeline.cli.children import Ports, child_environment
from delivery_pipeline.cli.provision import Databases
from delivery_pipeline.settings import Settings

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


def test_the_demo_knocks_with_buttons_unless_the_shell_chose_its_own(tmp_path: Path) -> None:
    def templates(shell: dict[str, str]) -> str:
        env = child_environment(
            shell,
            Databases("postgresql://app", "postgresql://dagster"),
            {},
            Ports(),
            tmp_path / "data",
            tmp_path / "home",
        )
        return env["DELIVERY_KNOCK_TEMPLATES"]

    demo = Settings.from_env({"DELIVERY_KNOCK_TEMPLATES": templates({})}).delivery
    assert demo.knock_template_choices == {
        "en": [("documents_ready", "en"), ("document_ready", "en")],
        "es": [("documents_ready", "es"), ("document_ready", "es")],
        "pt": [("documents_ready", "pt_BR"), ("document_ready", "pt_BR")],
    }
    assert {name for name, _ in demo.knock_template_map.values()} <= demo.knock_button_template_set
    assert templates({"DELIVERY_KNOCK_TEMPLATES": ""}) == templates({})
    assert templates({"DELIVERY_KNOCK_TEMPLATES": "en=mine:en"}) == "en=mine:en"
