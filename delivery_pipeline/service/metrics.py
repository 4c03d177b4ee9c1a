"""``GET /metrics``: the webhook service in Prometheus' text format (version 0.0.4).

Two kinds of numbers. What the fleet shares is read from the database at
scrape time, in one statement (``metrics_snapshot``, sql/queries/metrics.sql):
each waiting document state's count and oldest age, the sending pause and the
pacer per number, template health, unsent ops alerts, the application events
outbox and the delivery-events outbox. Every replica answers the same for
those: aggregate them with ``max``, not ``sum``. What this process saw is
counted here, since it started: webhooks by kind, signature failures, and
responses by route and code (the 413s and 429s among them): ``sum`` them
across replicas, ``rate`` them over time.

Who may read it: with ``DELIVERY_METRICS_TOKEN`` set, whoever sends it as a
bearer token; unset, loopback peers only (behind a trusted proxy, the client
it names). Nothing secret is a label or a value: numbers, states, template
names, application names, phone number ids.

Hand-written rather than ``prometheus_client``: the format is a few lines, and
the project's lock carries no client library for it.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from delivery_pipeline.store.db import database_unavailable
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.webhook_bodies import UnusableBody, iter_changes
from delivery_pipeline.whatsapp.webhook_values import TEMPLATE_FIELDS

log = logging.getLogger(__name__)

PREFIX = "delivery_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# metric (without the prefix) → (type, help), for what the database says.
DATABASE_FAMILIES: dict[str, tuple[str, str]] = {
    "documents": ("gauge", "documents waiting in each state (every waiting state, zero too)"),
    "documents_oldest_age_seconds": (
        "gauge",
        "how long the oldest document of each waiting state has been in it (0: none)",
    ),
    "documents_abandoned_last_day": ("gauge", "documents abandoned in the last 24 h, by reason"),
    "sending_paused": ("gauge", "1 while sending is paused (phone_number_id '*': every number)"),
    "sending_paused_seconds": ("gauge", "how long sending has been paused (0: not paused)"),
    "sending_pause_refused_sends": (
        "gauge",
        "sends refused by the pause since it began (the pause's own count)",
    ),
    "pacer_booked_ahead_seconds": (
        "gauge",
        "how far ahead the number's shared send timeline is booked",
    ),
    "pacer_throttles": ("counter", "times the platform throttled the number (130429), ever"),
    "template_sendable": (
        "gauge",
        "1 when the template may be sent (knock and document templates)",
    ),
    "template_healthy": (
        "gauge",
        "1 when the template has no problem; its status and quality as the platform said",
    ),
    "knocks_unconfirmed": (
        "gauge",
        "knocks of the last 24 h accepted but neither delivered, read nor failed, by template",
    ),
    "ops_alerts_unsent": ("gauge", "ops alerts of the last 24 h not posted yet, by channel"),
    "ops_alerts_unsent_oldest_age_seconds": (
        "gauge",
        "age of the oldest ops alert not posted yet, by channel",
    ),
    "ops_alert_poster_leased": ("gauge", "1 while a process holds the ops outbox's lease"),
    "api_events_waiting": ("gauge", "application events not delivered yet, by application"),
    "api_events_oldest_age_seconds": (
        "gauge",
        "age of the oldest application event not delivered yet (0: none)",
    ),
    "api_endpoint_failing": ("gauge", "1 while the application's endpoint is failing"),
    "delivery_events_unreported": (
        "gauge",
        "deliveries not yet on Dagster's delivered_documents timeline",
    ),
    "delivery_events_unreported_oldest_age_seconds": (
        "gauge",
        "age of the oldest delivery not yet on Dagster's timeline (0: none)",
    ),
}

PROCESS_FAMILIES: dict[str, tuple[str, str]] = {
    "webhooks_total": (
        "counter",
        "signed webhook changes this process received, by kind (Meta's field; messages split "
        "into inbound messages and statuses; malformed: a body that was not JSON)",
    ),
    "webhook_signature_failures_total": (
        "counter",
        "webhook POSTs refused for their signature: missing (401) or invalid (403)",
    ),
    "http_responses_total": (
        "counter",
        "responses of this process by route and code (413: a body over its limit, 429: a rate "
        "limit)",
    ),
    "metrics_database_up": ("gauge", "1 when this scrape read the database"),
    "metrics_scrape_seconds": ("gauge", "how long this scrape's database read took"),
}

# The first path segment → the route label of http_responses_total (bounded).
ROUTES = {"webhooks": "webhooks", "v1": "api", "review": "review", "internal": "internal"}
KNOWN_FIELDS = frozenset({"messages", "user_id_update", *TEMPLATE_FIELDS})

Labels = tuple[tuple[str, str], ...]


class Counters:
    """This process's counters, since it started."""

    def __init__(self) -> None:
        self._values: Counter[tuple[str, Labels]] = Counter()

    def add(self, metric: str, amount: int = 1, **labels: str) -> None:
        self._values[(metric, tuple(sorted(labels.items())))] += amount

    def value(self, metric: str, **labels: str) -> int:
        return self._values[(metric, tuple(sorted(labels.items())))]

    def webhook(self, payload: Any) -> None:
        """Count a signed body's changes by kind."""
        try:
            changes = iter_changes(payload)
        except UnusableBody:
            self.add("webhooks_total", kind="unusable")
            return
        for field, value, _ in changes:
            if field == "messages":
                kinds = [k for k in ("messages", "statuses") if value.get(k)] or ["messages_other"]
            else:
                kinds = [field if field in KNOWN_FIELDS else "other"]
            for kind in kinds:
                self.add("webhooks_total", kind=kind)

    def samples(self) -> Iterable[tuple[str, Labels, float]]:
        for (metric, labels), value in sorted(self._values.items()):
            yield metric, labels, float(value)


