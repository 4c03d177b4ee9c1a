"""The ``/_sandbox/…`` controls tests and the CLI drive (behind sandbox/guard.py):
people writing, pressing, switching off; faults, forced refusals, templates'
lives; what was received, counted and refused. Contract: docs/reference/sandbox.md."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from delivery_pipeline.model import bsuid, e164
from delivery_pipeline.sandbox.config import RUNTIME_KEYS, SandboxConfig
from delivery_pipeline.sandbox.control_bodies import (
    Body,
    Misfit,
    NewNumber,
    Presence,
    Press,
    RefusalOrder,
    TemplateChange,
    Unreachable,
    Window,
    Written,
    parse,
)
from delivery_pipeline.sandbox.documents import listing
from delivery_pipeline.sandbox.memory import ForcedRefusal, Person
from delivery_pipeline.sandbox.simulated import described, sandbox_of


def _control_error(message: str, status: int = 400, **extra: Any) -> JSONResponse:
    error = {"message": message, "type": "SandboxError", "code": 100, **extra}
    return JSONResponse({"error": error}, status_code=status)


_NOT_E164 = "the number must be E.164, e.g. +15551234567"


def _number(request: Request) -> str | None:
    """The path's person: a phone number as E.164 (``+1555…``, ``%2B1555…`` or bare
    digits), or a username user's business-scoped user id (``US.1349…``)."""
    number = request.path_params["number"].strip()
    if (scoped := bsuid(number)) is not None:
        return scoped
    if not number.startswith("+"):
        number = "+" + number
    return e164(number)


async def _json_object(request: Request) -> dict[str, Any] | None:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


async def _body(request: Request, model: type[Body]) -> Body | JSONResponse:
    """The request's JSON body as ``model``, or the error answer that says what is wrong."""
    body = parse(model, await _json_object(request))
    return _control_error(body.message) if isinstance(body, Misfit) else body


Handler = Callable[[Request], Awaitable[Response]]


def _person_control(
    model: type[Body],
) -> Callable[[Callable[[Request, str, Body], Awaitable[Response]]], Handler]:
    """A control on one person: ``handle(request, number, body)`` runs with the path's
    person and the request's body as ``model``; a request with either wrong is answered
    with what is wrong."""

    def wrap(handle: Callable[[Request, str, Body], Awaitable[Response]]) -> Handler:
        @functools.wraps(handle)
        async def control(request: Request) -> Response:
            number = _number(request)
            if number is None:
                return _control_error(_NOT_E164)
            body = await _body(request, model)
            if isinstance(body, JSONResponse):
                return body
            return await handle(request, number, body)

        return control

    return wrap


@_person_control(Written)
async def person_writes(request: Request, number: str, body: Written) -> Response:
    sandbox = sandbox_of(request)
    if body.to is not None and not sandbox.config.serves(body.to):
        return _control_error(_not_played(sandbox.config, body.to))
    return JSONResponse(
        {"id": sandbox.person_writes(number, body.text, body.name, body.username, body.to)}
    )


def _not_played(config: SandboxConfig, number: object) -> str:
    played = ", ".join([config.phone_number_id, *config.numbers])
    return f"the sandbox plays no business number {number!r}: it plays {played}"


@_person_control(Press)
async def person_presses(request: Request, number: str, press: Press) -> Response:
    """``POST /_sandbox/people/{number}/press {"button": "Later" | 1, "message_id"?,
    "interactive"?: false}``: the person taps a quick reply on a message they got."""
    try:
        wamid = sandbox_of(request).person_presses(
            number, press.button, press.message_id, press.interactive
        )
    except LookupError as exc:
        return _control_error(str(exc), status=404)
    return JSONResponse({"id": wamid})


@_person_control(NewNumber)
async def person_number(request: Request, number: str, body: NewNumber) -> Response:
    """``POST /_sandbox/people/{number}/number {"new_number": "+E164"}``: the person
    changes their phone number (a ``user_changed_number`` system message follows)."""
    if not number.startswith("+"):  # a username user has no number to change
        return _control_error(_NOT_E164)
    sandbox = sandbox_of(request)
    if body.new_number in sandbox.state.people:
        return _control_error(f"{body.new_number} is somebody else's", status=409)
    return JSONResponse({"id": sandbox.person_changes_number(number, body.new_number)})


async def person_inbox(request: Request) -> Response:
    number = _number(request)
    if number is None:
        return _control_error(_NOT_E164)
    person = sandbox_of(request).state.people.get(number)
    return JSONResponse(person.inbox if person else [])


async def person_detail(request: Request) -> Response:
    number = _number(request)
    if number is None:
        return _control_error(_NOT_E164)
    sandbox = sandbox_of(request)
    sandbox.settle_held(time.time())
    person = sandbox.state.people.get(number) or Person(number)
    return JSONResponse(described(sandbox, person, time.time()))


@_person_control(Window)
async def person_window(request: Request, number: str, window: Window) -> Response:
    sandbox = sandbox_of(request)
    config = sandbox.config
    chosen, age = window.phone_number_id, window.age_seconds
    if chosen is not None and not config.serves(chosen):
        return _control_error(_not_played(config, chosen))
    # Without a number: as if they last wrote to every number the sandbox plays.
    numbers = [chosen] if chosen is not None else [config.phone_number_id, *config.numbers]
    person = sandbox.state.person(number)
    now = time.time()
    for business_number in numbers:
        if age is None:
            person.wrote_to.pop(business_number, None)
        else:
            person.wrote_to[business_number] = now - age
    return JSONResponse(described(sandbox, person, now))


