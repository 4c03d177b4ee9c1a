"""The Cloud API as the engine calls it: send, upload media, read the number.

A send goes: token → phone number id → latency → payload → injected 5xx →
``Sandbox.accept`` (sandbox/simulated.py: limits, window, record) → answer, or
break the connection mid-answer (``drop_after_accept_rate``), or trickle the
answer for ``stall_ms`` (``stall_after_accept_rate``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from delivery_pipeline.sandbox.arrival import arrival_of
from delivery_pipeline.sandbox.broken_answers import BrokenResponse, StalledResponse
from delivery_pipeline.sandbox.media import read_upload
from delivery_pipeline.sandbox.reads import is_read_mark, mark_read
from delivery_pipeline.sandbox.refusals import Refusal, http_status_of, injected_5xx
from delivery_pipeline.sandbox.simulated import sandbox_of
from delivery_pipeline.sandbox.validation import details, validate_send
from delivery_pipeline.whatsapp.errors import PHONE_NUMBER_ID_SUBCODE
from delivery_pipeline.whatsapp.signature import tokens_match


def _error(refusal: Refusal) -> JSONResponse:
    return JSONResponse(refusal.body(), status_code=refusal.http_status)


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.query_params.get("access_token")


def _identity_refusal(request: Request, method: str) -> Refusal | None:
    """The Graph API's checks before anything else: the token (190), then whether
    it may use this phone number id (100)."""
    sandbox = sandbox_of(request)
    config = sandbox.config
    token = _token(request)
    if token is None or not tokens_match(token, config.access_token):
        sandbox.state.stats.rejected[190] += 1
        return Refusal(
            190, "Error validating access token: the token is invalid or missing.", http_status=401
        )
    phone_number_id = request.path_params["phone_number_id"]
    if not config.serves(phone_number_id):
        sandbox.state.stats.rejected[100] += 1
        return Refusal(
            100,
            f"Unsupported {method} request. Object with ID '{phone_number_id}' does not exist, "
            "cannot be loaded due to missing permissions, or does not support this operation.",
            message=f"Unsupported {method} request.",
            error_type="GraphMethodException",
            subcode=PHONE_NUMBER_ID_SUBCODE,
        )
    return None


async def phone_number(request: Request) -> Response:
    """``GET /{version}/{phone_number_id}``: the number's record, as the Graph API
    answers it to a token allowed to use it (senders ask it before sending)."""
    refusal = _identity_refusal(request, "get")
    if refusal is not None:
        return _error(refusal)
    config = sandbox_of(request).config
    return JSONResponse(
        {
            "verified_name": "Sandbox",
            "code_verification_status": "VERIFIED",
            "display_phone_number": f"+{config.display_phone_number}",
            "quality_rating": "GREEN",
            "platform_type": "CLOUD_API",
            "throughput": {"level": "STANDARD"},
            "id": request.path_params["phone_number_id"],
        }
    )


async def send_message(request: Request) -> Response:
    arrived = arrival_of(request)  # where the throughput window counts it
    sandbox = sandbox_of(request)
    refused = _identity_refusal(request, "post")
    if refused is not None:
        sandbox.state.stats.sends_refused += 1
        return _error(refused)
    try:
        payload = json.loads(await request.body())
    except ValueError:
        payload = None
    delay = sandbox.latency_seconds()
    if delay > 0:
        await asyncio.sleep(delay)
    if is_read_mark(payload):
        try:
            mark_read(sandbox.state, payload, request.path_params["phone_number_id"], time.time())
        except Refusal as refusal:
            return _error(refusal)
        return JSONResponse({"success": True})
    try:
        message = dataclasses.replace(
            validate_send(payload, sandbox.config),
            phone_number_id=request.path_params["phone_number_id"],
        )
        if sandbox.chance(sandbox.config.error_5xx_rate):
            sandbox.state.stats.injected_5xx += 1
            return _error(injected_5xx(sandbox.rng))
        wamid = sandbox.accept(message, arrived)
    except Refusal as refusal:
        sandbox.state.stats.rejected[refusal.code] += 1
        sandbox.state.stats.sends_refused += 1
        return _error(refusal)
    contact = (
        {"input": message.to, "user_id": message.to}
        if message.wa_id is None
        else {"input": message.to, "wa_id": message.wa_id}
    )
    body: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "contacts": [contact],
        "messages": [{"id": wamid}],
    }
    if message.type == "template":
        body["messages"][0]["message_status"] = "accepted"
    if sandbox.chance(sandbox.config.drop_after_accept_rate):
        sandbox.state.stats.dropped += 1
        return BrokenResponse(body)
    if sandbox.chance(sandbox.config.stall_after_accept_rate):
        sandbox.state.stats.stalled += 1
        return StalledResponse(body, sandbox.config.stall_ms / 1000)
    return JSONResponse(body)


async def upload_media(request: Request) -> Response:
    """``POST /{version}/{phone_number_id}/media``: a file for that number (sandbox/media.py)."""
    sandbox = sandbox_of(request)
    refused = _identity_refusal(request, "post")
    if refused is not None:
        return _error(refused)
    number = request.path_params["phone_number_id"]
    config = sandbox.config
    delay = sandbox.latency_seconds()
    if delay > 0:
        await asyncio.sleep(delay)
    try:
        fields, file = await read_upload(request)
        forced = sandbox.state.forced_refusal("", "media", number)
        if forced is not None:
            raise Refusal(
                forced.code, details(forced.code), http_status=http_status_of(forced.code)
            )
        media = sandbox.media.upload(
            number,
            fields,
            file,
            ttl_seconds=config.media_ttl_seconds,
            max_bytes=config.media_max_bytes,
            now=time.time(),
        )
    except Refusal as refusal:
        sandbox.state.stats.rejected[refusal.code] += 1
        return _error(refusal)
    return JSONResponse({"id": media.id})


ROUTES = [
    Route("/{version}/{phone_number_id}/messages", send_message, methods=["POST"]),
    Route("/{version}/{phone_number_id}/media", upload_media, methods=["POST"]),
    # Last: every GET /_sandbox/… would match it too.
    Route("/{version}/{phone_number_id}", phone_number, methods=["GET"]),
]