def route_of(path: str) -> str:
    return ROUTES.get(path.strip("/").split("/", 1)[0], "other")


class CountResponses:
    """ASGI middleware: every HTTP response counted by route and status code."""

    def __init__(self, app: Any, counters: Counters) -> None:
        self.app = app
        self.counters = counters

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_of(scope.get("path", ""))

        async def counting(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.counters.add("http_responses_total", route=route, code=str(message["status"]))
            await send(message)

        await self.app(scope, receive, counting)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else repr(value)


def render(
    database: Iterable[tuple[str, Labels, float]],
    process: Iterable[tuple[str, Labels, float]],
) -> str:
    """The exposition text: each family's HELP and TYPE, then its samples."""
    by_family: dict[str, list[tuple[Labels, float]]] = {}
    for metric, labels, value in [*database, *process]:
        by_family.setdefault(metric, []).append((labels, value))
    lines: list[str] = []
    for families in (DATABASE_FAMILIES, PROCESS_FAMILIES):
        for metric, (kind, text) in families.items():
            name = PREFIX + metric
            lines += [f"# HELP {name} {_escape(text)}", f"# TYPE {name} {kind}"]
            for labels, value in by_family.get(metric, []):
                shown = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels)
                lines.append(
                    f"{name}{{{shown}}} {_number(value)}" if shown else f"{name} {_number(value)}"
                )
    return "\n".join(lines) + "\n"


def allowed(request: Request, token: str | None) -> bool:
    """A bearer token when ``DELIVERY_METRICS_TOKEN`` is set, else a loopback client."""
    if token:
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), token.encode()
        )
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def scrape(
    request: Request, pool: AsyncConnectionPool[Any], counters: Counters, token: str | None
) -> Response:
    """The page: refused unless ``allowed``, else the database's samples read now beside the
    process's counters (``pool`` and ``counters`` are the service's)."""
    if not allowed(request, token):
        return PlainTextResponse(
            "metrics: loopback only, or send DELIVERY_METRICS_TOKEN as a bearer token",
            status_code=403,
        )
    database: list[tuple[str, Labels, float]] = []
    started = time.perf_counter()
    up = 1.0
    try:
        async with pool.connection() as conn:
            rows = await QUERIES.metrics_snapshot.all(conn, {})
        database = [
            (row.metric, tuple(sorted((k, str(v)) for k, v in row.labels.items())), row.value)
            for row in rows
        ]
    except Exception as exc:
        if not database_unavailable(exc):
            log.exception("/metrics could not read the database")
        up = 0.0
    elapsed = time.perf_counter() - started
    process = [
        *counters.samples(),
        ("metrics_database_up", (), up),
        ("metrics_scrape_seconds", (), elapsed),
    ]
    return Response(render(database, process), media_type=CONTENT_TYPE)
