"""The webhook service: Meta's handshake, signed webhooks, the generator's poke.

A small Starlette app with no Dagster imports. It answers Meta fast and runs
the targeted sweep (that person's or that document's delivery) in the
background after the response, in this process, with the same engine the
Dagster runs use. Any number of replicas may run: the claim keeps delivery
exclusive.

Status codes, and why:
  401/403  missing/wrong signature or token: nothing is stored
  413      body over WEBHOOK_MAX_BODY_BYTES (default 4 MiB: Meta batches reach ~3 MB)
  200      everything with a valid signature, including malformed or unknown
           bodies (stored raw in raw_webhooks), so Meta does not redeliver it
           for 7 days
  503      the database is unreachable: Meta redelivers later, nothing lost
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import uvicorn
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from delivery_pipeline import __version__
from delivery_pipeline.delivery.sweep import DeliveryEngine, pool_size
from delivery_pipeline.service.ingest import WebhookOutcome, apply_payload
from delivery_pipeline.settings import SERVICE_DEFAULT_PORT, Settings, secret
from delivery_pipeline.store.db import async_pool, resolve_database_url
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.signature import signature_valid, tokens_match

log = logging.getLogger(__name__)

TARGETED_SWEEP_CONCURRENCY = 2
POKE_MAX_BODY_BYTES = 64 * 1024


@dataclass
class Service:
    """What the app holds for its lifetime (``request.app.state.service``)."""

    settings: Settings
    pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]
    engine: DeliveryEngine
    sweeps: set[asyncio.Task[None]] = field(default_factory=set)

    def sweep_later(
        self, person_ids: Sequence[int], document_ids: Sequence[int]
    ) -> BackgroundTask | None:
        """A targeted sweep detached from the response, so a slow one never holds the
        connection; tracked so shutdown can cancel it."""
        if not person_ids and not document_ids:
            return None

        async def start() -> None:
            task = asyncio.create_task(self._sweep(person_ids, document_ids))
            self.sweeps.add(task)
            task.add_done_callback(self.sweeps.discard)

        return BackgroundTask(start)

    async def _sweep(self, person_ids: Sequence[int], document_ids: Sequence[int]) -> None:
        targets = [{"person_id": p} for p in person_ids] + [
            {"document_id": d} for d in document_ids
        ]
        for target in targets:
            try:
                result = await self.engine.sweep(concurrency=TARGETED_SWEEP_CONCURRENCY, **target)
                if result.claimed:
                    log.info("targeted sweep %s: %s", target, result.as_dict())
            except Exception:
                log.exception("targeted sweep %s failed; the heartbeat will retry", target)


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    body = bytearray()
    async for part in request.stream():
        body.extend(part)
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


# ── endpoints ───────────────────────────────────────────────────────────


async def verify(request: Request) -> Response:
    """Meta's verification handshake."""
    expected = secret(_service(request).settings.whatsapp.verify_token)
    params = request.query_params
    if (
        params.get("hub.mode") == "subscribe"
        and expected
        and tokens_match(params.get("hub.verify_token", ""), expected)
    ):
        return PlainTextResponse(params.get("hub.challenge", ""))
    return PlainTextResponse("verification failed", status_code=403)


async def receive(request: Request) -> Response:
    """A signed webhook body: inbound messages and statuses."""
    service = _service(request)
    limit = service.settings.service.webhook_max_body_bytes
    try:
        body = await _read_body(request, limit)
    except _TooLarge:
        log.warning("webhook body over %s bytes refused (413)", limit)
        return PlainTextResponse("payload too large", status_code=413)
    header = request.headers.get("x-hub-signature-256")
    if not header:
        return PlainTextResponse("missing signature", status_code=401)
    app_secret = secret(service.settings.whatsapp.app_secret)
    if not app_secret or not signature_valid(app_secret, body, header):
        log.warning("webhook with a wrong signature refused (403)")
        return PlainTextResponse("invalid signature", status_code=403)
    try:
        async with service.pool.connection() as conn:
            outcome = await _handle(conn, body, service.settings)
    except (psycopg.OperationalError, TimeoutError) as exc:
        log.error("database unavailable, asking Meta to redeliver: %s", exc)
        return PlainTextResponse("database unavailable", status_code=503)
    return JSONResponse(
        {"inbound": outcome.inbound_stored, "statuses": outcome.statuses_stored},
        background=service.sweep_later(
            sorted(outcome.persons_to_sweep), sorted(outcome.documents_to_sweep)
        ),
    )


