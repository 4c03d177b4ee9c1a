"""The webhook service: Meta's handshake, signed webhooks, the generator's poke, the
reviewers' page (``review_page.py``) and the applications' API (``api/``, under ``/v1``).

A small Starlette app with no Dagster imports. It answers Meta fast and runs
the targeted sweep (that person's or that document's delivery) in the
background after the response, in this process, with the same engine the
Dagster runs use. Any number of replicas may run: the claim keeps delivery
exclusive. Beside the requests it runs two companions: the timeline push (what it
delivered, onto Dagster's timeline: ``timeline_push.py``), the daemon watch
(is Dagster's daemon alive; ops alerts posted: ``daemon_watch.py``) and the
applications' event deliverer (``api/events.py``).

Status codes, and why:
  401/403  missing/wrong signature or token: nothing is stored (missing or malformed:
           refused from the headers, the body never read)
  408      headers or body slower than DELIVERY_SERVICE_{HEADER,BODY}_TIMEOUT_SECONDS
  413      body over WEBHOOK_MAX_BODY_BYTES (default 4 MiB: Meta batches reach ~3 MB)
  431      headers over DELIVERY_SERVICE_MAX_HEADER_BYTES
  200      everything with a valid signature once it is kept: applied, or
           (malformed, unknown, or holding what Postgres cannot store) kept
           raw in raw_webhooks, so Meta does not redeliver it for 7 days
  503      the body could not be kept (the database is unreachable): Meta
           redelivers later, nothing lost

``/metrics`` (``metrics.py``) counts each of these by route and code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from delivery_pipeline import __version__, logs
from delivery_pipeline.delivery.sweep import DeliveryEngine, pool_size
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.reports.rates import RateTable, RateTableError, load_rate_table
from delivery_pipeline.service.api.auth import Tokens
from delivery_pipeline.service.api.events import EventDeliverer
from delivery_pipeline.service.api.openapi import rendered as api_description
from delivery_pipeline.service.api.routes import API_ROUTES, ApiState, http_exception
from delivery_pipeline.service.app_state import Service, one_line, service_of
from delivery_pipeline.service.bodies import TooLarge, TooSlow, read_limited
from delivery_pipeline.service.daemon_watch import watch_forever
from delivery_pipeline.service.ingest import OurNumbers, WebhookOutcome, apply_payload
from delivery_pipeline.service.listener import ReadyListener
from delivery_pipeline.service.metrics import Counters, CountResponses, scrape
from delivery_pipeline.service.protocol import guarded_http
from delivery_pipeline.service.review_page import REVIEW_ROUTES
from delivery_pipeline.service.sessions import Sessions
from delivery_pipeline.service.timeline_push import TimelinePush
from delivery_pipeline.settings import (
    SERVICE_DEFAULT_PORT,
    Settings,
    SettingsError,
    transport_warnings,
)
from delivery_pipeline.settings.urls import secret, without_password
from delivery_pipeline.store.db import (
    async_pool,
    database_unavailable,
    resolve_database_url,
    with_application_name,
)
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.watch.delivery_events import SERVICE_SOURCE
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.credential_check import check_identity
from delivery_pipeline.whatsapp.signature import signature_shaped, signature_valid, tokens_match
from delivery_pipeline.whatsapp.webhook_bodies import UnusableBody, read_body

log = logging.getLogger(__name__)

# The API may start a moment after us (``up`` starts the sandbox first, a
# deployment may not): ask a few times before saying it does not answer.
IDENTITY_CHECK_ATTEMPTS = 5
POKE_MAX_BODY_BYTES = 64 * 1024
HEALTH_DATABASE_DOWN = "unreachable, or not migrated: see the service's log"


# ── endpoints ───────────────────────────────────────────────────────────


async def verify(request: Request) -> Response:
    """Meta's verification handshake."""
    expected = secret(service_of(request).settings.whatsapp.verify_token)
    params = request.query_params
    if (
        params.get("hub.mode") == "subscribe"
        and expected
        and tokens_match(params.get("hub.verify_token", ""), expected)
    ):
        return PlainTextResponse(params.get("hub.challenge", ""))
    return PlainTextResponse("verification failed", status_code=403)


