"""Events back to the application, and replace keys, with real processes: two webhook
services (each a deliverer), the sandbox playing WhatsApp and the people, Postgres,
and an application endpoint that is down, then up."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from delivery_pipeline.client import DeliveryClient, verify
from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.testing.endpoint import ApplicationEndpoint
from delivery_pipeline.testing.service import APP_SECRET, ServiceProcess
from delivery_pipeline_tests.support.api import SECRET, TOKEN, start_api_service
from delivery_pipeline_tests.support.data import new_phone, plan_body, state_of
from delivery_pipeline_tests.support.inbox import texts
from delivery_pipeline_tests.support.waiting import wait_for

# Time at 1/200: the retry schedule (5 s, 5 min, 30 min, …) and the endpoint's ten
# minutes down alike. In production the schedule runs at 1 (27 h 35 min of retries).
SCALE = 1 / 200
DOWN_SECONDS = 10 * 60 * SCALE


def _events_env(endpoint: ApplicationEndpoint, **extra: Any) -> dict[str, Any]:
    return {
        "DELIVERY_API_WEBHOOKS": f"acme={endpoint.url}",
        "DELIVERY_API_WEBHOOK_SECRETS": f"acme={SECRET}",
        "DELIVERY_API_EVENTS_BACKOFF_SCALE": str(SCALE),
        **extra,
    }


@pytest.fixture
def endpoint() -> Iterator[ApplicationEndpoint]:
    # Down until a test brings it up; up, it takes a random while over each event, so
    # events sent at once arrive in any order: only the sender's order keeps a stream's.
    application = ApplicationEndpoint(jitter=0.1)
    yield application
    application.down()


def _stored_events(db) -> list[dict[str, Any]]:
    return db.execute(
        "SELECT id, 'evt_' || replace(event_id::text, '-', '') AS event_id, type, document_id, "
        "stream, delivered_at FROM api_events WHERE application = 'acme' ORDER BY id"
    ).fetchall()


@pytest.mark.slow
def test_an_endpoint_down_for_ten_minutes_hears_every_event_afterwards(
    db, sandbox, settings, endpoint
):
    url = settings.database.database_url
    env = _events_env(endpoint, DELIVERY_API_EVENTS_ALERT_SECONDS="2")
    with (
        start_api_service(url, sandbox.url, **env) as one,
        start_api_service(url, sandbox.url, **env) as two,
    ):
        sandbox.faults(webhook_url=one.webhook_url, app_secret=APP_SECRET, read_rate=1.0)
        went_down = time.monotonic()
        documents = _a_morning_of_documents(db, sandbox, one, two)
        wait_for(
            lambda: db.execute(
                "SELECT failing_since FROM api_endpoints WHERE application = 'acme'"
            ).fetchone()["failing_since"],
            what="the endpoint seen failing",
        )
        time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - went_down)))
        endpoint.up()

        stored = _stored_events(db)
        received = endpoint.wait_for(lambda got: len(got) >= len(stored), timeout=60)
        time.sleep(1.0)  # a duplicate, if any, would arrive now
        received = list(endpoint.received)
        stored = _stored_events(db)
        alerts = db.execute(
            "SELECT kind FROM ops_alerts WHERE dedup_key = 'application_endpoint:acme' ORDER BY id"
        ).fetchall()

    ids = [r.headers["webhook-id"] for r in received]
    assert Counter(ids) == Counter(e["event_id"] for e in stored), "every event, once per id"
    assert all(e["delivered_at"] is not None for e in stored)
    # In order: each event of a stream is sent only once the one before it was taken.
    first = {r.headers["webhook-id"]: r for r in sorted(received, key=lambda r: r.at, reverse=True)}
    by_stream: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in stored:
        by_stream[event["stream"]].append(event)
    for stream, events in by_stream.items():
        for before, after in zip(events, events[1:], strict=False):
            taken, sent = first[before["event_id"]].answered, first[after["event_id"]].at
            assert sent >= taken, (
                f"{stream}: {after['type']} sent before {before['type']} was taken"
            )
    standard = Webhook(SECRET)
    for r in received:
        assert (
            standard.verify(r.body, r.headers)["type"] == verify(SECRET, r.body, r.headers)["type"]
        )
    types = {doc: [e["type"] for e in by_stream[f"document:{doc}"]] for doc in documents.values()}
    assert types == {
        documents["read"]: ["document.awaiting_reply", "document.delivered", "document.read"],
        documents["read_too"]: ["document.awaiting_reply", "document.delivered", "document.read"],
        documents["cancelled"]: ["document.awaiting_reply", "document.abandoned"],
        documents["stopped"]: ["document.awaiting_reply", "document.abandoned"],
    }
    assert [e["type"] for e in stored if e["stream"].startswith("person:")] == ["person.opted_out"]
    assert [a["kind"] for a in alerts] == ["alert", "resolved"], "one episode, alerted and resolved"


def _a_morning_of_documents(
    db, sandbox, one: ServiceProcess, two: ServiceProcess
) -> dict[str, int]:
    """Documents handed over while the endpoint is down, each taken to its end: two
    knocked, answered, delivered and read; one cancelled; one whose person pressed Stop."""
    made: dict[str, int] = {}
    with DeliveryClient(one.url, TOKEN) as api, DeliveryClient(two.url, TOKEN) as other:
        for name, client in (
            ("read", api),
            ("read_too", other),
            ("cancelled", other),
            ("stopped", api),
        ):
            phone = new_phone()
            made[name] = client.hand_over(
                {"phone": phone, "key": f"user-{name}"}, "plan", plan_body(3)
            )["id"]
            wait_for(
                lambda d=made[name]: state_of(db, d) == "awaiting_reply", what=f"{name} knocked"
            )
            if name.startswith("read"):
                sandbox.say(phone, "yes, send it")
                wait_for(lambda d=made[name]: _read(db, d), what="the plan read")
            elif name == "cancelled":
                other.cancel(made[name], reason="withdrawn")
            else:
                sandbox.say(phone, "stop")
                wait_for(lambda d=made[name]: state_of(db, d) == "abandoned", what="stopped")
    return made


def _read(db, document_id: int) -> bool:
    row = db.execute(
        "SELECT bool_and(read_at IS NOT NULL) AS read FROM delivery_chunks WHERE document_id = %s",
        (document_id,),
    ).fetchone()
    return bool(row["read"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("keys", "delivered"),
    [
        (("weekly-plan", "trip-plan"), "both"),
        ((None, None), "both"),
        (("weekly-plan", "weekly-plan"), "second"),
    ],
    ids=["different-keys", "no-keys", "same-key"],
)
def test_a_plan_replaces_another_only_under_the_same_replace_key(
    db, sandbox, settings, keys, delivered
):
    """Two plans for one person handed over while their knock is pending (the case that
    delivered only the second before replace keys): each delivered, in turn order, unless
    the application said the second replaces the first."""
    with start_api_service(settings.database.database_url, sandbox.url) as service:
        sandbox.faults(webhook_url=service.webhook_url, app_secret=APP_SECRET)
        phone = new_phone()
        bodies = [plan_body(2, tag="first"), plan_body(2, tag="second")]
        ids = []
        with DeliveryClient(service.url, TOKEN) as api:
            for body, key in zip(bodies, keys, strict=True):
                ids.append(api.hand_over({"phone": phone}, "plan", body, replace_key=key)["id"])
                wait_for(lambda d=ids[-1]: state_of(db, d) == "awaiting_reply", what="knocked")
            sandbox.say(phone, "send them")
            wait_for(lambda: state_of(db, ids[1]) == "delivered", what="the second delivered")
            first = api.document(ids[0])

    got = texts(sandbox.inbox(phone))
    if delivered == "both":
        assert first["state"] == "delivered"
        assert got == delivery_messages(bodies[0]) + delivery_messages(bodies[1])
    else:
        assert (first["state"], first["abandon_reason"]) == ("abandoned", "superseded")
        assert got == delivery_messages(bodies[1])
