"""The children ``up`` runs: the sandbox, the webhook service and ``dg dev``.

What each is started with and what it sees; starting, readiness and stopping
are the supervisor's (``delivery_pipeline.supervisor``).

Dagster is started as Dagster 1.13 expects, so that its log holds nothing a
newcomer cannot act on: ``dg dev`` (``dagster dev`` warns that it is superseded
by it), run in ``DAGSTER_HOME`` (run anywhere else, it warns that a
``dagster.yaml`` it finds there "will not be used", and the project's own is
the one ``prepare_dagster_home`` copies there).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from delivery_pipeline.cli.provision import Databases
from delivery_pipeline.sandbox.document_templates import DOCUMENT_TEMPLATE_SPECS
from delivery_pipeline.sandbox.knock_templates import KNOCK_BUTTON_SPECS
from delivery_pipeline.settings import (
    DEFAULT_KNOCK_TEMPLATES,
    DEV_ACCESS_TOKEN,
    DEV_PHONE_NUMBER_ID,
    PROJECT_ROOT,
    SANDBOX_DEFAULT_PORT,
    SERVICE_DEFAULT_PORT,
)
from delivery_pipeline.settings.parsing import parse_templates
from delivery_pipeline.store.db import sqlalchemy_url
from delivery_pipeline.supervisor import Child

DAGSTER_DEFAULT_PORT = 3000

# Variables that could point a child at the real platform or a real channel:
# never inherited, always set explicitly below.
_NOT_INHERITED = (
    "WHATSAPP_",
    "SANDBOX_",
    "DATABASE_URL",
    "DELIVERY_INTERNAL_TOKEN",
    "DELIVERY_SERVICE_URL",
    "OPS_WEBHOOK_URL",
    "REVIEW_TOKEN",  # REVIEW_TOKENS too
    "OPERATOR_TOKENS",
    "REVIEW_WEBHOOK_URL",
    "DAGSTER_HOME",
    "DAGSTER_PG_URL",
    "DAGSTER_WEBSERVER_URL",
)


def _python() -> str:
    return sys.executable


def _dg_executable() -> str:
    local = Path(sys.executable).parent / "dg"
    return str(local) if local.exists() else (shutil.which("dg") or "dg")


def demo_knock_templates() -> str:
    """``DELIVERY_KNOCK_TEMPLATES`` for the sandbox: each locale's template with the
    quick replies (which the sandbox plays approved) first, the plain one after,
    so the demo's knock can be answered with Send it / Later / Stop."""
    plain = parse_templates(DEFAULT_KNOCK_TEMPLATES)
    with_buttons = {
        language.split("_")[0]: (name, language) for name, language, *_ in KNOCK_BUTTON_SPECS
    }
    return ",".join(
        f"{locale}={name}:{language}|{plain[locale][0]}:{plain[locale][1]}"
        for locale, (name, language) in with_buttons.items()
    )


def demo_document_templates(name: str) -> str:
    """``DELIVERY_DOCUMENT_TEMPLATES``' format for the sandbox's document template
    ``name``, one per locale (``sandbox/document_templates.py``)."""
    return ",".join(
        f"{language.split('_')[0]}={name}:{language}"
        for template, language, *_ in DOCUMENT_TEMPLATE_SPECS
        if template == name
    )


def send_button(locale: str) -> str:
    """The text of the demo knock's *Send it* button in ``locale``."""
    return next(spec[4][0] for spec in KNOCK_BUTTON_SPECS if spec[1].split("_")[0] == locale)


