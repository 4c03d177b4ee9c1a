"""The ``/_sandbox/…`` controls tests and the CLI drive (behind sandbox/guard.py):
people writing, pressing, switching off; faults, forced refusals, templates'
lives; what was received, counted and refused. Contract: docs/reference/sandbox.md."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from delivery_pipeline.model import bsuid, e164
from delivery_pipeline.sandbox.config import RUNTIME_KEYS, SandboxConfig
from delivery_pipeline.sandbox.control_bodies import (
    NewNumber,
    Presence,
    RefusalOrder,
    Unreachable,
    Written,
    first_wrong,
    parse,
)
from delivery_pipeline.sandbox.documents import listing
from delivery_pipeline.sandbox.memory import ForcedRefusal, Person
from delivery_pipeline.sandbox.simulated import described, sandbox_of


def _control_error(message: str, status: int = 400, **extra: Any) -> JSONResponse:
    error = {"message": message, "type": "SandboxError", "code": 100, **extra}
    return JSONResponse({"error": error}, status_code=status)


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


async def person_writes(request: Request) -> Response:
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    sandbox = sandbox_of(request)
    wrong = first_wrong(Written, data)
    if wrong == "text":
        return _control_error(
            'body must be {"text": "<non-empty string>", "name"?: "<string>", '
            '"username"?: "<string>", "to"?: "<business phone number id>"}'
        )
    if wrong in ("name", "username"):
        return _control_error(f"{wrong} must be a string")
    if wrong == "to":
        return _control_error(_not_played(sandbox.config, (data or {}).get("to")))
    body = Written.model_validate(data)
    if body.to is not None and not sandbox.config.serves(body.to):
        return _control_error(_not_played(sandbox.config, body.to))
    return JSONResponse(
        {"id": sandbox.person_writes(number, body.text, body.name, body.username, body.to)}
    )


def _not_played(config: SandboxConfig, number: object) -> str:
    played = ", ".join([config.phone_number_id, *config.numbers])
    return f"the sandbox plays no business number {number!r}: it plays {played}"


async def person_presses(request: Request) -> Response:
    """``POST /_sandbox/people/{number}/press {"button": "Later" | 1, "message_id"?,
    "interactive"?: false}``: the person taps a quick reply on a message they got."""
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    button = data.get("button") if data else None
    message_id = data.get("message_id") if data else None
    interactive = data.get("interactive", False) if data else False
    if isinstance(button, bool) or not isinstance(button, str | int) or button == "":
        return _control_error(
            'body must be {"button": "<its text>" | <index>, "message_id"?: "<wamid>", '
            '"interactive"?: <bool>}'
        )
    if message_id is not None and not isinstance(message_id, str):
        return _control_error("message_id must be a string")
    if not isinstance(interactive, bool):
        return _control_error("interactive must be a boolean")
    try:
        wamid = sandbox_of(request).person_presses(number, button, message_id, interactive)
    except LookupError as exc:
        return _control_error(str(exc), status=404)
    return JSONResponse({"id": wamid})


async def person_number(request: Request) -> Response:
    """``POST /_sandbox/people/{number}/number {"new_number": "+E164"}``: the person
    changes their phone number (a ``user_changed_number`` system message follows)."""
    number = _number(request)
    data = await _json_object(request)
    body = parse(NewNumber, data)
    new_number = e164(body.new_number) if body is not None else None
    if number is None or not number.startswith("+"):
        return _control_error("the number must be E.164, e.g. +15551234567")
    if new_number is None:
        return _control_error('body must be {"new_number": "<E.164 number>"}')
    sandbox = sandbox_of(request)
    if new_number in sandbox.state.people:
        return _control_error(f"{new_number} is somebody else's", status=409)
    return JSONResponse({"id": sandbox.person_changes_number(number, new_number)})


async def person_inbox(request: Request) -> Response:
    number = _number(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    person = sandbox_of(request).state.people.get(number)
    return JSONResponse(person.inbox if person else [])


async def person_detail(request: Request) -> Response:
    number = _number(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    sandbox = sandbox_of(request)
    sandbox.settle_held(time.time())
    person = sandbox.state.people.get(number) or Person(number)
    return JSONResponse(described(sandbox, person, time.time()))


async def person_window(request: Request) -> Response:
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    if data is None or "age_seconds" not in data or set(data) - {"age_seconds", "phone_number_id"}:
        return _control_error(
            'body must be {"age_seconds": <seconds> | null, "phone_number_id"?: "<id>"}'
        )
    age = data["age_seconds"]
    if age is not None and (isinstance(age, bool) or not isinstance(age, int | float) or age < 0):
        return _control_error("age_seconds must be a number >= 0 or null")
    sandbox = sandbox_of(request)
    config = sandbox.config
    chosen = data.get("phone_number_id")
    if chosen is not None and (not isinstance(chosen, str) or not config.serves(chosen)):
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


async def person_unreachable(request: Request) -> Response:
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    body = parse(Unreachable, data)
    if body is None:
        return _control_error('body must be {"unreachable": true|false, "mode"?: "sync"|"async"}')
    sandbox = sandbox_of(request)
    person = sandbox.state.person(number)
    person.unreachable = body.mode if body.unreachable else None
    return JSONResponse(described(sandbox, person, time.time()))


async def template_life(request: Request) -> Response:
    sandbox = sandbox_of(request)
    name, language = request.path_params["name"], request.path_params["language"]
    if request.method == "GET":
        return JSONResponse(sandbox.templates.life(name, language).view(name, language))
    data = await _json_object(request)
    if data is None:
        return _control_error(
            "body must be a JSON object (see docs/reference/sandbox.md, Templates)"
        )
    try:
        return JSONResponse(sandbox.change_template(name, language, data))
    except ValueError as exc:
        return _control_error(str(exc))


async def templates(request: Request) -> Response:
    sandbox = sandbox_of(request)
    return JSONResponse(listing(sandbox.config.templates, sandbox.templates))


async def person_presence(request: Request) -> Response:
    """``POST /_sandbox/people/{number}/presence {"online": false}``: the phone is off,
    what is sent to it is held; ``true``: it is back (sandbox/presence.py)."""
    number = _number(request)
    data = await _json_object(request)
    body = parse(Presence, data)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    if body is None:
        return _control_error('body must be {"online": true|false}')
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


_REFUSAL_BODY = (
    'body must be {"code": <int>, "mode"?: "sync"|"async", "to"?: "+E164", '
    '"type"?: "text"|"template"|"document"|"media", "count"?: <int >= 1> | null, '
    '"phone_number_id"?: "<id>"}'
)


async def refusals(request: Request) -> Response:
    """Any error code on demand: ``POST`` adds one (to every send or one number's,
    of every type or one, ``count`` times or until ``DELETE``), ``GET`` lists them."""
    state = sandbox_of(request).state
    if request.method == "DELETE":
        state.refusals.clear()
    elif request.method == "POST":
        order = parse(RefusalOrder, await _json_object(request))
        if order is None:
            return _control_error(_REFUSAL_BODY)
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