async def receive(request: Request) -> Response:
    """A signed webhook body: inbound messages and statuses.

    Everything that can be refused from the headers is refused before a byte of the
    body is read, and the connection closed (``_refused``): without a signature of the
    right shape, or a secret to check it with, the body is never wanted.
    """
    service = service_of(request)
    limit = service.settings.service.webhook_max_body_bytes
    header = request.headers.get("x-hub-signature-256")
    if not header:
        service.quiet_log.log(
            logging.WARNING, "no-signature", "webhook without a signature refused (401)"
        )
        service.counters.add("webhook_signature_failures_total", reason="missing")
        return _refused("missing signature", 401)
    app_secret = secret(service.settings.whatsapp.app_secret)
    if not app_secret:
        service.quiet_log.log(
            logging.ERROR, "no-secret", "webhook refused (403): WHATSAPP_APP_SECRET is not set"
        )
        service.counters.add("webhook_signature_failures_total", reason="invalid")
        return _refused("invalid signature", 403)
    if not signature_shaped(header):
        service.counters.add("webhook_signature_failures_total", reason="invalid")
        service.quiet_log.log(
            logging.WARNING, "bad-signature", "webhook with a malformed signature refused (403)"
        )
        return _refused("invalid signature", 403)
    try:
        body = await read_limited(request, limit)
    except TooLarge:
        service.quiet_log.log(
            logging.WARNING, "too-large", "webhook body over %s bytes refused (413)", limit
        )
        return _refused("payload too large", 413)
    if not signature_valid(app_secret, body, header):
        service.counters.add("webhook_signature_failures_total", reason="invalid")
        service.quiet_log.log(
            logging.WARNING, "bad-signature", "webhook with a wrong signature refused (403)"
        )
        return PlainTextResponse("invalid signature", status_code=403)
    try:
        async with service.pool.connection() as conn:
            outcome = await _handle(conn, body, service)
    except Exception as exc:
        if database_unavailable(exc):
            what = "database unavailable"
        elif isinstance(exc, psycopg.Error):  # a schema or a grant missing: deployment
            what = "the database refused to keep it"
        else:
            log.exception("a webhook body could not be kept; asking Meta to redeliver (503)")
            return PlainTextResponse("database unavailable", status_code=503)
        service.quiet_log.log(
            logging.ERROR,
            what,
            "%s, asking Meta to redeliver (503): %s",
            what,
            one_line(str(exc)),
        )
        return PlainTextResponse("database unavailable", status_code=503)
    if outcome.documents_changed:
        service.recorded()  # a failed status abandoned or un-delivered a document
    return JSONResponse(
        {"inbound": outcome.inbound_stored, "statuses": outcome.statuses_stored},
        background=service.sweep_later(outcome.to_sweep),
    )


def _refused(text: str, status: int) -> Response:
    """A refusal whose body is not read: the connection closes after it, so the rest of the
    body (up to the limit, as slowly as the client likes) is never waited for."""
    return PlainTextResponse(text, status_code=status, headers={"Connection": "close"})


async def too_slow(request: Request, exc: Exception) -> Response:
    """A body not whole within DELIVERY_SERVICE_BODY_TIMEOUT_SECONDS: 408, and closed."""
    service_of(request).quiet_log.log(
        logging.WARNING,
        "slow-body",
        "%s %s: body not complete within %g s, refused (408)",
        request.method,
        one_line(request.url.path)[:200],
        service_of(request).settings.service.body_timeout_seconds,
    )
    return _refused("request body too slow", 408)


async def client_left(request: Request, exc: Exception) -> Response:
    """The client went away mid-body: nobody hears the answer; one counted line."""
    service_of(request).quiet_log.log(
        logging.INFO,
        "client-left",
        "%s %s: the client left before its body was complete",
        request.method,
        one_line(request.url.path)[:200],
    )
    return _refused("client left", 400)


