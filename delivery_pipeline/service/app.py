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
import hmac
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from delivery_pipeline import __version__
from delivery_pipeline.delivery.engine import DeliveryEngine, pool_size
from delivery_pipeline.service.ingest import WebhookOutcome, apply_payload, signature_valid
from delivery_pipeline.settings import SERVICE_DEFAULT_PORT, Settings
from delivery_pipeline.store.db import QUERIES, async_pool, resolve_database_url
from delivery_pipeline.whatsapp.client import CloudApiClient

log = logging.getLogger(__name__)

TARGETED_SWEEP_CONCURRENCY = 2


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


def create_app(settings: Settings, database_url: str) -> Starlette:
    """The ASGI app; the pool, client and engine live for the app's lifetime."""
    state: dict[str, Any] = {"sweeps": set()}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pool = async_pool(database_url, max_size=pool_size(settings.concurrency) + 2)
        await pool.open(wait=False)
        client = CloudApiClient.from_settings(settings)
        state["pool"] = pool
        state["engine"] = DeliveryEngine(settings, pool, client)
        if not settings.app_secret:
            log.error("WHATSAPP_APP_SECRET is not set: every webhook POST will be refused")
        try:
            yield
        finally:
            for task in list(state["sweeps"]):
                task.cancel()
            await asyncio.gather(*state["sweeps"], return_exceptions=True)
            await client.aclose()
            await pool.close()

    async def targeted_sweep(person_ids: Sequence[int], document_ids: Sequence[int]) -> None:
        engine: DeliveryEngine = state["engine"]
        for person_id in person_ids:
            await _sweep_logged(engine, person_id=person_id)
        for document_id in document_ids:
            await _sweep_logged(engine, document_id=document_id)

    def background(person_ids: Sequence[int], document_ids: Sequence[int]) -> BackgroundTask | None:
        if not person_ids and not document_ids:
            return None

        async def run() -> None:
            # Detached from the response so a slow sweep never holds the
            # connection; tracked so shutdown can cancel it.
            task = asyncio.create_task(targeted_sweep(person_ids, document_ids))
            state["sweeps"].add(task)
            task.add_done_callback(state["sweeps"].discard)

        return BackgroundTask(run)

    async def verify(request: Request) -> Response:
        params = request.query_params
        token = params.get("hub.verify_token", "")
        if (
            params.get("hub.mode") == "subscribe"
            and settings.verify_token
            and hmac.compare_digest(token.encode(), settings.verify_token.encode())
        ):
            return PlainTextResponse(params.get("hub.challenge", ""))
        return PlainTextResponse("verification failed", status_code=403)

    async def receive(request: Request) -> Response:
        try:
            body = await _read_body(request, settings.webhook_max_body_bytes)
        except _TooLarge:
            log.warning("webhook body over %s bytes refused (413)", settings.webhook_max_body_bytes)
            return PlainTextResponse("payload too large", status_code=413)
        header = request.headers.get("x-hub-signature-256")
        if not header:
            return PlainTextResponse("missing signature", status_code=401)
        if not settings.app_secret or not signature_valid(settings.app_secret, body, header):
            log.warning("webhook with a wrong signature refused (403)")
            return PlainTextResponse("invalid signature", status_code=403)
        pool = state["pool"]
        try:
            async with pool.connection() as conn:
                outcome = await _handle(conn, body)
        except (psycopg.OperationalError, TimeoutError) as exc:
            log.error("database unavailable, asking Meta to redeliver: %s", exc)
            return PlainTextResponse("database unavailable", status_code=503)
        return JSONResponse(
            {"inbound": outcome.inbound_stored, "statuses": outcome.statuses_stored},
            background=background(
                sorted(outcome.persons_to_sweep), sorted(outcome.documents_to_sweep)
            ),
        )

    async def poke(request: Request) -> Response:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if (
            not settings.internal_token
            or scheme.lower() != "bearer"
            or not hmac.compare_digest(token.strip().encode(), settings.internal_token.encode())
        ):
            return JSONResponse({"error": "a valid bearer token is required"}, status_code=401)
        try:
            payload = json.loads(await _read_body(request, 64 * 1024))
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
            {"accepted": ids}, status_code=202, background=background(persons, documents)
        )

    async def healthz(request: Request) -> Response:
        try:
            async with state["pool"].connection(timeout=2) as conn:
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
                "schema_version": row["schema_version"],
                "version": __version__,
            }
        )

    return Starlette(
        routes=[
            Route("/webhooks/whatsapp", verify, methods=["GET"]),
            Route("/webhooks/whatsapp", receive, methods=["POST"]),
            Route("/internal/sweep", poke, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


async def _handle(conn: psycopg.AsyncConnection, body: bytes) -> WebhookOutcome:
    """Apply a signed body; anything we cannot use is kept raw, never dropped."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        await _store_raw(conn, body, f"malformed json: {exc}")
        log.warning("malformed webhook JSON stored raw: %s", exc)
        return WebhookOutcome()
    try:
        outcome = await _apply_retrying(conn, payload)
    except psycopg.OperationalError:
        raise
    except Exception as exc:
        # Not a 500: Meta would redeliver the same body for days and it
        # would fail the same way. Keep it for inspection and say so.
        log.exception("webhook could not be applied; stored raw")
        await _store_raw(conn, body, f"unusable: {type(exc).__name__}: {exc}"[:500])
        return WebhookOutcome()
    if outcome.unhandled:
        await _store_raw(
            conn, body, "unhandled: " + ", ".join(sorted(set(outcome.unhandled)))[:480]
        )
    return outcome


async def _apply_retrying(conn: psycopg.AsyncConnection, payload: Any) -> WebhookOutcome:
    """A deadlock between two concurrent batches rolls one back whole: apply it again."""
    for attempt in range(3):
        try:
            return await apply_payload(conn, payload)
        except psycopg.errors.TransactionRollback:
            if attempt == 2:
                raise
            log.info("webhook batch rolled back by a deadlock; applying it again")
            await asyncio.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


async def _store_raw(conn: psycopg.AsyncConnection, body: bytes, reason: str) -> None:
    await conn.execute(QUERIES.insert_raw_webhook, {"reason": reason, "body": body})


async def _sweep_logged(engine: DeliveryEngine, **target: int) -> None:
    try:
        result = await engine.sweep(concurrency=TARGETED_SWEEP_CONCURRENCY, **target)
        if result.claimed:
            log.info("targeted sweep %s: %s", target, result.as_dict())
    except Exception:
        log.exception("targeted sweep %s failed; the heartbeat will retry", target)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="delivery-pipeline service", description="Run the webhook service."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=SERVICE_DEFAULT_PORT)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = Settings.from_env()
    app = create_app(settings, resolve_database_url(settings))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