def prepare_dagster_home(home: Path, root: Path = PROJECT_ROOT) -> Path:
    """``DAGSTER_HOME`` with the project's ``dagster.yaml`` (refreshed every start)."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "dagster.yaml", home / "dagster.yaml")
    return home


@dataclass(frozen=True)
class Ports:
    host: str = "127.0.0.1"
    sandbox: int = SANDBOX_DEFAULT_PORT
    service: int = SERVICE_DEFAULT_PORT
    dagster: int = DAGSTER_DEFAULT_PORT

    def url(self, port: int) -> str:
        return f"http://{self.host}:{port}"


def child_environment(
    base: dict[str, str],
    databases: Databases,
    secrets_: dict[str, str],
    ports: Ports,
    data_dir: Path,
    dagster_home: Path,
) -> dict[str, str]:
    """What every child sees: the sandbox as the channel, dev secrets, both databases."""
    env = {k: v for k, v in base.items() if not k.startswith(_NOT_INHERITED)}
    env.update(secrets_)
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": databases.app_url,
            "DELIVERY_DATA_DIR": str(data_dir),
            "WHATSAPP_API_BASE_URL": ports.url(ports.sandbox),
            "WHATSAPP_PHONE_NUMBER_ID": DEV_PHONE_NUMBER_ID,
            "WHATSAPP_ACCESS_TOKEN": DEV_ACCESS_TOKEN,
            "DELIVERY_SERVICE_URL": ports.url(ports.service),
            "DAGSTER_WEBSERVER_URL": ports.url(ports.dagster),
            "OPS_WEBHOOK_URL": ports.url(ports.sandbox) + "/_sandbox/ops",
            "SANDBOX_WEBHOOK_URL": ports.url(ports.service) + "/webhooks/whatsapp",
            "DAGSTER_HOME": str(dagster_home),
            "DAGSTER_PG_URL": sqlalchemy_url(databases.dagster_url),
        }
    )
    # Unset or empty (the default): the demo's knocks carry buttons; a choice of
    # the shell's own is kept.
    env["DELIVERY_KNOCK_TEMPLATES"] = env.get("DELIVERY_KNOCK_TEMPLATES") or demo_knock_templates()
    # Unset: the sandbox's document templates (docs/design/files.md), for the people
    # whose own choice is a file (the demo's Noah); every kind still knocks by
    # default, as the tour and the tutorial expect. A choice of the shell's own is kept.
    for name, template in (
        ("DELIVERY_DOCUMENT_TEMPLATES", "document_attached"),
        ("DELIVERY_BRIEF_DOCUMENT_TEMPLATES", "brief_attached"),
    ):
        env[name] = env.get(name) or demo_document_templates(template)
    env["DELIVERY_FILE_OUTSIDE_WINDOW"] = env.get("DELIVERY_FILE_OUTSIDE_WINDOW") or "none"
    project_path = str(PROJECT_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project_path, base.get("PYTHONPATH")]))
    return env


def build_children(
    env: dict[str, str], ports: Ports, logs: Path, dagster_home: Path
) -> list[Child]:
    return [
        Child(
            "sandbox",
            [
                _python(),
                "-m",
                "delivery_pipeline.sandbox",
                "--host",
                ports.host,
                "--port",
                str(ports.sandbox),
            ],
            # The sandbox signs with its own key only when told: told here, the one the
            # service checks (dev_secrets), so the two agree.
            {**env, "SANDBOX_APP_SECRET": env["WHATSAPP_APP_SECRET"]},
            ports.url(ports.sandbox) + "/_sandbox/stats",
            logs / "sandbox.log",
        ),
        Child(
            "service",
            [
                _python(),
                "-m",
                "delivery_pipeline.service",
                "--host",
                ports.host,
                "--port",
                str(ports.service),
            ],
            env,
            ports.url(ports.service) + "/healthz",
            logs / "service.log",
        ),
        Child(
            "dagster",
            [
                _dg_executable(),
                "dev",
                "-w",
                str(PROJECT_ROOT / "workspace.yaml"),
                "-h",
                ports.host,
                "-p",
                str(ports.dagster),
            ],
            env,
            ports.url(ports.dagster) + "/server_info",
            logs / "dagster.log",
            cwd=dagster_home,
        ),
    ]