async def poke(request: Request) -> Response:
    """The generator's poke: sweep one document or one person now."""
    service = service_of(request)
    expected = secret(service.settings.service.internal_token)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer" or not tokens_match(token.strip(), expected):
        return JSONResponse(
            {"error": "a valid bearer token is required"},
            status_code=401,
            headers={"Connection": "close"},  # the body is never read
        )
    try:
        payload = json.loads(await read_limited(request, POKE_MAX_BODY_BYTES))
    except (TooLarge, ValueError):
        return JSONResponse(
            {"error": 'body must be JSON like {"document_id": 42}'}, status_code=400
        )
    fields = (
        {k: payload.get(k) for k in ("document_id", "person_id")}
        if isinstance(payload, dict)
        else {}
    )
    ids = {k: v for k, v in fields.items() if v is not None}
    if len(ids) != 1 or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in ids.values()
    ):
        return JSONResponse(
            {"error": "give exactly one integer: document_id or person_id"}, status_code=400
        )
    try:
        target = SweepTarget(**ids)
    except ValueError as exc:  # not an id a row can have: the field named
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse(
        {"accepted": target.named}, status_code=202, background=service.sweep_later([target])
    )


async def healthz(request: Request) -> Response:
    """Database reachable, schema version, service version, ready notifications heard."""
    service = service_of(request)
    try:
        async with service.pool.connection(timeout=2) as conn:
            schema_version = await QUERIES.health.one(conn, {})
    except Exception as exc:  # noqa: BLE001 - health reports any failure
        # The answer is for anyone who can reach the port: a fixed sentence. What
        # went wrong (hosts, user names, the driver's text) goes to our log.
        service.quiet_log.log(
            logging.WARNING,
            "healthz-database",
            "health check: the database is not usable (%s): %s",
            type(exc).__name__,
            one_line(str(exc)),
        )
        return JSONResponse(
            {"status": "unavailable", "database": HEALTH_DATABASE_DOWN, "version": __version__},
            status_code=503,
        )
    return JSONResponse(
        {
            "status": "ok",
            "database": "reachable",
            "schema_version": schema_version,
            "version": __version__,
            "listening": service.listener is not None and service.listener.connected.is_set(),
        }
    )


async def metrics(request: Request) -> Response:
    """Prometheus text for the operators' scraper (``metrics.py``): loopback only unless
    ``DELIVERY_METRICS_TOKEN`` is set and sent."""
    service = service_of(request)
    token = secret(service.settings.service.metrics_token)
    return await scrape(request, service.pool, service.counters, token)


