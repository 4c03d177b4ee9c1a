"""``delivery-pipeline up``: everything on embedded defaults, one command.

Starts (or reuses) the embedded Postgres under ``.data/``, makes the
``delivery`` and ``dagster`` databases, migrates, seeds demo people in three
languages and time zones, then runs as child processes the WhatsApp sandbox,
the webhook service wired to it, and ``dg dev`` (webserver + daemon, with
``DAGSTER_HOME=.dagster_home``). Ctrl-C (or SIGTERM) stops all of it.

Secrets are dev-only: generated once into ``.data/dev-secrets.json``. Real
WhatsApp credentials in the environment are never passed on: this command
always talks to the sandbox.

This module is the command: its banner and its run loop. The databases and
secrets are ``provision.py``'s, the demo people ``demo.py``'s, the children
and what they see ``children.py``'s, and starting and stopping a child the
supervisor's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from delivery_pipeline.cli.children import (
    DAGSTER_DEFAULT_PORT,
    Ports,
    build_children,
    child_environment,
    prepare_dagster_home,
    send_button,
)
from delivery_pipeline.cli.demo import seed_demo
from delivery_pipeline.cli.failures import require_free_port
from delivery_pipeline.cli.provision import (
    Databases,
    dev_secrets,
    prepare_databases,
    stop_embedded,
)
from delivery_pipeline.cli.registration import Commands, add_command
from delivery_pipeline.settings import (
    PROJECT_ROOT,
    REVIEW_PAGE_PATH,
    SANDBOX_DEFAULT_PORT,
    SERVICE_DEFAULT_PORT,
    Settings,
)
from delivery_pipeline.store.db import public_url
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.store.rows.common import Person
from delivery_pipeline.supervisor import Child, Stopping

READY_TIMEOUT_SECONDS = 120.0


def _banner(ports: Ports, databases: Databases, people: list[Person], logs: Path) -> str:
    lines = [
        "",
        "delivery_pipeline is up.",
        f"  Dagster UI        {ports.url(ports.dagster)}   (sensors and schedules are running)",
        f"  WhatsApp sandbox  {ports.url(ports.sandbox)}   (every inbox: /_sandbox/inboxes)",
        f"  webhook service   {ports.url(ports.service)}",
        f"  review page       {ports.url(ports.service)}{REVIEW_PAGE_PATH}   (REVIEW_TOKEN, and "
        "OPERATOR_TOKENS to cancel and resend, in "
        f"{logs.parent / 'dev-secrets.json'}; `DELIVERY_REVIEW_KINDS=plan ./dev up` reviews plans)",
        f"  app database      {public_url(databases.app_url)}",
        f"  logs              {logs}/",
    ]
    if people:
        lines += [
            "",
            "Demo people (their plans generate now and each gets a knock with buttons, "
            "whatever the hour: demo people have no quiet hours):",
        ]
        lines += [f"  {p.name:<12} {p.phone:<15} {p.locale}  {p.time_zone}" for p in people]
        first = people[0].phone
        assert first is not None  # the demo people have numbers
        sandbox = f"--sandbox-url {ports.url(ports.sandbox)}"
        lines += [
            "",
            "Answer as a person, and watch the plan arrive:",
            f"  delivery-pipeline sandbox inbox {first} {sandbox}",
            f"  delivery-pipeline sandbox press {first} {send_button(people[0].locale)} {sandbox}",
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
        people = seed_demo(databases.app_url, settings.whatsapp) if seed else []
        env = child_environment(
            dict(os.environ), databases, dev_secrets(data_dir), ports, data_dir, dagster_home
        )
        children = build_children(env, ports, logs, dagster_home)
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


def register(commands: Commands) -> None:
    """``delivery-pipeline up``."""
    p = add_command(
        commands,
        "up",
        run,
        "start everything on embedded defaults: Postgres, the sandbox, the webhook "
        "service and Dagster (UI + daemon); Ctrl-C stops it",
    )
    add_up_arguments(p)


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