async def poke(request: Request) -> Response:
    """The generator's poke: sweep one document or one person now."""
    service = _service(request)
    expected = secret(service.settings.service.internal_token)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer" or not tokens_match(token.strip(), expected):
        return JSONResponse({"error": "a valid bearer token is required"}, status_code=401)
    try:
        payload = json.loads(await _read_body(request, POKE_MAX_BODY_BYTES))
    except (_TooLarge, ValueError):
        return JSONResponse(
            {"error": 'body must be JSON like {"document_id": 42}'}, status_code=400
        )
    target = (
        {k: payload.get(k) for k in ("document_id", "person_id")}
        if isinstance(payload, dict)
        else {}
    )
    ids = {k: v for k, v in target.items() if v is not None}
    if len(ids) != 1 or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in ids.values()
    ):
        return JSONResponse(
            {"error": "give exactly one integer: document_id or person_id"}, status_code=400
        )
    persons = [ids["person_id"]] if "person_id" in ids else []
    documents = [ids["document_id"]] if "document_id" in ids else []
    return JSONResponse(
        {"accepted": ids}, status_code=202, background=service.sweep_later(persons, documents)
    )


async def healthz(request: Request) -> Response:
    """Database reachable, schema version, service version."""
    try:
        async with _service(request).pool.connection(timeout=2) as conn:
            cur = await conn.execute(QUERIES.health)
            row = await cur.fetchone()
    except Exception as exc:  # noqa: BLE001 - health reports any failure
        return JSONResponse(
            {"status": "unavailable", "database": str(exc)[:200], "version": __version__},
            status_code=503,
        )
    return JSONResponse(
        {
            "status": "ok",
            "database": "reachable",
            "schema_version": row["schema_version"] if row else None,
            "version": __version__,
        }
    )


ROUTES = [
    Route("/webhooks/whatsapp", verify, methods=["GET"]),
    Route("/webhooks/whatsapp", receive, methods=["POST"]),
    Route("/internal/sweep", poke, methods=["POST"]),
    Route("/healthz", healthz, methods=["GET"]),
]


def create_app(settings: Settings, database_url: str) -> Starlette:
    """The ASGI app; the pool, client and engine live for the app's lifetime."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pool = async_pool(database_url, max_size=pool_size(settings.delivery.concurrency) + 2)
        await pool.open(wait=False)
        client = CloudApiClient.from_settings(settings)
        engine = DeliveryEngine(settings, pool, client)
        service = Service(settings, pool, engine)
        app.state.service = service
        if settings.whatsapp.app_secret is None:
            log.error("WHATSAPP_APP_SECRET is not set: every webhook POST will be refused")
        try:
            yield
        finally:
            for task in list(service.sweeps):
                task.cancel()
            await asyncio.gather(*service.sweeps, return_exceptions=True)
            await engine.aclose()
            await client.aclose()
            await pool.close()

    return Starlette(routes=ROUTES, lifespan=lifespan)


async def _handle(
    conn: psycopg.AsyncConnection[Any], body: bytes, settings: Settings
) -> WebhookOutcome:
    """Apply a signed body; anything we cannot use is kept raw, never dropped."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        await _store_raw(conn, body, f"malformed json: {exc}")
        log.warning("malformed webhook JSON stored raw: %s", exc)
        return WebhookOutcome()
    try:
        outcome = await _apply_retrying(conn, payload, settings)
    except psycopg.OperationalError:
        raise
    except Exception as exc:
        # Not a 500: Meta would redeliver the same body for days and it
        # would fail the same way. Keep it for inspection and say so.
        log.exception("webhook could not be applied; stored raw")
        await _store_raw(conn, body, f"unusable: {type(exc).__name__}: {exc}"[:500])
        return WebhookOutcome()
    if outcome.unhandled:
        unhandled = ", ".join(sorted(set(outcome.unhandled)))
        await _store_raw(conn, body, f"unhandled: {unhandled}"[:490])
    return outcome


async def _apply_retrying(
    conn: psycopg.AsyncConnection[Any], payload: Any, settings: Settings
) -> WebhookOutcome:
    """A deadlock between two concurrent batches rolls one back whole: apply it again."""
    for attempt in range(3):
        try:
            return await apply_payload(conn, payload, settings.delivery)
        except psycopg.errors.TransactionRollback:
            if attempt == 2:
                raise
            log.info("webhook batch rolled back by a deadlock; applying it again")
            await asyncio.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


async def _store_raw(conn: psycopg.AsyncConnection[Any], body: bytes, reason: str) -> None:
    await conn.execute(QUERIES.insert_raw_webhook, {"reason": reason, "body": body})


def serve(settings: Settings, *, host: str, port: int, log_level: str = "info") -> None:
    """Run the service until interrupted."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings, resolve_database_url(settings.database))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m delivery_pipeline.service`` (``delivery-pipeline service`` is the same)."""
    parser = argparse.ArgumentParser(
        prog="python -m delivery_pipeline.service", description="Run the webhook service."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=SERVICE_DEFAULT_PORT)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    serve(Settings.from_env(), host=args.host, port=args.port, log_level=args.log_level)
