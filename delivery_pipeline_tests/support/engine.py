"""The engine and the webhook service as the end-to-end tests drive them: a sweep in
this process at the moment the test chooses, and the service (a real process) that
the sandbox posts its signed webhooks to."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from delivery_pipeline.delivery.result import SweepResult
from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.settings import Settings
from delivery_pipeline.testing.sandbox import SandboxProcess
from delivery_pipeline.testing.service import APP_SECRET, ServiceProcess, start_service
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body

# The knock with three quick replies (Send it / Later / Stop) in en, es and pt, as
# DELIVERY_KNOCK_TEMPLATES names it.
BUTTON_KNOCKS = "en=documents_ready:en,es=documents_ready:es,pt=documents_ready:pt_BR"


def sweep(settings: Settings, **options: Any) -> SweepResult:
    """One sweep on the settings' database (``options``: ``run_sweep``'s)."""
    return asyncio.run(run_sweep(settings, settings.database.database_url, **options))


def unhooked_service(sandbox: SandboxProcess, database_url: str, **env: Any) -> ServiceProcess:
    """The webhook service on the sandbox, not listening (the test sweeps by hand,
    at the moments it chooses; service/test_listener.py covers listening)."""
    return start_service(database_url, sandbox.url, DELIVERY_LISTEN="false", **env)


@contextmanager
def hooked_service(
    sandbox: SandboxProcess, database_url: str, **env: Any
) -> Iterator[ServiceProcess]:
    """``unhooked_service``, with the sandbox posting its signed webhooks to it, each
    send's statuses 20 ms after it."""
    with unhooked_service(sandbox, database_url, **env) as service:
        sandbox.faults(webhook_url=service.webhook_url, app_secret=APP_SECRET, status_delay_ms=20)
        yield service


def first_part_unknown(
    db: Any, sandbox: SandboxProcess, settings: Settings, parts: int = 2
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A person who wrote, and a plan of ``parts`` parts whose first part the platform
    took without its answer reaching the sweep that sent it (the outcome unknown, the
    rest not sent): the person and the document."""
    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], plan_body(parts))
    sandbox.faults(drop_after_accept_rate=1.0)
    sweep(settings)
    sandbox.faults(drop_after_accept_rate=0.0)
    return person, doc


def wrote_and_waiting(
    db: Any, sandbox: SandboxProcess, count: int, tag: str
) -> list[dict[str, Any]]:
    """``count`` people who wrote (here and in the sandbox), each with a three-part
    plan of short parts (300 characters at most) ready, tagged ``tag`` and its index."""
    people = [add_person(db) for _ in range(count)]
    for i, person in enumerate(people):
        add_document(db, person["id"], plan_body(3, chunk_limit=300, tag=f"{tag}{i} "))
    db.execute("UPDATE people SET last_inbound_at = now()")
    for person in people:
        sandbox.say(person["phone"], "hi")
    return people