ROUTES = [
    Route("/webhooks/whatsapp", verify, methods=["GET"]),
    Route("/webhooks/whatsapp", receive, methods=["POST"]),
    Route("/internal/sweep", poke, methods=["POST"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    *REVIEW_ROUTES,
    *API_ROUTES,
]
# Connections beside the engine's: the applications' API and its event deliverer.
API_CONNECTIONS = 4


def create_app(settings: Settings, database_url: str) -> Starlette:
    """The ASGI app; the pool, client and engine live for the app's lifetime."""
    counters = Counters()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Sessions named for the service: the delivery-events outbox records it as the writer.
        pool = async_pool(
            with_application_name(database_url, SERVICE_SOURCE),
            max_size=pool_size(settings.delivery.concurrency) + 2 + API_CONNECTIONS,
            pooled=settings.database.transaction_pooled,
        )
        listen_url = listen_url_for(settings, database_url)
        await pool.open(wait=False)
        client = CloudApiClient.from_settings(settings)
        webserver = settings.service.dagster_webserver_url
        engine = DeliveryEngine(settings, pool, client)
        service = Service(
            settings,
            pool,
            engine,
            review_sessions=Sessions.from_settings(settings.review),
            timeline_push=TimelinePush(pool, webserver) if webserver else None,
            counters=counters,
        )
        app.state.service = service
        _say_what_is_off(settings, service)
        listening = _listen(service, listen_url)
        # In the background: webhooks are received whatever the answer, and
        # the API (a sandbox started alongside) may come up a moment later.
        identity = asyncio.create_task(_say_whether_identity_works(client, settings))
        app.state.api = ApiState(
            settings, Tokens.from_settings(settings.api), _rate_table(settings), api_description()
        )
        companions = _start_companions(service, database_url, listen_url)
        try:
            yield
        finally:
            background = [
                identity,
                *companions,
                *service.sweeps,
                *([listening] if listening else []),
            ]
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await engine.aclose()
            await client.aclose()
            await pool.close()

    app = Starlette(
        routes=ROUTES,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: http_exception,
            TooSlow: too_slow,
            ClientDisconnect: client_left,
        },
        middleware=[Middleware(CountResponses, counters=counters)],
    )
    app.state.body_timeout = settings.service.body_timeout_seconds
    # The router would answer /path/ with a redirect to http://<the Host sent>/path: a
    # forged Host would send the browser elsewhere. Routes name their own addresses.
    app.router.redirect_slashes = False
    return app


def _say_what_is_off(settings: Settings, service: Service) -> None:
    """At start, in the log: what this configuration refuses or leaves out."""
    if settings.whatsapp.app_secret is None:
        log.error("WHATSAPP_APP_SECRET is not set: every webhook POST will be refused")
    for warning in transport_warnings(settings):
        log.warning(warning)
    if service.review_sessions is None:
        log.info("no review or operator token is set: the review page answers 404")


def _listen(service: Service, listen_url: str | None) -> asyncio.Task[None] | None:
    """The ready notifications' listener, when ``DELIVERY_LISTEN`` and a connection
    that can LISTEN allow it."""
    settings = service.settings
    if settings.service.listen and listen_url is not None:
        service.listener = ReadyListener(listen_url, service.pool, service.sweep_and_record)
        return asyncio.create_task(service.listener.run())
    if settings.service.listen:
        log.info(
            "not listening for ready documents: DATABASE_POOL_MODE is transaction and no "
            "DATABASE_LISTEN_URL is set; sweeps follow the pokes and the heartbeat"
        )
    return None


def _start_companions(
    service: Service, database_url: str, listen_url: str | None
) -> list[asyncio.Task[None]]:
    """What runs beside the routes for the app's lifetime: the daemon watch, the
    applications' events, the timeline push."""
    settings = service.settings
    deliverer = EventDeliverer(service.pool, listen_url, settings)
    companions = [
        asyncio.create_task(watch_forever(database_url, settings)),
        asyncio.create_task(
            deliverer.run() if settings.api.endpoints else deliverer.register_only()
        ),
    ]
    if service.timeline_push is not None:
        companions.append(asyncio.create_task(service.timeline_push.run()))
    return companions


def listen_url_for(settings: Settings, database_url: str) -> str | None:
    """Where the service LISTENs: ``DATABASE_LISTEN_URL``, else the app database unless a
    transaction pooler stands in front of it (a notification goes to the session that
    listened, which such a pooler hands to others between transactions): then nowhere."""
    if settings.database.listen_url:
        return settings.database.listen_url
    return None if settings.database.transaction_pooled else database_url


def _rate_table(settings: Settings) -> RateTable | None:
    """The prices the API answers a document's cost in (DELIVERY_RATE_TABLE), if any."""
    path = settings.delivery.rate_table
    if not path:
        return None
    try:
        return load_rate_table(path)
    except RateTableError as exc:
        log.error("the API answers costs without amounts: %s", exc)
        return None


async def _say_whether_identity_works(client: CloudApiClient, settings: Settings) -> None:
    """One line at start-up: will our sends be accepted? (A 190 told now, naming the
    variable, rather than in the middle of the first sweep.)"""
    for attempt in range(IDENTITY_CHECK_ATTEMPTS):
        problem = await check_identity(client, settings.whatsapp)
        if problem is None:
            log.info(
                "WhatsApp at %s accepts our identity (phone number id %s)",
                without_password(settings.whatsapp.api_base_url),
                ", ".join(n.id for n in settings.whatsapp.business_numbers),
            )
            return
        if problem.refused or attempt == IDENTITY_CHECK_ATTEMPTS - 1:
            log.error("sending will not work: %s (webhooks are still received)", problem.message)
            return
        await asyncio.sleep(1.0)


async def _handle(
    conn: psycopg.AsyncConnection[Any], body: bytes, service: Service
) -> WebhookOutcome:
    """Apply a signed body; whatever we cannot use is kept raw, never dropped.

    Raises only when the body could not be kept at all (the caller answers
    503). Not a 500 for a body we cannot use: Meta would redeliver the same
    bytes for days and they would fail the same way.
    """
    try:
        payload, changed = read_body(body)
    except ValueError as exc:  # UnicodeDecodeError is one
        service.counters.add("webhooks_total", kind="malformed")
        await _keep_raw(conn, body, service, [f"malformed JSON: {_json_problem(exc)}"])
        return WebhookOutcome()
    service.counters.webhook(payload)
    reasons = [f"stored with {', '.join(changed)} replaced"] if changed else []
    try:
        outcome = await _apply_retrying(conn, payload, service.settings)
    except UnusableBody as exc:
        outcome = WebhookOutcome()
        reasons.append(f"unusable: {exc}")
    except Exception as exc:
        if database_unavailable(exc):
            raise
        log.exception("a webhook body could not be applied (a bug); keeping it raw")
        outcome = WebhookOutcome()
        reasons.append(f"internal: {type(exc).__name__}")
    reasons.extend(sorted(set(outcome.unhandled)))
    if reasons:
        await _keep_raw(conn, body, service, reasons)
    return outcome


def _json_problem(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    return str(exc)


async def _keep_raw(
    conn: psycopg.AsyncConnection[Any], body: bytes, service: Service, reasons: list[str]
) -> None:
    """Keep the exact bytes with why, and say so in one line (a few per kind, then a count)."""
    reason = one_line("; ".join(reasons))[:500]
    kept = await QUERIES.insert_raw_webhook.one(conn, {"reason": reason, "body": body})
    raw_id = kept.id if kept else None
    # Fields of the platform we do not subscribe to use are normal; anything
    # else means the body (or part of it) was not what Meta sends.
    unused = all(r.startswith("field:") for r in reasons)
    kind = reasons[0].partition(":")[0]
    service.quiet_log.log(
        logging.INFO if unused else logging.WARNING,
        kind,
        "webhook body kept raw (raw_webhooks id %s): %s",
        raw_id,
        reason,
    )


async def _apply_retrying(
    conn: psycopg.AsyncConnection[Any], payload: Any, settings: Settings
) -> WebhookOutcome:
    """A deadlock between two concurrent batches rolls one back whole: apply it again."""
    for attempt in range(3):
        try:
            return await apply_payload(
                conn, payload, settings.delivery, OurNumbers.of(settings.whatsapp)
            )
        except psycopg.errors.TransactionRollback:
            if attempt == 2:
                raise
            log.info("webhook batch rolled back by a deadlock; applying it again")
            await asyncio.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def serve(settings: Settings, *, host: str, port: int, log_level: str = "info") -> None:
    """Run the service until interrupted."""
    logs.configure(log_level, settings)
    app = create_app(settings, resolve_database_url(settings.database))
    # uvicorn's own records go through our handler (log_config=None), secrets redacted.
    # The scheme and client of a request are the forwarded ones only from a trusted
    # proxy (DELIVERY_TRUSTED_PROXIES): the review cookie's Secure flag and the
    # sign-in limits' client depend on them.
    # The connection's limits (headers' size and time, how many) are ``protocol.py``'s;
    # the body's, the app's.
    limits = settings.service
    trusted = settings.service.trusted_proxy_list
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        log_config=None,
        forwarded_allow_ips=trusted,
        http=guarded_http(limits.max_header_bytes, limits.header_timeout_seconds, trusted),
        limit_concurrency=limits.max_connections,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m delivery_pipeline.service`` (``delivery-pipeline service`` is the same)."""
    parser = argparse.ArgumentParser(
        prog="python -m delivery_pipeline.service", description="Run the webhook service."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=SERVICE_DEFAULT_PORT)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        parser.exit(2, f"service: {exc}\n")
    serve(settings, host=args.host, port=args.port, log_level=args.log_level)