@_person_control(Unreachable)
async def person_unreachable(request: Request, number: str, body: Unreachable) -> Response:
    sandbox = sandbox_of(request)
    person = sandbox.state.person(number)
    person.unreachable = body.mode if body.unreachable else None
    return JSONResponse(described(sandbox, person, time.time()))


async def template_life(request: Request) -> Response:
    sandbox = sandbox_of(request)
    name, language = request.path_params["name"], request.path_params["language"]
    if request.method == "GET":
        return JSONResponse(sandbox.templates.life(name, language).view(name, language))
    change = await _body(request, TemplateChange)
    if isinstance(change, JSONResponse):
        return change
    return JSONResponse(sandbox.change_template(name, language, change))


async def templates(request: Request) -> Response:
    sandbox = sandbox_of(request)
    return JSONResponse(listing(sandbox.config.templates, sandbox.templates))


@_person_control(Presence)
async def person_presence(request: Request, number: str, body: Presence) -> Response:
    """``POST /_sandbox/people/{number}/presence {"online": false}``: the phone is off,
    what is sent to it is held; ``true``: it is back (sandbox/presence.py)."""
    sandbox = sandbox_of(request)
    person = sandbox.state.person(number)
    sandbox.set_presence(person, body.online)
    return JSONResponse(described(sandbox, person, time.time()))


async def media_list(request: Request) -> Response:
    return JSONResponse(sandbox_of(request).media.listing(time.time()))


async def media_content(request: Request) -> Response:
    """``GET /_sandbox/media/{media_id}``: the uploaded file's bytes, as uploaded."""
    media = sandbox_of(request).media.get(request.path_params["media_id"])
    if media is None:
        return _control_error(f"no media {request.path_params['media_id']!r}", status=404)
    disposition = f"attachment; filename*=UTF-8''{quote(media.filename)}"
    return Response(
        media.content, media_type=media.mime_type, headers={"Content-Disposition": disposition}
    )


async def refusals(request: Request) -> Response:
    """Any error code on demand: ``POST`` adds one (to every send or one number's,
    of every type or one, ``count`` times or until ``DELETE``), ``GET`` lists them."""
    state = sandbox_of(request).state
    if request.method == "DELETE":
        state.refusals.clear()
    elif request.method == "POST":
        order = await _body(request, RefusalOrder)
        if isinstance(order, JSONResponse):
            return order
        state.refusals.append(
            ForcedRefusal(
                order.code,
                order.mode,
                order.to,
                order.type,
                order.count,
                sender=order.phone_number_id,
            )
        )
    return JSONResponse([r.describe() for r in state.refusals])


async def inboxes(request: Request) -> Response:
    people = sandbox_of(request).state.people
    return JSONResponse({number: p.inbox for number, p in people.items() if p.inbox})


async def faults(request: Request) -> Response:
    sandbox = sandbox_of(request)
    if request.method == "GET":
        return JSONResponse(sandbox.config.public())
    data = await _json_object(request)
    if data is None:
        return _control_error("body must be a JSON object of config keys")
    unknown = sorted(set(data) - set(RUNTIME_KEYS))
    if unknown:
        return _control_error(
            f"unknown keys: {', '.join(unknown)}", unknown_keys=unknown, known_keys=RUNTIME_KEYS
        )
    try:
        sandbox.reconfigure(data)
    except ValueError as exc:
        return _control_error(str(exc))
    return JSONResponse(sandbox.config.public())


async def stats(request: Request) -> Response:
    sandbox = sandbox_of(request)
    sandbox.settle_held(time.time())
    return JSONResponse(sandbox.state.stats_view(time.monotonic(), sandbox.outbox.pending))


async def failures(request: Request) -> Response:
    return JSONResponse(sandbox_of(request).state.failures)


async def reset(request: Request) -> Response:
    sandbox = sandbox_of(request)
    sandbox.reset()
    return JSONResponse({"reset": True, "config": sandbox.config.public()})


async def ops(request: Request) -> Response:
    alerts = sandbox_of(request).state.ops_alerts
    if request.method == "GET":
        return JSONResponse(alerts)
    try:
        alerts.append(json.loads(await request.body()))
    except ValueError:
        return _control_error("body must be JSON")
    return Response("ok", media_type="text/plain")


ROUTES = [
    Route("/_sandbox/people/{number}/messages", person_writes, methods=["POST"]),
    Route("/_sandbox/people/{number}/inbox", person_inbox, methods=["GET"]),
    Route("/_sandbox/people/{number}/window", person_window, methods=["POST"]),
    Route("/_sandbox/people/{number}/unreachable", person_unreachable, methods=["POST"]),
    Route("/_sandbox/people/{number}/number", person_number, methods=["POST"]),
    Route("/_sandbox/people/{number}/press", person_presses, methods=["POST"]),
    Route("/_sandbox/people/{number}/presence", person_presence, methods=["POST"]),
    Route("/_sandbox/people/{number}", person_detail, methods=["GET"]),
    Route("/_sandbox/inboxes", inboxes, methods=["GET"]),
    Route("/_sandbox/templates", templates, methods=["GET"]),
    Route("/_sandbox/templates/{name}/{language}", template_life, methods=["GET", "POST"]),
    Route("/_sandbox/faults", faults, methods=["GET", "POST"]),
    Route("/_sandbox/refusals", refusals, methods=["GET", "POST", "DELETE"]),
    Route("/_sandbox/stats", stats, methods=["GET"]),
    Route("/_sandbox/failures", failures, methods=["GET"]),
    Route("/_sandbox/reset", reset, methods=["POST"]),
    Route("/_sandbox/ops", ops, methods=["GET", "POST"]),
    Route("/_sandbox/media", media_list, methods=["GET"]),
    Route("/_sandbox/media/{media_id}", media_content, methods=["GET"]),
]
